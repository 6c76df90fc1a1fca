"""A hung test fails the run and says what it waited for (``pinecall_servicekit.testing.hung``)."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

HANGS = """
import asyncio

async def waits_for_a_webhook_that_never_comes():
    await asyncio.Event().wait()

async def test_hangs():
    await waits_for_a_webhook_that_never_comes()
"""

HELD_IN_A_CONTEXT = """
import asyncio
import contextlib

@contextlib.asynccontextmanager
async def replica():
    yield
    await asyncio.Event().wait()  # a service whose stop never ends

async def waits_for_a_webhook_that_never_comes():
    async with replica():
        pass

async def test_hangs():
    await waits_for_a_webhook_that_never_comes()
"""

FROZEN = """
import asyncio
import gc

async def waits_for_a_webhook_that_never_comes():
    await asyncio.Event().wait()

async def test_hangs():
    gc.freeze()  # as every service started in a test's loop does (pinecall_servicekit.frozen)
    await waits_for_a_webhook_that_never_comes()
"""


@pytest.mark.parametrize(
    "test", [HANGS, HELD_IN_A_CONTEXT, FROZEN], ids=["loop", "context-exit", "frozen-loop"]
)
def test_a_hung_test_prints_its_tasks_and_ends_the_run(
    pytester: pytest.Pytester, test: str
) -> None:
    """Its loop found on the heap or, frozen out of the heap's list, by its thread's frame; the
    await followed into an async generator (a context manager's exit)."""
    pytester.makepyfile(test_hangs=test)
    result = pytester.runpytest_subprocess(
        "-p",
        "no:cacheprovider",
        "-o",
        "asyncio_mode=auto",
        "-o",
        "timeout=6",
        "-o",
        "timeout_method=thread",
    )
    out = result.stdout.str() + result.stderr.str()
    assert result.ret != 0
    assert "test_hangs.py::test_hangs: still running; the asyncio tasks" in out
    # the await the test is stuck on, from the task's own stack
    assert "in waits_for_a_webhook_that_never_comes" in out
    if test == HELD_IN_A_CONTEXT:  # through the context manager's generator, to its own await
        assert "in replica" in out
    assert "Timeout" in out  # then pytest-timeout's dump and exit
