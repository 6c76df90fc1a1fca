"""A day of callers: how many arrive in each hour, and the calls they make.

The seeds' day (seed 000, "The shape of the numbers"): 50 000 calls over 10 busy hours, ×2 at the
peak — 08:00 to 18:00 UTC, a morning ramp to 10 000 in the 11:00 hour (2 × the busy hours' mean of
5 000), then down. Within the day the rate per minute is interpolated linearly between the hours'
middles (a ramp, not steps) and scaled so the day holds its calls; within a minute, arrivals are
Poisson (a count drawn per minute, each at a uniform time in it).

A day file is JSON: ``{"per_hour": [24 numbers]}`` (calls arriving in each hour, 0 to
1 500 000), optionally ``"calls": N`` to scale the shape to N calls; the day holds 1 to 1 500 000
calls (:data:`~.limits.MAX_CALLS`). :class:`DayError` says what is wrong.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import msgspec
import numpy as np

from pinecall_loadlab.simulate.limits import DAY_MIN, MAX_CALLS, spaced

SEED_SHAPE = (0,) * 8 + (0.4, 1.0, 1.6, 2.0, 1.4, 1.0, 1.2, 0.8, 0.4, 0.2) + (0,) * 6
"""The seeds' busy hours as multiples of their mean: 10 hours, mean 1.0, peak 2.0 (11:00)."""
SEED_CALLS = 50_000
"""Seed 000: 50 000 calls a day."""


class DayError(ValueError):
    """A day file that cannot be a day: not JSON, not 24 hours, a count negative, not finite or
    past :data:`~.limits.MAX_CALLS`, a day of under 1 call."""


class Day(msgspec.Struct, frozen=True, kw_only=True):
    per_hour: tuple[float, ...]
    """Calls arriving in each of the day's 24 hours (UTC)."""

    @property
    def calls(self) -> float:
        return sum(self.per_hour)

    def per_minute(self) -> np.ndarray:
        """The mean arrivals in each of the day's 1 440 minutes: linear between the hours'
        middles, each minute ≥ 0, summing to :attr:`calls`."""
        hours = np.array(self.per_hour, dtype=float)
        middles = np.arange(24) * 60 + 30
        minutes = np.arange(1440) + 0.5
        rate = np.interp(minutes, middles, hours / 60.0, left=hours[0] / 60, right=hours[-1] / 60)
        total = float(rate.sum())
        scaled: np.ndarray = rate * (self.calls / total) if total > 0 else rate
        return scaled


def seed_day(calls: float = SEED_CALLS) -> Day:
    """The seeds' day scaled to ``calls`` (50 000 by default)."""
    return Day(per_hour=tuple(calls * w / sum(SEED_SHAPE) for w in SEED_SHAPE))


class _DayFile(msgspec.Struct, forbid_unknown_fields=True):
    per_hour: list[float]
    calls: float | None = None


def load_day(path: Path) -> Day:
    """The day in ``path`` (see the module's docstring); :class:`DayError` if it is not one."""
    try:
        raw = msgspec.json.decode(path.read_bytes(), type=_DayFile)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise DayError(f"{path}: not a day file ({exc})") from None
    except OSError as exc:
        raise DayError(f"{path}: {exc.strerror}") from None
    return make_day(raw.per_hour, raw.calls, where=str(path))


def make_day(per_hour: list[float], calls: float | None = None, *, where: str = "day") -> Day:
    """A :class:`Day` from 24 hourly counts (scaled to ``calls`` when given); :class:`DayError`
    for a wrong length, an hour not 0 to :data:`~.limits.MAX_CALLS` (NaN, infinities), or a day
    (``calls``, else the hours' sum) not 1 to :data:`~.limits.MAX_CALLS` calls."""
    most = spaced(MAX_CALLS)
    if len(per_hour) != 24:
        raise DayError(f"{where}: per_hour holds {len(per_hour)} hours, not 24")
    for hour, n in enumerate(per_hour):
        if not 0 <= n <= MAX_CALLS:  # NaN is in no range
            raise DayError(f"{where}: hour {hour} has {n:g} calls (0 to {most}, finite)")
    total = sum(per_hour)
    if calls is not None:
        if not 1 <= calls <= MAX_CALLS:
            raise DayError(f"{where}: calls is {calls:g} (1 to {most}, finite)")
        if total == 0:
            raise DayError(f"{where}: per_hour is all 0, so it cannot be scaled to {calls} calls")
        per_hour = [n * calls / total for n in per_hour]
    elif not 1 <= total <= MAX_CALLS:
        raise DayError(f"{where}: per_hour holds {total:g} calls (a day holds 1 to {most})")
    return Day(per_hour=tuple(per_hour))


def burst_calls(at_s: float, per_min: float, minutes: float) -> float:
    """The mean callers a burst adds to the day: ``per_min`` a minute over ``minutes`` (rounded
    up to whole minutes) from ``at_s`` seconds into the day, the day's end cutting it short."""
    return per_min * min(math.ceil(minutes), max(0, DAY_MIN - int(at_s // 60)))


@dataclass(frozen=True)
class Calls:
    """The callers of a run, in arrival order: when each arrives (seconds into the day) and how
    long the call lasts once an agent answers."""

    at_s: np.ndarray
    length_s: np.ndarray


def draw_calls(
    day: Day,
    *,
    seed: int,
    mean_s: float,
    sigma: float,
    max_s: float,
    extra: list[tuple[float, float, float]] | None = None,
) -> Calls:
    """The day's callers: Poisson per minute at the day's rate (plus each ``(at_s, per_min,
    minutes)`` burst of ``extra``), lengths log-normal of mean ``mean_s`` and shape ``sigma``,
    never over ``max_s``. The same ``seed`` gives the same callers."""
    rng = np.random.default_rng(seed)
    rate = day.per_minute()
    for at_s, per_min, minutes in extra or []:
        first = int(at_s // 60)
        rate[first : first + math.ceil(minutes)] += per_min
    counts = rng.poisson(rate)
    minute_of = np.repeat(np.arange(len(rate)), counts)
    arrivals = np.sort(minute_of * 60.0 + rng.uniform(0.0, 60.0, size=len(minute_of)))
    mu = math.log(mean_s) - sigma * sigma / 2
    lengths = np.minimum(rng.lognormal(mu, sigma, size=len(arrivals)), max_s)
    return Calls(at_s=arrivals, length_s=lengths)
