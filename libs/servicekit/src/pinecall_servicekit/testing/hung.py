"""What a hung test was waiting for: every asyncio task's stack, printed before pytest-timeout
ends the run.

pytest-timeout (``timeout_method = "thread"``) dumps each thread's stack and exits; for a test
on an event loop that shows only the loop's ``select()``. This hook prints, ``LEAD_S`` seconds
before that, every task of every running loop with its await chain: the ``await`` each one is
stuck on. It is loaded with the fixtures (:mod:`.plugin`) and does nothing where pytest-timeout is not
installed or sets no timeout.
"""

from __future__ import annotations

import asyncio
import gc
import inspect
import sys
import threading
from types import FrameType
from typing import Any

import pytest

LEAD_S = 10.0
"""How long before pytest-timeout's own dump the tasks are printed (seconds; half the timeout
when that is shorter)."""


def running_loops() -> list[asyncio.AbstractEventLoop]:
    """Every event loop running now, in any thread: each thread's ``run_forever`` frame, then the
    heap for loops with no Python frame (uvloop's). Diagnostics only.

    The heap alone misses a loop ``gc.freeze`` moved to the permanent generation
    (``pinecall_servicekit.frozen``: every service started in a test's loop freezes it), which
    ``gc.get_objects`` does not list."""
    loops: list[asyncio.AbstractEventLoop] = []
    for frame in sys._current_frames().values():
        step: FrameType | None = frame
        while step is not None:
            if step.f_code.co_name == "run_forever":
                loop = step.f_locals.get("self")
                if isinstance(loop, asyncio.AbstractEventLoop) and loop not in loops:
                    loops.append(loop)
            step = step.f_back
    heap = (o for o in gc.get_objects() if isinstance(o, asyncio.AbstractEventLoop))
    loops += [o for o in heap if o not in loops and not o.is_closed() and o.is_running()]
    return loops


def awaits(task: asyncio.Task[Any]) -> tuple[list[str], str]:
    """The frames of ``task``'s await chain, outermost first, as traceback lines, and what its
    innermost coroutine awaits (a future, a sleep's handle, …)."""
    lines: list[str] = []
    step: Any = task.get_coro()
    last: Any = None
    while step is not None:
        if type(step).__name__ in ("async_generator_asend", "async_generator_athrow"):
            # an async generator's step (an ``async with`` on a context manager's exit) names
            # its generator only to the collector
            step = next((r for r in gc.get_referents(step) if inspect.isasyncgen(r)), step)
        frame = getattr(step, "cr_frame", None) or getattr(step, "gi_frame", None)
        frame = frame or getattr(step, "ag_frame", None)
        if frame is None:  # not a coroutine: what the chain waits on
            last = step
            break
        code = frame.f_code
        lines.append(f'  File "{code.co_filename}", line {frame.f_lineno}, in {code.co_name}')
        step = (
            getattr(step, "cr_await", None)
            or getattr(step, "gi_yieldfrom", None)
            or getattr(step, "ag_await", None)
        )
    return lines, repr(last)


def print_tasks(nodeid: str, out: Any = None) -> None:
    """Print each running loop's tasks and their stacks to ``out`` (stderr)."""
    out = out or sys.stderr
    print(f"\n+++ {nodeid}: still running; the asyncio tasks +++", file=out)
    for loop in running_loops():
        try:
            tasks = list(asyncio.all_tasks(loop))
        except RuntimeError:  # the set changed while read from this thread: once more
            tasks = list(asyncio.all_tasks(loop))
        print(f"--- loop {loop!r}: {len(tasks)} tasks", file=out)
        for task in tasks:
            lines, waiting = awaits(task)
            print(f"task {task.get_name()}, waiting on {waiting}:", *lines, sep="\n", file=out)
    out.flush()


@pytest.hookimpl(tryfirst=True)
def pytest_timeout_set_timer(item: pytest.Item, settings: Any) -> None:
    """Arm a timer that prints the tasks ``LEAD_S`` before pytest-timeout's own."""
    if not settings.timeout:
        return
    timer = threading.Timer(
        settings.timeout - min(LEAD_S, settings.timeout / 2), print_tasks, (item.nodeid,)
    )
    timer.daemon = True
    timer.name = f"hung {item.nodeid}"
    item.stash[_TIMER] = timer
    timer.start()


@pytest.hookimpl(tryfirst=True)
def pytest_timeout_cancel_timer(item: pytest.Item) -> None:
    timer = item.stash.get(_TIMER, None)
    if timer is not None:
        timer.cancel()


_TIMER = pytest.StashKey[threading.Timer]()
