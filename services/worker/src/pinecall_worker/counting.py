"""The AgentServer of a counting worker: LiveKit's view of its seats is the dispatcher's.

The dispatcher offers a worker a call when its seats (``PINECALL_MAX_JOBS``) less its calls and
the calls offered to it are above 0; livekit-agents accepts the offer when its effective load is
under its load threshold (0.7). Both must agree at every instant, bursts included, or an offer is declined
and its caller waits the re-offer's 12 s (issue 14, item 6). Two things in livekit-agents 1.8 make
them disagree, and this subclass mends them without touching either threshold:

- an offer accepted and not launched yet weighs ``threshold ÷ warm processes`` when no job runs
  (``livekit/agents/worker.py``, ``_get_effective_load``, L1331-1342): here it weighs one seat
  (:func:`pinecall_worker.domain.effective_load`);
- LiveKit hears the worker's status only every 2.5 s (``UPDATE_STATUS_INTERVAL``; ``_load_task``
  of ``_run_ws``, L1183-1190, and ``_update_worker_status``, L1507-1538): a seat freed by a
  hang-up stayed ``WS_FULL`` at LiveKit for up to 2.5 s while the dispatcher offered it, and
  LiveKit dropped the job. :meth:`say_status` tells LiveKit at once.

Both use the framework's private members (``_reserved_slots``, ``_refresh_worker_load``,
``_update_worker_status``, ``_get_effective_load``); ``tests/test_domain.py`` holds the
installed version to them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from livekit.agents import utils

from pinecall_worker import domain
from pinecall_worker.link import Link, LinkedServer

_log = logging.getLogger(__name__)
SAY_TIMEOUT_S = 1.0
"""How long a status waits for room on the socket's queue (a frozen LiveKit fills it)."""


class CountingServer(LinkedServer):
    """A :class:`LinkedServer` whose offers are decided by calls counted: ``active()`` calls
    held of ``seats``, each offer accepted and not launched one seat more; ``load_threshold`` is
    the framework's own, read (:func:`pinecall_worker.domain.load_threshold`) and not passed on,
    so the framework keeps its default."""

    def __init__(
        self, link: Link, *, seats: int, load_threshold: float, active: Callable[[], int], **kw: Any
    ) -> None:
        super().__init__(link, **kw)
        self._seats = seats
        self._threshold = load_threshold
        self._active = active

    def _get_effective_load(self) -> float:
        return domain.effective_load(
            self._active(), self._reserved_slots, self._seats, self._threshold
        )

    async def say_status(self) -> None:
        """Tell LiveKit the worker's load and status now (not at the next 2.5 s tick); a no-op
        while it is not connected (the framework drops a status then)."""
        try:
            async with asyncio.timeout(SAY_TIMEOUT_S):
                await self._refresh_worker_load()
                await self._update_worker_status()
        except utils.aio.ChanClosed:
            pass  # the server is closing: LiveKit hears its drain, not a status
        except TimeoutError:
            _log.warning(
                "LiveKit's socket did not take the worker's status in %.0f s", SAY_TIMEOUT_S
            )
