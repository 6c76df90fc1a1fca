"""The socket's pure rules: which socket takes a call, which minor version is spoken."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TypeVar

K = TypeVar("K")


def pick_holder(loads: Iterable[tuple[K, int]]) -> K | None:
    """The socket that takes a call, of ``(socket, calls held)`` pairs of the sockets that
    would (they take unclaimed calls of the agent and are not draining it): the one holding the
    fewest calls, the first of them on a tie (the earliest registered); None when there is none."""
    best: tuple[K, int] | None = None
    for socket, held in loads:
        if best is None or held < best[1]:
            best = (socket, held)
    return None if best is None else best[0]


def common_version(ours: Sequence[int], theirs: Sequence[int]) -> int | None:
    """The highest minor version both sides speak; None when they share none (close 4002)."""
    both = set(ours) & set(theirs)
    return max(both) if both else None
