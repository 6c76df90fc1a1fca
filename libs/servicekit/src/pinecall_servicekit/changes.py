"""Awaiting state that changes in callbacks (a NATS message, a KV watch), without polling."""

from __future__ import annotations

import asyncio
from collections.abc import Callable


class Changes:
    """Whoever changes the state calls :meth:`notify`; whoever needs it awaits :meth:`wait_for`."""

    def __init__(self) -> None:
        self._condition = asyncio.Condition()

    async def notify(self) -> None:
        async with self._condition:
            self._condition.notify_all()

    async def wait_for(self, predicate: Callable[[], bool], timeout: float) -> None:
        """Return once ``predicate()`` holds; ``TimeoutError`` after ``timeout`` seconds."""
        async with asyncio.timeout(timeout), self._condition:
            await self._condition.wait_for(predicate)
