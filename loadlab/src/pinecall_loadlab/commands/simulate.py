"""``lab simulate``: a day of callers on a virtual clock, through the production rules, LiveKit
choosing and the runtime choosing side by side (:mod:`pinecall_loadlab.simulate`; issue 23).

Bad input is a usage error naming its option (exit 2), before anything runs: a day file that is
not a day (:class:`~pinecall_loadlab.simulate.day.DayError`), a number out of its range (NaN and
infinities included; :mod:`~pinecall_loadlab.simulate.limits` bounds a day), a time that is not
``HH:MM``, a plot whose folder does not exist.
"""

from __future__ import annotations

from pathlib import Path

import click
from click.core import ParameterSource

from pinecall_loadlab.simulate.limits import (
    DAY_MIN,
    DAY_S,
    MAX_CALLS,
    MAX_CELL,
    MAX_WORKERS,
    spaced,
)
from pinecall_servicekit.operator import Number

CLOCK = "HH:MM"


CALLS = Number(1, MAX_CALLS)
"""Calls a day: 1 to 1 500 000 (:data:`~pinecall_loadlab.simulate.limits.MAX_CALLS`)."""
CELL = Number(1, MAX_CELL)
"""Calls at once at the peak: 1 to 20 000."""
PER_MINUTE = Number(0, MAX_CALLS)
"""A burst's extra callers a minute: 0 to a day's most (the day with its burst is checked too)."""
MINUTES = Number(0, DAY_MIN)
"""Minutes of a burst: 0 to a day's 1 440."""
SECONDS = Number(0, DAY_S)
"""Seconds of a delay or a window: 0 to a day's 86 400."""
WORKERS = click.IntRange(0, MAX_WORKERS)
"""Workers of a kind: 0 to 2 000."""


def _at(value: str | None, option: str) -> float | None:
    """``HH:MM`` of the simulated day as seconds, or a usage error naming ``option``."""
    if value is None:
        return None
    hours, colon, minutes = value.partition(":")
    if colon and hours.isdigit() and minutes.isdigit() and int(hours) < 24 and int(minutes) < 60:
        return int(hours) * 3600.0 + int(minutes) * 60.0
    raise click.BadParameter(f"{value!r} is not a time of the day {CLOCK}", param_hint=option)


