"""An app process's own ledger: one :class:`~pinecall_contracts.lab.AppEvent` JSON line per
thing it did, appended by the process as it does it (issue 16, "In the main job": tool calls run
twice are counted by the app's own count, not the log's).

:func:`watch` wraps each tool handler of the app's agents, so entering it writes a ``tool`` line
(before the handler runs: a process killed in a handler has its run counted), and adds hooks that
write each call ``attached`` (new, handed, parked) and ``detached``. :func:`held` writes ``held``
each time the socket is open with every agent registered. The handlers and hooks are the app's
own, unchanged; only the wrappers are added. A ledger is appended to, so a process started
again goes on in the same file.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
import inspect
import os
import threading
from pathlib import Path
from types import TracebackType
from typing import Any

import pinecall
from pinecall.agent import ToolHandler
from pinecall_contracts.base import encode
from pinecall_contracts.lab import AppEvent, AppEventKind


class Ledger:
    """Appends :class:`AppEvent` lines of one process (``instance``) to ``path``: each line one
    ``write`` of an ``O_APPEND`` descriptor, so lines of handlers in threads never interleave."""

    def __init__(self, path: Path, instance: str) -> None:
        self.path, self.instance = path, instance
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._lock = threading.Lock()

    def write(self, what: AppEventKind, **fields: Any) -> None:
        """Append one event, stamped now (UTC)."""
        event = AppEvent(instance=self.instance, what=what, at=dt.datetime.now(dt.UTC), **fields)
        line = encode(event) + b"\n"
        with self._lock:
            os.write(self._fd, line)

    def close(self) -> None:
        os.close(self._fd)

    def __enter__(self) -> Ledger:
        return self

    def __exit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def _counted(handler: ToolHandler, ledger: Ledger, agent: str, tool: str) -> ToolHandler:
    """``handler`` writing a ``tool`` line as it is entered; a coroutine function stays one (the
    SDK runs it in its loop), a plain one stays plain (the SDK runs it in a thread)."""
    if inspect.iscoroutinefunction(handler):

        @functools.wraps(handler)
        async def entered_async(arguments: dict[str, Any], context: pinecall.ToolContext) -> Any:
            ledger.write("tool", agent=agent, call=context.call.id, tool=tool, id=context.id)
            return await handler(arguments, context)

        return entered_async

    @functools.wraps(handler)
    def entered(arguments: dict[str, Any], context: pinecall.ToolContext) -> Any:
        ledger.write("tool", agent=agent, call=context.call.id, tool=tool, id=context.id)
        return handler(arguments, context)

    return entered


def watch(app: pinecall.App, ledger: Ledger) -> None:
    """Ledger what ``app`` does: its tool handlers wrapped, a hook for each call attached and
    detached on every agent. Call before the app runs."""
    for name, agent in app.agents.items():
        for tool, handler in list(agent.tools.items()):
            agent.tools[tool] = _counted(handler, ledger, name, tool)

        # coroutines, so they run in the app's loop in the order the frames came (a plain hook
        # would run in a thread, and its line could follow the tool line of the same call)
        @agent.on_call("attached")
        async def attached(call: pinecall.Call, agent: str = name) -> None:
            ledger.write("attached", agent=agent, call=call.id, why=call.why)

        @agent.on_call("detached")
        async def detached(call: pinecall.Call, agent: str = name) -> None:
            ledger.write("detached", agent=agent, call=call.id, why=call.detached)


async def held(app: pinecall.App, ledger: Ledger) -> None:
    """Write ``held`` each time ``app``'s socket is open with every agent registered (after
    each connect), until cancelled."""
    while True:
        await app.wait_for(lambda: app.connected)
        ledger.write("held")
        await app.wait_for(lambda: not app.connected)


async def serving(app: pinecall.App, ledger: Ledger, drain_timeout_s: float | None) -> int:
    """``pinecall start``'s run of ``app`` (:func:`pinecall.cli.serve`: SIGTERM drains), with
    :func:`held` beside it; its exit code."""
    from pinecall.cli import serve

    saying = asyncio.create_task(held(app, ledger), name="ledger-held")
    try:
        return await serve(app, drain_timeout_s)
    finally:
        saying.cancel()
        await asyncio.gather(saying, return_exceptions=True)
