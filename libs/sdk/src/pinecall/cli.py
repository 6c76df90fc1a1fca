"""``pinecall start MODULE:APP``: run an app until SIGTERM or SIGINT, then drain it and exit 0.

The first signal drains (``agent.drain`` for each agent; its calls go to another process or wait
parked; the tools it runs still answer) and exits once the app serves nothing; a second one
stops at once. Exit codes: 0 drained, 1 the drain cut short (a second signal, or past
``--drain-timeout``), 2 a usage error (no such module or app), 78 what connecting again would
meet again: a bad URL or key, an agent the org does not define (the settings must change).
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import math
import signal
import sys
from enum import IntEnum

import click

from pinecall.app import App
from pinecall.errors import BadURL, PinecallError, Refused

log = logging.getLogger("pinecall")


class ExitCode(IntEnum):
    """``pinecall start``'s exit codes."""

    DRAINED = 0
    CUT_SHORT = 1
    USAGE = 2
    CONFIG = 78
    """EX_CONFIG, as the runtime's own commands say a setting that cannot be."""


def _finite(seconds: float) -> float:
    """``seconds`` if finite; NaN and infinity pass ``FloatRange``'s bounds (the platform's CLIs
    use ``pinecall_servicekit.operator.Number``, which this distribution does not install)."""
    if not math.isfinite(seconds):
        raise click.BadParameter(f"{seconds} is not a number of seconds")
    return seconds


def load(target: str, app_dir: str) -> App:
    """The :class:`App` ``module:attribute`` names (an ``App``, or a function of no arguments
    returning one), imported with ``app_dir`` first on ``sys.path``."""
    module_name, _, attribute = target.partition(":")
    if not module_name or not attribute:
        raise click.BadParameter(f"{target!r} is not MODULE:APP (e.g. booking:app)")
    sys.path.insert(0, app_dir)
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise click.BadParameter(f"cannot import {module_name}: {exc}") from None
    if not hasattr(module, attribute):
        raise click.BadParameter(f"{module_name} has no {attribute}")
    found = getattr(module, attribute)
    if found is not None and not isinstance(found, App) and callable(found):
        found = found()
    if not isinstance(found, App):
        raise click.BadParameter(f"{target} is no pinecall.App (it is {type(found).__name__})")
    return found


async def serve(app: App, drain_timeout_s: float | None) -> ExitCode:
    """Run ``app`` until a signal, then drain it; a ``PinecallError`` from ``run`` is raised."""
    loop = asyncio.get_running_loop()
    signals: asyncio.Queue[signal.Signals] = asyncio.Queue()
    for each in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(each, signals.put_nowait, each)
    running = asyncio.create_task(app.run(), name="pinecall-app")
    told = asyncio.create_task(signals.get())
    await asyncio.wait({running, told}, return_when=asyncio.FIRST_COMPLETED)
    if not told.done():
        told.cancel()
        await running  # raises what stopped it
        return ExitCode.DRAINED
    log.info("%s: draining %s", told.result().name, ", ".join(app.agents))
    draining = asyncio.create_task(app.drain(drain_timeout_s))
    again = asyncio.create_task(signals.get())
    await asyncio.wait({draining, again}, return_when=asyncio.FIRST_COMPLETED)
    code = ExitCode.DRAINED
    if again.done():
        draining.cancel()
        log.warning("%s again: stopped without waiting for the drain", again.result().name)
        code = ExitCode.CUT_SHORT
    else:
        again.cancel()
        try:
            await draining
        except TimeoutError:
            log.warning("the drain took longer than %s s: stopped", drain_timeout_s)
            code = ExitCode.CUT_SHORT
    await app.close()
    await running
    if code == ExitCode.DRAINED:
        log.info("drained: %s", {a: (d.handed, d.parked) for a, d in app.drained.items()})
    return code


@click.group()
def main() -> None:
    """Pinecall's app SDK."""


@main.command()
@click.argument("target", metavar="MODULE:APP")
@click.option(
    "--app-dir",
    type=click.Path(exists=True, file_okay=False),
    default=".",
    show_default=True,
    help="Where MODULE is found.",
)
@click.option(
    "--drain-timeout",
    type=click.FloatRange(min=0, min_open=True),
    callback=lambda _ctx, _param, value: _finite(value),
    default=600.0,
    show_default=True,
    help="Seconds a drain waits for the app's calls and tools before it stops anyway.",
)
@click.option(
    "--log-level",
    type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"]),
    default="INFO",
    show_default=True,
)
def start(target: str, app_dir: str, drain_timeout: float, log_level: str) -> None:
    """Run the app MODULE:APP until SIGTERM or SIGINT, then drain it (exit 0 once it serves
    nothing)."""
    logging.basicConfig(
        level=log_level, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        app = load(target, app_dir)  # an App made as its module is imported checks its URL and key
    except PinecallError as exc:
        click.echo(f"Error: [{exc.code}] {exc.message}", err=True)
        sys.exit(ExitCode.CONFIG)
    try:
        code = asyncio.run(serve(app, drain_timeout))
    except (Refused, BadURL) as exc:
        click.echo(f"Error: [{exc.code}] {exc.message}", err=True)
        sys.exit(ExitCode.CONFIG)
    except PinecallError as exc:
        click.echo(f"Error: [{exc.code}] {exc.message}", err=True)
        sys.exit(ExitCode.CUT_SHORT)
    sys.exit(code)
