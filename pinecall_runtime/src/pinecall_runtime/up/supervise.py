"""The processes ``up`` starts: each in a process group of its own, its output in a log file,
ready when its probe answers, started again if it dies, stopped in tiers.

A :class:`Supervised` is one ``pinecall-runtime …`` command (a service, a worker, the stand-in);
:class:`Processes` holds them in the order they were started. Stopping goes tier by tier, the
highest first (the callers, then the workers and overflows, then the services, then the
stand-ins), every process of a tier at once: each gets SIGTERM (a service drains, a worker
finishes its calls and seals them) and is killed only past its grace; whatever is left of its
process group then is killed.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import click

from pinecall_runtime.processes import wait_ready
from pinecall_servicekit.lifecycle import ExitCode


@dataclass(kw_only=True)
class Supervised:
    """One process of ``up``: ``python -m MODULE ARGS`` (``pinecall-runtime ARGS`` unless
    ``module`` says another) with ``env``, output appended to ``log``. ``url`` and ``ready`` name its probe (``/readyz``; ``""`` takes any HTTP answer as
    listening); ``tier`` orders the stop; ``grace_s`` is how long SIGTERM may take; a process
    with ``restart`` off (the callers) is left to exit; ``group`` says where SIGTERM goes."""

    name: str
    args: list[str]
    env: dict[str, str]
    log: Path
    url: str | None = None
    ready: str = "/readyz"
    tier: int = 0
    grace_s: float = 30.0
    restart: bool = True
    group: bool = False
    """SIGTERM goes to its whole process group (see :meth:`terminate`)."""
    module: str = "pinecall_runtime"
    restarts: int = 0
    proc: subprocess.Popen[bytes] = field(init=False)

    def start(self) -> None:
        """Start it (output appended to :attr:`log`), in a process group of its own, so a
        terminal's Ctrl-C reaches only ``up`` and Granian's workers stop with their server."""
        with self.log.open("ab") as out:  # the child holds its own descriptor
            self.proc = subprocess.Popen(
                [sys.executable, "-m", self.module, *self.args],
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def wait_ready(self, deadline_s: float = 120) -> None:
        """Return once its probe answers; ``click.ClickException`` (naming the log) if it exits
        first or ``deadline_s`` passes."""
        if self.url is None:
            return
        try:
            wait_ready(self.url, self.proc, deadline_s, path=self.ready)
        except click.ClickException as exc:
            raise click.ClickException(f"{self.name}: {exc.message}; its log: {self.log}") from exc

    def ensure(self) -> bool:
        """Start it again if it died (a SIGKILL, a crash) and wait until it is ready; True when
        it had to. A process with ``restart`` off is never started again, nor a worker that
        exited 3: an operator cordoned it, and started again it would be cordoned again
        (cordons are durable, seed 000 "Deploys drain, cordons shrink")."""
        code = self.proc.poll()
        if code is None or not self.restart:
            return False
        if code == ExitCode.CORDONED:
            click.echo(f"up: {self.name} was cordoned and finished its calls (exit 3): "
                       "left stopped", err=True)  # fmt: skip
            self.restart = False
            return False
        click.echo(f"up: {self.name} exited with {code}: starting it again", err=True)
        self._signal(signal.SIGKILL)  # whatever is left of its group (an orphaned worker)
        self.restarts += 1
        self.start()
        self.wait_ready()
        return True

    def kill(self) -> None:
        """SIGKILL its whole group now (``up --app-restarts``); :func:`keep_running` starts it
        again."""
        self._signal(signal.SIGKILL)

    def _signal(self, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, sig)

    def terminate(self) -> None:
        """SIGTERM: to its whole group when :attr:`group` (Granian's server and its worker
        processes each drain, even one still starting), else to the process alone (a worker
        drains its calls' job processes itself; a signal of their own would kill them
        mid-call)."""
        if self.group:
            self._signal(signal.SIGTERM)
            return
        with contextlib.suppress(ProcessLookupError):
            self.proc.send_signal(signal.SIGTERM)

    def wait_stopped(self) -> int | None:
        """Its exit code once it stopped, SIGKILLed past :attr:`grace_s`."""
        try:
            return self.proc.wait(self.grace_s)
        except subprocess.TimeoutExpired:
            click.echo(f"up: {self.name} did not stop in {self.grace_s:.0f} s: killed", err=True)
            self._signal(signal.SIGKILL)
            return self.proc.wait(5)
        finally:
            self._signal(signal.SIGKILL)  # a job process its server left behind


@dataclass
class Processes:
    """Every process ``up`` started, in the order it started them."""

    started: list[Supervised] = field(default_factory=list)

    def launch(self, *processes: Supervised) -> None:
        """Start ``processes`` (each is stopped with the others from now on)."""
        for process in processes:
            process.start()
            self.started.append(process)

    @staticmethod
    def wait(*processes: Supervised) -> None:
        """Wait until each of ``processes`` is ready (in order, each bounded);
        ``click.ClickException`` naming the one that was not."""
        for process in processes:
            process.wait_ready()

    def start(self, *processes: Supervised) -> None:
        """:meth:`launch` ``processes`` together, then :meth:`wait` for them."""
        self.launch(*processes)
        self.wait(*processes)

    def __iter__(self) -> Iterator[Supervised]:
        return iter(self.started)

    def stop(self) -> dict[str, int | None]:
        """Stop every process, tier by tier from the highest; their exit codes by name."""
        codes: dict[str, int | None] = {}
        for tier in sorted({p.tier for p in self.started}, reverse=True):
            group = [p for p in self.started if p.tier == tier]
            for process in group:
                process.terminate()
            for process in group:
                codes[process.name] = process.wait_stopped()
        return codes

    def kill(self) -> dict[str, int | None]:
        """SIGKILL every process's group at once (a second Ctrl-C while stopping); their exit
        codes by name."""
        for process in self.started:
            process._signal(signal.SIGKILL)
        return {p.name: p.proc.wait(5) for p in self.started}


async def _exited(proc: subprocess.Popen[bytes]) -> None:
    """Return once ``proc`` has exited, told by a thread of its own blocked in ``wait()`` (not
    the loop's executor: a dozen processes would hold every one of its threads)."""
    loop = asyncio.get_running_loop()
    exited: asyncio.Future[None] = loop.create_future()

    def settle() -> None:
        if not exited.done():
            exited.set_result(None)

    def wait() -> None:
        proc.wait()
        with contextlib.suppress(RuntimeError):  # up's loop closed first: nobody is waiting
            loop.call_soon_threadsafe(settle)

    threading.Thread(target=wait, name=f"exit-of-{proc.pid}", daemon=True).start()
    await exited


async def keep_running(
    processes: Iterable[Supervised], back: Callable[[Supervised, float], None] | None = None
) -> None:
    """Start each of ``processes`` again the moment it exits (a SIGKILL, a crash), until
    cancelled or until none is left to restart (:meth:`Supervised.ensure` decides), and call
    ``back(process, seconds)`` once one started again is ready (seconds from its exit seen). A
    service that dies is back within its own start time (the dispatcher SIGKILLed: 2-3 s), not
    at the table's next print; ``click.ClickException`` if one started again never became
    ready."""

    async def one(process: Supervised) -> None:
        while process.restart:
            await _exited(process.proc)
            seen = time.monotonic()
            if not await asyncio.to_thread(process.ensure):
                return
            if back is not None:
                back(process, time.monotonic() - seen)

    await asyncio.gather(*(one(p) for p in processes))