@click.command(name="simulate")
@click.option("--day", "day_file", type=click.Path(dir_okay=False, path_type=Path), help="A day file: JSON {\"per_hour\": [24 calls], \"calls\": N}. Default: the seeds' day.")  # fmt: skip
@click.option("--calls", type=CALLS, help=f"Scale the day to this many calls (the seeds': 50 000; 1 to {spaced(MAX_CALLS)}, what the simulator runs).")  # fmt: skip
@click.option("--cell", type=CELL, help=f"Scale the day to this many calls at once at the peak (calls × 4 min ÷ 60 ÷ 10 h × 2; 1 to {spaced(MAX_CELL)}, a day of {spaced(MAX_CALLS)} calls).")  # fmt: skip
@click.option("--seed", type=click.IntRange(min=0), default=1, show_default=True, help="The callers' and the cluster's draws (0 or more).")  # fmt: skip
@click.option(
    "--mode", type=click.Choice(["both", "runtime", "livekit"]), default="both", show_default=True
)
@click.option("--most", type=WORKERS, default=35, show_default=True, help=f"Scaled workers' ceiling (chart workers.scaled.production.most; 0 to {spaced(MAX_WORKERS)}).")  # fmt: skip
@click.option("--least", type=WORKERS, default=0, show_default=True, help="Scaled workers kept at the least (KEDA's minReplicaCount; 0 to --most).")  # fmt: skip
@click.option("--core-seats", type=click.IntRange(min=1), default=2, show_default=True, help="Seats of each core worker.")  # fmt: skip
@click.option("--core-workers", type=WORKERS, default=2, show_default=True, help=f"Workers on the core node (0 to {spaced(MAX_WORKERS)}).")  # fmt: skip
@click.option("--node-delay", type=SECONDS, default=190.0, show_default=True, help="Median seconds from a pending pod to its new node (log-normal; 0 to a day).")  # fmt: skip
@click.option("--down-window", type=SECONDS, default=600.0, show_default=True, help="The HPA's scale-down stabilization window, seconds (0 to a day).")  # fmt: skip
@click.option(
    "--node-lost", metavar=CLOCK, help="Lose a scaled worker's node (drawn at random) then."
)
@click.option("--release", metavar=CLOCK, help="Roll every worker Deployment then.")
@click.option("--burst", metavar=CLOCK, help="A burst of callers from then.")
@click.option("--burst-rate", type=PER_MINUTE, default=100.0, show_default=True, help=f"The burst's extra callers a minute (needs --burst; the day with its burst holds at most {spaced(MAX_CALLS)} calls).")  # fmt: skip
@click.option("--burst-minutes", type=MINUTES, default=10.0, show_default=True, help="The burst's minutes (needs --burst; 0 to a day's 1 440).")  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="The day's totals and every minute, as JSON.")
@click.option("--plot", type=click.Path(dir_okay=False, path_type=Path), help="Draw the day on one page, as a PNG here.")  # fmt: skip
def simulate(
    day_file: Path | None,
    calls: float | None,
    cell: float | None,
    seed: int,
    mode: str,
    most: int,
    least: int,
    core_seats: int,
    core_workers: int,
    node_delay: float,
    down_window: float,
    node_lost: str | None,
    release: str | None,
    burst: str | None,
    burst_rate: float,
    burst_minutes: float,
    as_json: bool,
    plot: Path | None,
) -> None:
    """Simulate a day of callers through the production rules (the dispatcher's, the roster's
    and the worker's domain), LiveKit choosing and the runtime choosing on the same callers.

    Prints the day's totals per mode: callers placed, answered by an agent, sent to the overflow,
    silent, lost with a worker (and of those, sentenced or silent), cut at a drain's end, the
    peak of calls at once, scaled pod-hours and node-hours. --json adds every minute.
    """
    import msgspec

    from pinecall_loadlab.simulate.day import (
        SEED_CALLS,
        DayError,
        burst_calls,
        load_day,
        make_day,
        seed_day,
    )
    from pinecall_loadlab.simulate.engine import MODES, simulate_day
    from pinecall_loadlab.simulate.params import Fault, Params
    from pinecall_loadlab.simulate.report import day_table

    if calls is not None and cell is not None:
        raise click.UsageError("--calls and --cell both scale the day: give one")
    if burst is None:
        for name in ("burst_rate", "burst_minutes"):
            if (
                click.get_current_context().get_parameter_source(name)
                is not ParameterSource.DEFAULT
            ):
                option = "--" + name.replace("_", "-")
                raise click.UsageError(f"{option} shapes a burst: it needs --burst {CLOCK}")
    if least > most:
        raise click.BadParameter(
            f"{least} is past --most {most}: KEDA keeps at most its ceiling", param_hint="'--least'"
        )
    if plot is not None and not plot.resolve().parent.is_dir():
        raise click.BadParameter(f"{plot.resolve().parent} is not a folder", param_hint="'--plot'")
    params = Params(
        most=most,
        least=least,
        core_seats=core_seats,
        core_workers=core_workers,
        node_median_s=node_delay,
        down_window_s=down_window,
    )
    if cell is not None:
        calls = cell * 60 * 10 / (params.call_mean_s / 60) / 2
    try:
        day = load_day(day_file) if day_file is not None else seed_day(SEED_CALLS)
        if calls is not None:
            day = seed_day(calls) if day_file is None else make_day(list(day.per_hour), calls)
    except DayError as exc:
        raise click.BadParameter(str(exc), param_hint="'--day'") from None
    faults = []
    if (t := _at(node_lost, "'--node-lost'")) is not None:
        faults.append(Fault(kind="node_lost", at_s=t))
    if (t := _at(release, "'--release'")) is not None:
        faults.append(Fault(kind="release", at_s=t))
    if (t := _at(burst, "'--burst'")) is not None:
        faults.append(Fault(kind="burst", at_s=t, calls_per_min=burst_rate, minutes=burst_minutes))
        if (total := day.calls + burst_calls(t, burst_rate, burst_minutes)) > MAX_CALLS:
            raise click.BadParameter(
                f"the day and its burst hold {spaced(round(total))} calls, past the"
                f" {spaced(MAX_CALLS)} of a day the simulator runs",
                param_hint="'--burst-rate'",
            )
    params = msgspec.structs.replace(params, faults=tuple(faults))
    modes = MODES if mode == "both" else (f"{mode}_choosing",)
    result = simulate_day(day, params, seed=seed, modes=modes, minutes=as_json or plot is not None)
    if plot is not None:
        from pinecall_loadlab.simulate.plot import draw_day

        draw_day(result, params.faults, plot)
        click.echo(f"lab simulate: plot in {plot}", err=True)
    if node_lost is not None and (missed := [m.mode for m in result.modes if not m.nodes_lost]):
        click.echo(
            f"lab simulate: --node-lost {node_lost} lost nothing ({', '.join(missed)}): no scaled"
            " worker's node was up then, and the core node is never lost",
            err=True,
        )
    if as_json:
        click.echo(msgspec.json.encode(result))
        return
    click.echo(f"a day of {result.callers} callers (seed {seed}):")
    click.echo(day_table(result))
