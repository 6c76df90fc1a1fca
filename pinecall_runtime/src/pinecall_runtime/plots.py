"""What the tables say, drawn (issue 22, "Plots"): ``up --report … --plot`` and ``load --plot``.

Each function draws one PNG from the JSON its command already reports, with matplotlib's Agg
backend (no display): nothing is measured here, so a plot says exactly what the report says.
matplotlib is the ``plots`` extra of ``pinecall-runtime`` (``./dev sync`` installs it); without it
:func:`draw_up` and :func:`draw_load` raise :class:`click.ClickException` saying so.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from matplotlib.figure import Figure

DPI = 80
"""Pixels per inch of the PNGs: 8 × 5 inches is 640 × 400 pixels, small enough to commit."""


def _figure(rows: int) -> Figure:
    try:
        import matplotlib

        matplotlib.use("Agg")
        from matplotlib.figure import Figure
    except ImportError as exc:  # pragma: no cover - ./dev sync installs it
        raise click.ClickException(
            "--plot draws with matplotlib: install pinecall-runtime[plots] (./dev sync does)"
        ) from exc
    return Figure(figsize=(8, 2.6 * rows), dpi=DPI, layout="constrained")


def _at(value: str | None) -> dt.datetime | None:
    return dt.datetime.fromisoformat(value) if value else None


def up_series(callers: list[dict[str, Any]]) -> dict[str, list[float]]:
    """The report's callers as counts over the run, a point a second from the first arrival:
    ``t`` (seconds), ``ringing`` (in the room, no agent yet), ``talking`` (an agent in the room,
    not ended), ``ended`` (so far: hung up, refused or failed). A caller refused at the endpoint
    (no room) counts as ended at once; times are the callers' own (``CallerReport``)."""
    spans: list[tuple[float, float | None, float | None]] = []
    arrivals = [a for c in callers if (a := _at(c.get("arrived_at"))) is not None]
    if not arrivals:
        return {"t": [], "ringing": [], "talking": [], "ended": []}
    t0 = min(arrivals)
    for c in callers:
        arrived, ended = _at(c.get("arrived_at")), _at(c.get("ended_at"))
        start = (arrived - t0).total_seconds() if arrived else 0.0
        answered = start + c["answered_s"] if c.get("answered_s") is not None else None
        end = (ended - t0).total_seconds() if ended else (None if arrived else start)
        spans.append((start, answered, end))
    last = max([s for s, _, _ in spans] + [e for _, _, e in spans if e is not None]) + 1
    out: dict[str, list[float]] = {"t": [], "ringing": [], "talking": [], "ended": []}
    for i in range(int(last) + 2):
        t = float(i)
        out["t"].append(t)
        out["ended"].append(sum(e is not None and e <= t for _, _, e in spans))
        live = [(s, a) for s, a, e in spans if s <= t and (e is None or e > t)]
        out["talking"].append(sum(a is not None and a <= t for _, a in live))
        out["ringing"].append(sum(a is None or a > t for _, a in live))
    return out


def draw_up(result: dict[str, Any], path: Path) -> None:
    """``up``'s report as a PNG at ``path``: callers ringing, talking and ended over the run;
    below, first audio as the callers heard it (the end of each of their lines to the agent's
    first sound, ``waits_s``) at the second each caller arrived, with the run's p50 and p95
    (``first_audio_s.heard_by_the_caller``)."""
    callers = result.get("callers", [])
    series = up_series(callers)
    fig = _figure(2)
    calls, audio = fig.subplots(2, 1, sharex=True)
    for name in ("ringing", "talking", "ended"):
        calls.step(series["t"], series[name], where="post", label=name)
    calls.set_ylabel("callers")
    calls.set_title(
        f"up: {result.get('calls', {}).get('placed', len(callers))} calls at "
        f"{result.get('rate', '?')}/s, {result.get('seats', '?')} seats a worker"
    )
    calls.legend(loc="upper left")
    arrivals = [a for c in callers if (a := _at(c.get("arrived_at"))) is not None]
    t0 = min(arrivals) if arrivals else None
    points = [
        ((arrived - t0).total_seconds(), wait)
        for c in callers
        if t0 is not None and (arrived := _at(c.get("arrived_at"))) is not None
        for wait in c.get("waits_s", [])
    ]
    audio.scatter([p[0] for p in points], [p[1] for p in points], s=14, label="a caller's line")
    heard = result.get("first_audio_s", {}).get("heard_by_the_caller", {})
    for q, style in (("p50", "--"), ("p95", ":")):
        if heard.get(q) is not None:
            audio.axhline(heard[q], linestyle=style, color="grey", label=q)
    audio.set_ylabel("first audio (s)")
    audio.set_xlabel("seconds since the first caller arrived")
    audio.legend(loc="upper left")
    fig.savefig(path)


def draw_load(out: dict[str, Any], path: Path) -> None:
    """``load``'s report as a PNG at ``path``: per step (calls), request latency p50/p95/p99 in
    ms with the target p99; below, the cores Postgres's backends of the run's database spent,
    beside the replicas' and the drivers'."""
    steps = out.get("steps", [])
    calls = [s["calls"] for s in steps]
    fig = _figure(2)
    latency, cores = fig.subplots(2, 1, sharex=True)
    for q in ("p50", "p95", "p99"):
        latency.plot(calls, [s[f"{q}_ms"] for s in steps], marker="o", label=q)
    if out.get("target_p99_ms") is not None:
        latency.axhline(out["target_p99_ms"], linestyle=":", color="grey", label="target p99")
    latency.set_yscale("log")  # p50 and p99 a hundredfold apart on a loaded machine
    latency.set_ylabel("request latency (ms)")
    latency.set_title(f"load: held {out.get('held', 0)} calls")
    latency.legend(loc="upper left")
    for name in ("postgres", "replicas", "driver"):
        values = [s.get(f"{name}_cores") for s in steps]
        if any(v is not None for v in values):
            cores.plot(calls, [v or 0.0 for v in values], marker="o", label=name)
    cores.set_ylabel("cores")
    cores.set_xlabel("calls (step)")
    cores.legend(loc="upper left")
    fig.savefig(path)
