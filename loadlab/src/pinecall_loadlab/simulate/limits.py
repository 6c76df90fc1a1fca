"""The bounds of a day the simulator runs: what ``lab simulate``'s options and a day file may say.

Nothing here imports NumPy or SimPy, so the command's options state the bounds at no cost.
"""

from __future__ import annotations

MAX_CALLS = 1_500_000
"""The most calls a day: a cell of 20 000 at once (seed 000's largest cell). Each caller is drawn
and held in memory and run through the rules; NumPy's Poisson draw refuses a minute's mean past
about 10¹⁸, and a count past this is no day the simulator can run."""
CALLS_PER_AT_ONCE = 75
"""A day's calls per call at once at the peak: ``--cell``'s arithmetic (seed 000's, inverted),
60 min × 10 busy hours ÷ 4 min a call ÷ 2 for the peak."""
MAX_CELL = MAX_CALLS // CALLS_PER_AT_ONCE
"""The most calls at once at the peak (``--cell``): 20 000."""
MAX_WORKERS = 2_000
"""The most workers of a kind (``--most``, ``--least``, ``--core-workers``): twice the 1 042
scaled workers a cell of 20 000 at once wants (60 % of 32 seats). Each is a process on the
virtual clock, a heartbeat every 5 s: 2 000 kept all day ran past 90 s on this loaded machine for
100 calls, and 100 000 or 10 million (accepted before) had not ended after 25 s."""
DAY_S = 86_400
"""A day in seconds: the most a delay or a window may last, and a burst is cut at the day's end."""
DAY_MIN = 1_440
"""A day in minutes: the longest burst."""


def spaced(n: int) -> str:
    """``n`` as the README writes it: ``1 500 000``."""
    return f"{n:,}".replace(",", " ")
