"""Which agents exist, as call-log says (issue 16, "Agents, as data": "a ring for an agent that
does not exist in that environment is refused at admission with a named reason").

An agent is an org's in one environment (``GLOSSARY.md``). The token endpoint and the placing of
a ring ask :meth:`Agents.lookup` before anything is offered; call-log answers with the service
key (``GET /v1/agents/{agent}?org=&environment=``), and the answer is remembered ``cache_s``
(5 s, as a verified key is), so a burst of rings for one agent costs one round trip and a
definition put is seen within ``cache_s``. One lookup per agent is in flight at a time: the
rings that wait for it share its answer.

The answer is one of :data:`Known`:

- ``defined``: call-log holds the agent;
- ``unknown``: it does not (404), or the ring names no org an agent can be of (an org outside
  ``ORG_PATTERN``, the empty one of a ring with no ``CallRing`` included): refused
  ``unknown_agent``, asked of nobody;
- ``unanswered``: call-log did not answer in :data:`LOOKUP_WITHIN_S` (one try, not retried),
  refused the service key, or answered what is no ``AgentVersion``. **It fails open**: the last answer known for the agent stands (an
  agent known unknown stays refused), and an agent never answered for is taken as defined. A
  caller is never refused because a lookup failed: call-log down is the call's problem whether
  the ring passes or not (its worker's open retries it, 0.5 to 5 s for 30 s), and refusing would
  turn a call-log restart into refused callers; what fails open is only a tenant's mistake (an
  agent that does not exist) going unnoticed for as long as call-log is away. Call-log is not
  asked again for that agent for ``cache_s``, so an outage costs each agent one timeout per
  ``cache_s``, not one per ring.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from typing import Literal

import msgspec

from pinecall_clients.calllog import CallLogClient
from pinecall_clients.errors import AgentUnknown, CallLogError
from pinecall_contracts.ids import ORG_PATTERN

_log = logging.getLogger(__name__)
Known = Literal["defined", "unknown", "unanswered"]
LOOKUP_WITHIN_S = 1.0
"""How long a ring waits for call-log's answer about its agent before it fails open (seconds)."""
REMEMBERED = 10_000
"""Agents remembered at most (the oldest answer is forgotten first)."""
_ORG = re.compile(ORG_PATTERN)

Key = tuple[str, str, str]
"""``(environment, org, agent)``."""


class Agents:
    """The agents that exist, read from call-log with the service key and remembered
    ``cache_s`` seconds (the module docstring says what a lookup answers)."""

    def __init__(
        self, call_log: CallLogClient, *, cache_s: float = 5.0, within_s: float = LOOKUP_WITHIN_S
    ) -> None:
        self.call_log = call_log
        self.cache_s = cache_s
        self.within_s = within_s
        self._answers: dict[Key, tuple[float, bool | None]] = {}
        """Per agent: until when the answer stands (monotonic), and whether call-log holds it
        (None: call-log never answered for it)."""
        self._asking: dict[Key, asyncio.Task[Known]] = {}

    async def lookup(self, environment: str, org: str, agent: str) -> Known:
        """Whether ``org``'s ``agent`` is defined in ``environment``."""
        if not _ORG.match(org):
            return "unknown"
        key = (environment, org, agent)
        answer = self._answers.get(key)
        if answer is not None and answer[0] > time.monotonic():
            return _said(answer[1])
        asking = self._asking.get(key)
        if asking is None:
            asking = self._asking[key] = asyncio.create_task(self._ask(key))
            asking.add_done_callback(lambda _: self._asking.pop(key, None))
        # shielded: a ring that stops waiting (its caller gone) leaves the answer to the others
        return await asyncio.shield(asking)

    async def _ask(self, key: Key) -> Known:
        environment, org, agent = key
        try:
            async with asyncio.timeout(self.within_s):
                await self.call_log.agent(
                    agent, org=org, environment=environment, within_s=None, attempts=1
                )
            defined: bool | None = True
        except AgentUnknown:
            defined = False
        except (CallLogError, TimeoutError, msgspec.MsgspecError) as exc:
            last = self._answers.get(key)
            defined = last[1] if last is not None else None
            _log.warning(
                "agent %s of %s in %s not read from call-log (%s): %s",
                agent,
                org,
                environment,
                exc or f"no answer in {self.within_s:.0f} s",
                "the last answer stands" if defined is not None else "taken as defined",
            )
        self._answers.pop(key, None)  # re-inserted last: the oldest answer goes first
        self._answers[key] = (time.monotonic() + self.cache_s, defined)
        if len(self._answers) > REMEMBERED:
            del self._answers[next(iter(self._answers))]
        return _said(defined) if defined is not None else "unanswered"


def _said(defined: bool | None) -> Known:
    if defined is None:
        return "unanswered"
    return "defined" if defined else "unknown"
