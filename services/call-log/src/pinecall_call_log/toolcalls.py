"""A replica's tool round trips (seed 002, "The gateway restarts").

``tool.call`` is written once per id; the app holding the agent hears it once on NATS
(``<ns>.calls.tool.asked.<env>.<agent>``, a ToolAsked) and answers through the service, ``POST
/v1/calls/{call}/tools/{id}/result`` with its app key, or on its socket (:meth:`ToolCalls.answer`,
the HTTP answer's path too). The result is written once, as ``tool.result``, and said on
``<ns>.calls.tool.result.<call>``; every replica listens there, so a retry of the same id waiting
on any replica wakes at once. A waiter registers, then reads the log, then waits out what is left
of the deadline counted from the ``tool.call``: a result that lands between the read and the wait
is heard, one that landed before is read. Past the deadline the log gets ``tool.result`` with
``error: "timeout"`` (once).

The replica's app sockets (:class:`~pinecall_call_log.sockets.hub.Hub`) are told of each tool
asked: sent as ``tool.call`` to the socket holding its call; the ToolAsked said on NATS reaches
the replica holding it; one nobody holds waits in the log for the next holder.
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
from prometheus_client import Histogram

from pinecall_call_log import domain
from pinecall_call_log.sockets.hub import Hub
from pinecall_call_log.store import Store
from pinecall_call_log.store.tools import ToolState
from pinecall_contracts.appsocket import ToolCallFrame
from pinecall_contracts.calls import CallRecord, ToolAsked, ToolCall, ToolResult
from pinecall_contracts.metrics import LATENCY_BUCKETS_S
from pinecall_servicekit import calltrace, db
from pinecall_servicekit.bus import Bus
from pinecall_servicekit.changes import Changes
from pinecall_servicekit.errors import Unprocessable


class ToolCalls:
    """The tool calls asked and answered through one replica; :meth:`start` listens for the
    results written on any replica, :meth:`stop` cancels the waits."""

    def __init__(
        self,
        store: Store,
        bus: Bus,
        hub: Hub,
        changes: Changes,
        identity: Callable[[str], Awaitable[CallRecord]],
        appended: Callable[[str, int], Awaitable[None]],
    ) -> None:
        """``identity`` is what a call is (:meth:`CallLogService.identity`); ``appended`` says a
        call's log grew; ``changes`` is notified when a waiter starts waiting."""
        self.store, self.bus, self.hub, self.changes = store, bus, hub, changes
        self.identity, self.appended = identity, appended
        self._waiters: dict[tuple[str, str], list[asyncio.Future[ToolResult]]] = defaultdict(list)
        self.round_trip = Histogram(
            "pinecall_tool_round_trip_seconds",
            "from a worker's tool call asked to the app's result on the log",
            ["environment"],
            buckets=LATENCY_BUCKETS_S,
            registry=None,
        )

    async def start(self) -> None:
        await self.bus.subscribe(self.bus.subjects.tool_results, ToolResult, self._heard)

    def stop(self) -> None:
        for futures in self._waiters.values():
            for future in futures:
                future.cancel()

    async def run(self, call: str, tool: ToolCall) -> ToolResult:
        """The tool call's one result: asked once, joined by every retry, on any replica.
        ``Unprocessable`` for arguments over ``calls.MAX_ENTRY_BYTES`` as JSON."""
        asking = {"id": tool.id, "name": tool.name, "arguments": tool.arguments}
        if (why := domain.entry_too_large("tool.call", asking)) is not None:
            raise Unprocessable(why)
        record = await self.identity(call)
        started = time.perf_counter()
        state = await self.store.tools.ask(call, tool, db.utcnow())
        if state.result is not None:
            return state.result
        result = await self._wait(call, tool, record, state)
        if state.asked:  # the first ask's round trip; a retry joins it part way
            self.round_trip.labels(record.environment).observe(time.perf_counter() - started)
        return result

    async def _wait(
        self, call: str, tool: ToolCall, record: CallRecord, state: ToolState
    ) -> ToolResult:
        key = (call, tool.id)
        future: asyncio.Future[ToolResult] = asyncio.get_running_loop().create_future()
        self._waiters[key].append(future)
        await self.changes.notify()
        try:
            frame = ToolCallFrame(
                call=call,
                id=tool.id,
                name=tool.name,
                arguments=tool.arguments,
                deadline=state.deadline,
                seq=state.seq,
                traceparent=calltrace.traceparent(),
            )
            if state.asked:
                fields = msgspec.structs.asdict(frame)
                del fields["traceparent"]  # on NATS it travels in the headers
                asked = ToolAsked(
                    agent=record.agent,
                    environment=record.environment,
                    **fields,
                )
                await self.bus.publish(
                    self.bus.subjects.tool_asked(record.environment, record.agent), asked
                )
                self.hub.tool_asked(frame)
            else:  # a retry: its socket may have it, or a draining one still run it
                await self.hub.asked_again(frame)
            held = await self.store.tools.result(call, tool.id)
            if held is not None:
                return held
            left = (state.deadline - db.utcnow()).total_seconds()
            try:
                return await asyncio.wait_for(asyncio.shield(future), max(left, 0.0))
            except TimeoutError:
                result, wrote = await self.store.tools.finish(
                    call, tool.id, None, "timeout", db.utcnow()
                )
                if wrote:
                    await self._tool_done(result)
                return result
        finally:
            self._waiters[key].remove(future)
            if not self._waiters[key]:
                del self._waiters[key]

    async def answer_tool(
        self, call: str, tool_id: str, result: Any, error: str | None
    ) -> ToolResult:
        """The app's answer: written once; a second answer gets the first."""
        answer, _ = await self.answer(call, tool_id, result, error)
        return answer

    async def answer(
        self, call: str, tool_id: str, result: Any, error: str | None, *, in_time: bool = False
    ) -> tuple[ToolResult, bool]:
        """The app's answer and whether it was written now (``in_time``: refused past the
        deadline, ``PastDeadline``); the waiters on every replica wake. ``Unprocessable`` for
        an answer over ``calls.MAX_ENTRY_BYTES`` as JSON (nothing written)."""
        data = {"id": tool_id, "result": result, "error": error}
        if (why := domain.entry_too_large("tool.result", data)) is not None:
            raise Unprocessable(why)
        answer, wrote = await self.store.tools.finish(
            call, tool_id, result, error, db.utcnow(), in_time=in_time
        )
        if wrote:
            await self._tool_done(answer)
        return answer, wrote

    def waiting(self, call: str, tool_id: str) -> int:
        """Requests of this tool call waiting on this replica now."""
        return len(self._waiters.get((call, tool_id), []))

    async def _tool_done(self, result: ToolResult) -> None:
        self._wake(result)
        await self.bus.publish(self.bus.subjects.tool_result(result.call), result)
        await self.appended(result.call, result.seq)

    async def _heard(self, result: ToolResult) -> None:
        self._wake(result)

    def _wake(self, result: ToolResult) -> None:
        for future in self._waiters.get((result.call, result.id), []):
            if not future.done():
                future.set_result(result)
