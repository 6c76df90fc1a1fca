"""A worker in a process of its own: ``pinecall-runtime worker start`` itself, for what needs a
real process (a SIGKILL, a SIGSTOP, its CPU). The ``death`` experiment (``lab run death``) and
its tests start their workers with :func:`started`, through ``labworkers.start_process``;
``bench/worker_calls.py`` measures one.

It lives in the load lab, which runs it, rather than beside the worker's test support
(``pinecall_testkit.worker``): a lab command may not import a test-only package.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import stamina

from pinecall_worker.settings import WorkerSettings


class NotReady(Exception):
    """The worker's startup probe did not say ``ready`` yet."""


@dataclass
class WorkerProcess:
    """``pinecall-runtime worker start`` in a process group of its own: the worker, its
    forkserver and its job processes. Made by :func:`started`."""

    settings: WorkerSettings
    proc: asyncio.subprocess.Process
    frozen: bool = False

    @property
    def pid(self) -> int:
        return self.proc.pid

    def kill(self) -> None:
        """SIGKILL the worker's process alone, as the kernel's OOM killer or ``kill -9`` does:
        nothing of it runs on; its job processes find their parent gone and exit on their own
        (their room connections end without a goodbye)."""
        os.kill(self.proc.pid, signal.SIGKILL)

    def freeze(self) -> None:
        """SIGSTOP the whole group (a machine frozen): its sockets stay open, nothing answers."""
        os.killpg(self.proc.pid, signal.SIGSTOP)
        self.frozen = True

    def thaw(self) -> None:
        os.killpg(self.proc.pid, signal.SIGCONT)
        self.frozen = False


async def _ready(worker: WorkerProcess, within_s: float) -> None:
    """Until the startup probe answers 200 (registered with LiveKit, plugins loaded); raises
    ``RuntimeError`` if the process exits first."""
    url = f"http://127.0.0.1:{worker.settings.health_port}/readyz"
    async with httpx.AsyncClient() as http:
        async for attempt in stamina.retry_context(
            on=(httpx.HTTPError, NotReady),
            attempts=None,
            timeout=within_s,
            wait_initial=0.25,
            wait_max=1.0,  # a start takes seconds: a dozen polls, not a hundred
        ).with_name("waiting for the worker process to start: GET", (url,), {}):
            with attempt:
                if worker.proc.returncode is not None:
                    raise RuntimeError(f"the worker exited with {worker.proc.returncode}")
                if (await http.get(url, timeout=2)).status_code != 200:
                    raise NotReady(url)


@contextlib.asynccontextmanager
async def started(
    settings: WorkerSettings, *, output: Path | None = None, within_s: float = 120.0
) -> AsyncIterator[WorkerProcess]:
    """Start ``settings``' worker as ``pinecall-runtime worker start`` (its environment is
    ``settings.to_env()``; ``health_port`` must be a port, not 0) and yield it once its startup
    probe says ready. Its output goes to ``output`` (else nowhere). At the end it is stopped as
    SIGTERM stops it (thawed first), and whatever of its group is left within ``within_s`` is
    SIGKILLed."""
    if not settings.health_port:
        raise ValueError("a worker process needs a health port to be known ready")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PINECALL_")}
    sink = output.open("wb") if output is not None else None
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "pinecall_runtime",
        "worker",
        "start",
        env=env | settings.to_env(),
        stdout=sink or asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.STDOUT,
        start_new_session=True,
    )
    worker = WorkerProcess(settings=settings, proc=proc)
    try:
        await _ready(worker, within_s)
        yield worker
    finally:
        with contextlib.suppress(ProcessLookupError):
            if worker.frozen:
                worker.thaw()
            if proc.returncode is None:
                proc.terminate()  # SIGTERM: it drains what it holds
        try:
            async with asyncio.timeout(within_s):
                await proc.wait()
        except TimeoutError:
            pass
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # the group's rest: a killed worker's children
        await proc.wait()
        if sink is not None:
            sink.close()
