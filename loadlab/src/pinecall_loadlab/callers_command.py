"""``pinecall-runtime lab callers``: simulated callers at a rate, as a process of its own (``up``
runs it; a developer can too). Heavy imports happen inside the command, so ``--help`` loads no
lab code."""

from __future__ import annotations

from pathlib import Path

import click

from pinecall_servicekit.operator import Number


@click.command()
@click.option(
    "--plan",
    "plan_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    required=True,
    help="A JSON TrafficPlan: each environment's fleet, LiveKit and keys, the dispatcher and "
    "call-log URLs (pinecall_loadlab.callers.traffic).",
)
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="Append each caller's state here as it changes (JSON lines, lab.caller.v1).",
)
@click.option("--rate", type=Number(min=0, min_open=True), help="Callers a second.")
@click.option(
    "--calls", type=click.IntRange(min=0), help="Callers in all (default: until stopped)."
)
def callers(plan_file: Path, out: Path, rate: float | None, calls: int | None) -> None:
    """Ring phones and web visitors at RATE until CALLS were placed and ended, or SIGTERM/SIGINT
    (every caller still in its call then hangs up); each speaks the recorded lines for a turn or
    two."""
    import asyncio
    import logging
    import signal

    import msgspec

    from pinecall_loadlab.callers.traffic import Traffic, load_plan

    try:
        plan = load_plan(plan_file, rate=rate, calls=calls)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise click.BadParameter(f"{plan_file}: {exc}", param_hint="--plan") from None
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        with out.open("ab") as sink:
            traffic = Traffic(plan, sink)
            await traffic.run_until(stop)
        click.echo(f"callers: {len(traffic.reports)} placed, every one ended", err=True)

    asyncio.run(main())
