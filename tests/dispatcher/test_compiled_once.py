"""Every statement of a call's placement is compiled once (issue 20). SQLAlchemy caches a
statement's compiled form by its cache key, and a statement it cannot make a key for (a multi-row
``.values([...])``, a ``VALUES`` list of literals) is compiled anew each time it runs — under
``bench/ring_to_offer.py`` that was 14.5 % of the dispatcher's CPU (py-spy). Since then the
dispatcher's placement runs on psycopg itself, each statement SQL made once at import
(``store/offers.py``, ``store/rooms.py``), and so do the sweep's reads, which run every tick and
may fall inside the burst (``fleets_waiting``, ``views.fleets``): none of it may reach
SQLAlchemy's compiler; what still does (the roster's read of the fleet) must come from its cache. A burst decides several
rooms in one transaction (the statements that take rows as parameters), so it walks them.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine.default import DefaultExecutionContext
from sqlalchemy.engine.interfaces import CacheStats

from pinecall_loadlab.scenarios.chain import Chain
from pinecall_loadlab.scenarios.runtime_choosing import place_calls


@contextmanager
def executed() -> Iterator[list[tuple[str, Any]]]:
    """Each compiled statement run in this process meanwhile, as ``(SQL, cache_hit)``; the
    listener is on the Engine class, so every engine of every in-process replica is seen."""
    seen: list[tuple[str, Any]] = []

    def after(_conn: Any, _cursor: Any, statement: str, _p: Any, context: Any, _m: bool) -> None:
        if isinstance(context, DefaultExecutionContext) and context.compiled is not None:
            seen.append((statement, context.cache_hit))

    sa.event.listen(sa.engine.Engine, "after_cursor_execute", after)
    try:
        yield seen
    finally:
        sa.event.remove(sa.engine.Engine, "after_cursor_execute", after)


async def test_a_burst_is_placed_with_every_statement_from_the_compiled_cache(chain: Chain) -> None:
    worker = await chain.worker("worker-a", seats=4)
    await chain.overflow()
    with executed() as seen:
        async with asyncio.timeout(120):
            calls, callers = await place_calls(
                chain, prefix="cached", calls=6, interval_s=0.02, settle_s=60
            )
    assert Counter(c.by for c in calls)[worker.name] == 4  # the burst decided rooms together
    hits = Counter(hit for _, hit in seen)
    uncached = [sql for sql, hit in seen if hit == CacheStats.NO_CACHE_KEY]
    assert uncached == []
    assert hits[CacheStats.CACHE_HIT] > hits[CacheStats.CACHE_MISS]
    # the listener saw the statements that are SQLAlchemy's: the roster's read of the fleet
    assert any("FROM roster.fleets" in sql for sql, _ in seen)
    assert [sql for sql, _ in seen if "dispatcher." in sql] == []
    for c in callers:
        await c.leave()
