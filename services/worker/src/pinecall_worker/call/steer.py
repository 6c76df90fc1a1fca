"""What speaks into a running call, or ends it, from outside its model: the app's commands and
the call's limit (issue 16, "The worker runs the call's agent").

* The app's ``call.command`` entries reach the job through call-log's long poll
  (``GET /v1/calls/{call}/commands``; :meth:`~pinecall_clients.calllog.CallLogClient.commands`,
  retried 0.5 s to 5 s while nothing answers, as the writer is), read on from the call's log head
  at its open, so a command a dead worker already ran is not run again. ``say`` is spoken
  (``AgentSession.say``); ``end`` says its text, if any, then ends the call ``completed`` and
  hangs the caller up. A command the session refuses (it is closing; a kind this release does not
  know; a ``say`` with nothing to say) is a ``call.error`` entry (``source: command``).
* The call's limit (:attr:`~pinecall_worker.call.agent.CallAgent.max_call_seconds`, counted from
  its open on the log): the agent says ``PINECALL_LIMIT_SAYS``, and the call ends ``timeout``,
  the reaper's outcome for a call past its ceiling (the reaper's sweep stays the backstop).

Hanging up is what livekit-agents' ``EndCallTool`` does (``beta/tools/end_call.py``): the session
shuts down once its last speech played out, and the room is deleted as the job shuts down, which
disconnects the caller (a SIP leg too).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

from livekit.agents import AgentSession, JobContext

from pinecall_clients.calllog import CallLogClient
from pinecall_clients.errors import CallLogRefused
from pinecall_contracts.calls import CallCommandEntry, Outcome
from pinecall_worker.call.record import Recorder

_log = logging.getLogger(__name__)

COMMAND_WAIT_S = 20.0
"""How long call-log holds one command poll when there is nothing to say (at most 30 s)."""
LAST_WORDS_S = 30.0
"""The longest a hang-up waits for its last sentence to play out before it ends the call."""


class Steering:
    """The app's commands and the limit of one call, on its session."""

    def __init__(
        self,
        ctx: JobContext,
        session: AgentSession[Any],
        recorder: Recorder,
        client: CallLogClient,
    ) -> None:
        self.ctx = ctx
        self.session = session
        self.recorder = recorder
        self.client = client
        self.hanging_up = False

    async def follow(self, after: int) -> None:
        """Run the app's commands written after seq ``after``, in order, until the call is over
        (or the log refuses the poll: the call is no longer this worker's to follow)."""
        call = self.recorder.call
        while True:
            try:
                page = await self.client.commands(call, after, wait_s=COMMAND_WAIT_S)
            except CallLogRefused as exc:
                _log.error("call %s: its commands cannot be followed: %s", call, exc)
                return
            for command in page.commands:
                after = command.seq
                await self.run(command)
            if page.state != "open":
                return

    async def run(self, command: CallCommandEntry) -> None:
        """Do ``command``; one the session refuses is a ``call.error`` entry."""
        try:
            if command.kind == "say" and command.text:
                self.session.say(command.text)
            elif command.kind == "end":
                await self.hang_up("completed", "the app ended the call", command.text)
            else:
                raise ValueError(f"no {command.kind} command with text {command.text!r}")
        except (RuntimeError, ValueError) as exc:
            _log.warning("call %s: command %s refused: %s", self.recorder.call, command.id, exc)
            self.recorder.command_refused(command.id, command.kind, str(exc))

    async def keep_to(self, limit_s: float, opened_at: float, last_sentence: str) -> None:
        """At ``limit_s`` seconds past ``opened_at`` (Unix seconds), say ``last_sentence`` and
        end the call ``timeout``."""
        await asyncio.sleep(max(0.0, opened_at + limit_s - time.time()))
        reason = f"the call reached its limit of {limit_s:g} s (max_call_seconds)"
        with contextlib.suppress(RuntimeError):  # the session is closing: it ends anyway
            self.session.interrupt()  # what the agent was saying gives way to the last sentence
            await self.hang_up("timeout", reason, last_sentence)

    async def hang_up(self, outcome: Outcome, reason: str, last: str | None) -> None:
        """Settle ``outcome``, say ``last`` (if any) and wait for it to play out (at most
        :data:`LAST_WORDS_S`), then shut the session down and delete the room as the job ends.
        Once only: a second hang-up (the limit during an app's end) does nothing."""
        if self.hanging_up:
            return
        self.hanging_up = True
        self.recorder.settle(outcome, reason)
        if last:
            said = self.session.say(last, allow_interruptions=False)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(LAST_WORDS_S):
                    await said.wait_for_playout()

        async def delete_room() -> None:
            await self.ctx.delete_room()

        self.ctx.add_shutdown_callback(delete_room)
        self.session.shutdown()
