"""``lab run SCENARIO``: an experiment on the stand-in, LiveKit choosing and the runtime choosing."""

from __future__ import annotations

from pathlib import Path

import click

from pinecall_loadlab.commands.vendors import SECONDS
from pinecall_servicekit.operator import Number


@click.command(name="run")
@click.argument("scenario", type=click.Choice(["capacity", "ghost", "death", "handover"]))
@click.option("--json", "as_json", is_flag=True, help="JSON for scripts.")
@click.option(
    "--interval",
    type=SECONDS,
    default=1.0,
    show_default=True,
    help="Seconds between calls (the seeds' a second apart).",
)
@click.option(
    "--offer-deadline",
    type=SECONDS,
    default=10.0,
    show_default=True,
    help="LiveKit's offer deadline (10 measured; ~3 by the source).",
)
@click.option(
    "--reoffer",
    type=SECONDS,
    default=12.0,
    show_default=True,
    help="The dispatcher's re-offer time (and a fleet's wait): 12 s, the seed's.",
)
@click.option(
    "--connection-timeout",
    type=SECONDS,
    default=5.0,
    show_default=True,
    help="LiveKit's wait before a lost connection's participant_left (disconnectCleanupDuration).",
)
@click.option(
    "--quiet",
    type=SECONDS,
    default=10.0,
    show_default=True,
    help="death: seconds a caller who hears nothing after the loss counts as silent.",
)
@click.option(
    "--calls",
    type=click.IntRange(min=1),
    default=20,
    show_default=True,
    help="handover: callers in all.",
)
@click.option(
    "--rate",
    type=Number(min=0, min_open=True),
    default=1.0,
    show_default=True,
    help="handover: callers a second.",
)
@click.option(
    "--tool-share",
    type=Number(0, 1),
    default=1.0,
    show_default=True,
    help="handover: the share of turns on which the model asks a tool.",
)
@click.option(
    "--app-restarts",
    type=Number(min=1),
    default=5.0,
    show_default=True,
    metavar="N",
    help="handover: SIGKILL an app process every N seconds.",
)
@click.option(
    "--plot",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="capacity, ghost: draw the seats used over time, both modes, as a PNG here.",
)
def run(
    scenario: str,
    as_json: bool,
    interval: float,
    offer_deadline: float,
    reoffer: float,
    connection_timeout: float,
    quiet: float,
    calls: int,
    rate: float,
    tool_share: float,
    app_restarts: float,
    plot: Path | None,
) -> None:
    """Run SCENARIO on the LiveKit stand-in, LiveKit choosing and the runtime choosing.

    capacity: two workers of 8 seats, 18 calls; ghost: two workers of 16 seats, 16 calls, the
    second machine gone at the 8th. Prints, for both modes, the calls placed, answered by an
    agent, answered by the overflow, silent, and seats used. death: real worker processes, 3
    calls answered and talked to, their worker SIGKILLed; prints the calls placed, answered,
    sentenced, silent, logs with a gap, and the seconds from each loss's webhook to the
    sentence's first audio. handover: `pinecall-runtime up` with --calls at --rate, tools on
    --tool-share of the turns, an app process SIGKILLed every --app-restarts s; prints the calls,
    tool calls asked, answered by the app, timed out and run twice, the calls handed, and the
    loss → call.attached seconds (exit 1 when up's report names a problem). --plot FILE.png
    (capacity, ghost): the seats used over time, both modes. Uses the running
    Postgres and NATS (or embedded ones), on a database and namespace of its own, removed after.
    """
    import asyncio

    import msgspec

    if plot is not None and scenario not in ("capacity", "ghost"):
        raise click.UsageError("--plot draws capacity and ghost only")
    if plot is not None and not plot.resolve().parent.is_dir():
        raise click.BadParameter(f"{plot.resolve().parent} is not a folder", param_hint="'--plot'")

    if scenario == "handover":
        from pinecall_loadlab.scenarios.handover import handover, handover_table

        try:
            found = handover(
                calls=calls, rate=rate, tool_share=tool_share, app_restarts_s=app_restarts
            )
        except RuntimeError as exc:
            raise click.ClickException(str(exc)) from None
        click.echo(
            msgspec.json.format(msgspec.json.encode(found), indent=2)
            if as_json
            else handover_table(found)
        )
        if found.up_exit != 0:
            raise SystemExit(1)
        return

    from pinecall_loadlab.scenarios import experiments
    from pinecall_loadlab.scenarios.death import DeathExperiment, death_table
    from pinecall_loadlab.scenarios.lab import lab_platform

    async def main() -> experiments.Experiment | DeathExperiment:
        async with lab_platform(
            offer_deadline_s=offer_deadline, connection_timeout_s=connection_timeout
        ) as (lk, config):
            config.log_level = "WARNING"
            setup = experiments.Setup(
                lk=lk,
                config=config,
                interval_s=interval,
                dispatcher={"reoffer_s": reoffer, "fleet_wait_s": reoffer},
                quiet_s=quiet,
            )
            return await experiments.run(scenario, setup)

    result = asyncio.run(main())
    if plot is not None and isinstance(result, experiments.Experiment):
        from pinecall_loadlab.plots import draw_experiment

        draw_experiment(result, plot)
        click.echo(f"lab run: plot in {plot}", err=True)
    if as_json:
        click.echo(msgspec.json.format(msgspec.json.encode(result), indent=2))
        return
    from pinecall_servicekit.operator import table

    if isinstance(result, DeathExperiment):
        click.echo(death_table(result))
        return

    click.echo(f"{result.experiment}:")
    click.echo(
        table(
            ("mode", "placed", "agent", "overflow", "silent", "seats used"),
            [
                (
                    m.mode,
                    m.placed,
                    m.answered_by_agent,
                    m.answered_by_overflow,
                    m.silent,
                    f"{m.seats_used}/{m.seats}",
                )
                for m in result.modes
            ],
        )
    )
    for m in result.modes:
        if m.detail:
            click.echo(f"{m.mode}: " + ", ".join(f"{k} {v}" for k, v in m.detail.items()))
