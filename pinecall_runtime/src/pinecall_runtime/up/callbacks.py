"""``up``'s call backs (issue 18, acceptance 6): the follow-ups the dispatcher dials for the
callers the overflow answered, waited for at the end of the calls and counted in the report.

Nothing here dials: the run's dispatcher does, as in production (its follow-ups,
``pinecall_dispatcher.followups``), through each environment's outbound trunk, which
:meth:`~pinecall_runtime.up.outbound.Outbound.prepare` makes on the stand-ins whenever callers
ring, and the stand-ins' default callee (``PUT /lab/control/sip/callee``) answers the callers'
numbers and hangs up by itself. A visitor's call back names a contact, no number: the dialler
gives it up (``no_number``), a person's to call.

Once the callers are done, :meth:`CallBacks.settle` waits, at most :data:`SETTLE_WITHIN_S`, until
every call back on the agent's logs is answered or given up, reading the logs again at each call
event the run hears (a try's call ending) and every :data:`READ_EVERY_S` at least (a try's
entries follow its call's end). The counts are :func:`pinecall_runtime.up.report.call_backs`'.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

from pinecall_clients.calllog import CallLogClient
from pinecall_clients.errors import CallLogError
from pinecall_contracts.calls import AgentEntry
from pinecall_runtime.up import report as reporting
from pinecall_runtime.up.outbound import Outbound
from pinecall_runtime.up.stage import ENVIRONMENTS, Run
from pinecall_runtime.up.watch import Watch

SETTLE_WITHIN_S = 120.0
"""The longest ``up`` waits after its callers for the call backs to be answered or given up
(a dial within the follow-ups' round, a callee who listens 8 s, the try's end applied)."""
READ_EVERY_S = 2.0
"""The agent's logs are read again at least this often while waiting."""

FOLLOWUP_ENV = {
    # The follow-ups' timers for a run of minutes, not a day of calls: a call back whose line was
    # not ready (the seed's hour) is tried again in 15 s, one not reached (half an hour) in 10 s,
    # and the dialler's round is 2 s, so what the run's callers are owed is dialled, and its
    # outcome on the log, while the run lasts and its report counts it.
    "PINECALL_FOLLOWUP_EVERY_S": "2",
    "PINECALL_FOLLOWUP_NOT_READY_S": "15",
    "PINECALL_FOLLOWUP_RETRY_S": "10",
}
"""The dispatcher's ``PINECALL_FOLLOWUP_*`` in ``up``."""


class CallBacks:
    """The call backs of ``agent`` in every environment of the run."""

    def __init__(self, run: Run, call_log: str, agent: str, dialling: Outbound) -> None:
        self.run, self.call_log, self.agent, self.dialling = run, call_log, agent, dialling

    async def entries(self) -> dict[str, list[AgentEntry]]:
        """Each environment's ``callback.*`` entries of the agent's log (an environment whose
        log does not answer: none)."""
        found: dict[str, list[AgentEntry]] = {}
        async with CallLogClient(self.call_log, self.run.operator_key) as log:
            for environment in ENVIRONMENTS:
                try:
                    got = await log.agent_log(self.agent, environment=environment, within_s=5.0)
                except CallLogError:
                    found[environment] = []
                    continue
                found[environment] = [e for e in got.entries if e.kind.startswith("callback.")]
        return found

    async def settle(self, watch: Watch, hurry: asyncio.Event) -> dict[str, Any]:
        """Wait until no call back is owed, :data:`SETTLE_WITHIN_S` at most or until ``hurry``
        (Ctrl-C again); the report's counts then (:func:`report.call_backs`)."""
        loop = asyncio.get_running_loop()
        until = loop.time() + SETTLE_WITHIN_S
        while True:
            counts = reporting.call_backs(await self.entries(), await self.dialling.legs())
            if not counts["waiting"] or hurry.is_set() or loop.time() >= until:
                return counts
            with contextlib.suppress(TimeoutError):  # a call ended, or the next read's time
                await watch.changes.wait_for(_another_end(watch, hurry), READ_EVERY_S)


def _another_end(watch: Watch, hurry: asyncio.Event) -> Callable[[], bool]:
    """Whether a call ended since now (or ``hurry`` is set)."""
    ended = len(watch.ended())
    return lambda: len(watch.ended()) != ended or hurry.is_set()
