"""``up`` starts a process that dies again at once, not at its table's next print (issue 14,
item 6 (b): the dispatcher SIGKILLed under ``up --every 30`` was gone 40-48 s, its callers
silent, because the restart waited for the table)."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import httpx

from pinecall_runtime.up.supervise import Supervised, keep_running
from pinecall_servicekit.platform import free_port


async def test_a_process_killed_is_started_again_the_moment_it_exits(tmp_path: Path) -> None:
    port = free_port()
    fakes = Supervised(
        name="vendors",
        args=["lab", "vendors", "--port", str(port)],
        env=dict(os.environ),
        log=tmp_path / "vendors.log",
        url=f"http://127.0.0.1:{port}",
        ready="",
        group=True,
    )
    fakes.start()
    await asyncio.to_thread(fakes.wait_ready)
    first = fakes.proc.pid
    back: asyncio.Queue[tuple[str, float]] = asyncio.Queue()
    supervising = asyncio.create_task(
        keep_running([fakes], lambda p, s: back.put_nowait((p.name, s)))
    )
    try:
        os.killpg(first, signal.SIGKILL)
        async with asyncio.timeout(60):
            name, seconds = await back.get()
        assert name == "vendors"
        assert fakes.restarts == 1
        assert fakes.proc.pid != first
        assert fakes.proc.poll() is None
        async with httpx.AsyncClient() as client:  # the one started again answers
            assert (await client.get(f"{fakes.url}/")).status_code < 500
        assert seconds >= 0
    finally:
        supervising.cancel()
        await asyncio.gather(supervising, return_exceptions=True)
        fakes.terminate()
        await asyncio.to_thread(fakes.wait_stopped)


async def test_a_process_that_may_not_restart_is_left_stopped(tmp_path: Path) -> None:
    """A process with ``restart`` off (the callers) is never waited on nor started again:
    ``keep_running`` returns for it at once (``up`` cancels it only at the stop)."""
    once = Supervised(
        name="help",
        args=["--help"],
        env=dict(os.environ),
        log=tmp_path / "help.log",
        restart=False,
    )
    once.start()
    async with asyncio.timeout(60):
        await keep_running([once])
    assert await asyncio.to_thread(once.proc.wait) == 0
    assert once.restarts == 0
