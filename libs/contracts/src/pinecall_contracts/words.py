"""How a count reads in what an operator reads (doctor, ``fleet list``, the dispatcher's journal).

One helper, so every tool says ``1 call`` and ``2 calls`` alike (GLOSSARY.md has the nouns).
"""

from __future__ import annotations


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` and the noun in the number it takes.

    ``counted(1, "call")`` is ``"1 call"``, ``counted(0, "call")`` and ``counted(2, "call")`` are
    ``"0 calls"`` and ``"2 calls"``; ``plural`` where adding an s is not it
    (``counted(2, "delivery", "deliveries")``).
    """
    return f"{n} {noun if n == 1 else plural or noun + 's'}"
