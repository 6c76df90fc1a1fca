"""The ``lab`` commands of ``pinecall-runtime`` (mounted from this distribution's entry point).

Heavy imports happen inside each command, so listing the CLI does not load the lab.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from pinecall_loadlab.callers_command import callers
from pinecall_loadlab.livekit.policy import AffinityFormula

if TYPE_CHECKING:
    from pinecall_loadlab.vendors import VendorsConfig


def _key_pair(
    _ctx: click.Context, _param: click.Parameter, values: tuple[str, ...]
) -> dict[str, str]:
    keys = {}
    for value in values:
        key, sep, secret = value.partition(":")
        if not sep or not key or not secret:
            raise click.BadParameter(f"{value!r} is not KEY:SECRET")
        keys[key] = secret
    return keys


@click.group()
def lab() -> None:
    """The load lab: stand-ins and experiments (never part of production)."""


lab.add_command(callers)


@lab.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=7880, show_default=True, help="Port (0 picks a free one).")
@click.option(
    "--keys",
    "keys",
    multiple=True,
    callback=_key_pair,
    metavar="KEY:SECRET",
    help="API key and secret; repeatable; the first signs webhooks. "
    "Default devkey:secret, as livekit-server --dev.",
)
@click.option(
    "--webhook",
    "webhooks",
    multiple=True,
    metavar="URL",
    help="POST every webhook to URL; repeatable.",
)
@click.option(
    "--offer-deadline",
    default=10.0,
    show_default=True,
    help="Seconds one job's offers may take in all (10 measured; ~3 by the source).",
)
@click.option("--target-load", default=0.7, show_default=True, help="agents.target_load.")
@click.option(
    "--affinity",
    type=click.Choice([f.value for f in AffinityFormula]),
    default=AffinityFormula.TARGET_LOAD.value,
    show_default=True,
    help="Node gate formula: which server version to model.",
)
def livekit(
    host: str,
    port: int,
    keys: dict[str, str],
    webhooks: tuple[str, ...],
    offer_deadline: float,
    target_load: float,
    affinity: str,
) -> None:
    """Run the LiveKit stand-in until SIGINT or SIGTERM.

    Workers connect with LIVEKIT_URL=http://HOST:PORT; livekit-api calls the same URL; lab-room
    participants join at /lab/rtc; faults are at /lab/control.
    """
    import asyncio
    import logging
    import signal

    from pinecall_loadlab.livekit import StandIn, StandInConfig

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    config = StandInConfig(
        keys=keys or {"devkey": "secret"},
        webhook_urls=list(webhooks),
        host=host,
        port=port,
        offer_deadline_s=offer_deadline,
        target_load=target_load,
        affinity=AffinityFormula(affinity),
    )

    async def serve() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        async with StandIn(config) as lk:
            click.echo(f"LiveKit stand-in listening on {lk.url}", err=False)
            await stop.wait()

    asyncio.run(serve())


_VENDORS = ("deepgram", "anthropic", "cartesia")


def _faults(
    _ctx: click.Context, _param: click.Parameter, values: tuple[str, ...]
) -> list[tuple[str, str, int | None]]:
    out = []
    kinds = ("status", "stall", "drop", "malformed", "error_event")
    for value in values:
        parts = value.split(":")
        if len(parts) not in (2, 3) or parts[0] not in _VENDORS or parts[1] not in kinds:
            raise click.BadParameter(f"{value!r} is not VENDOR:KIND[:N]")
        try:
            n = int(parts[2]) if len(parts) == 3 else None
        except ValueError:
            raise click.BadParameter(f"{value!r}: N must be a whole number") from None
        out.append((parts[0], parts[1], n))
    return out


_VENDORS_PORT = 7890
"""`pinecall_loadlab.vendors.config.DEFAULT_PORT`, kept here so ``--help`` loads no lab code
(a test holds them equal)."""


def vendors_config(
    config_file: str | None,
    host: str,
    port: int | None,
    latencies: dict[tuple[str, str], float | None],
    faults: list[tuple[str, str, int | None]],
) -> VendorsConfig:
    """The config `lab vendors` serves: the file's (or the defaults), then the flags over it.
    A file that is not a `VendorsConfig` — an unknown key, a bad value — is a usage error."""
    from pathlib import Path

    import msgspec

    from pinecall_loadlab.vendors import Fault, VendorsConfig, load_config

    try:
        config = load_config(Path(config_file)) if config_file else VendorsConfig()
    except (msgspec.ValidationError, msgspec.DecodeError) as e:
        raise click.BadParameter(f"{config_file}: {e}", param_hint="--config") from None
    replace = msgspec.structs.replace
    config = replace(config, host=host, port=config.port if port is None else port)
    changes: dict[str, dict[str, object]] = {v: {} for v in _VENDORS}
    for (vendor, field), value in latencies.items():
        if value is not None:
            changes[vendor][field] = value
    for vendor, kind, n in faults:
        key = "status" if kind in ("status", "error_event") else "after"
        try:
            fault = msgspec.convert({"kind": kind, **({key: n} if n is not None else {})}, Fault)
        except msgspec.ValidationError as e:
            raise click.BadParameter(f"{vendor}:{kind}:{n}: {e}", param_hint="--fault") from None
        planned = changes[vendor].get("faults", getattr(config, vendor).faults)
        changes[vendor]["faults"] = (*planned, fault)  # type: ignore[misc]
    return replace(config, **{v: replace(getattr(config, v), **c) for v, c in changes.items()})


_SECONDS = click.FloatRange(min=0)


@lab.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port",
    default=None,
    type=click.IntRange(0, 65535),
    help=f"Port (0 picks a free one). Default: the config file's, else {_VENDORS_PORT}.",
)
@click.option(
    "--config",
    "config_file",
    type=click.Path(exists=True, dir_okay=False),
    help="A JSON or TOML VendorsConfig; flags override it.",
)
@click.option(
    "--stt-final", type=_SECONDS, help="Deepgram: seconds from an utterance's end to its final."
)
@click.option("--llm-ttft", type=_SECONDS, help="Anthropic: seconds to the first text delta.")
@click.option("--llm-chunk", type=_SECONDS, help="Anthropic: seconds between deltas.")
@click.option("--tts-ttfb", type=_SECONDS, help="Cartesia: seconds to the first audio chunk.")
@click.option("--tts-chunk", type=_SECONDS, help="Cartesia: seconds between audio chunks.")
@click.option(
    "--fault",
    "faults",
    multiple=True,
    callback=_faults,
    metavar="VENDOR:KIND[:N]",
    help="Fail the next attempt: KIND is status (N = HTTP status), stall, drop or malformed "
    "(N = chunks first), error_event (N = status); repeatable, consumed in order.",
)
def vendors(
    host: str,
    port: int | None,
    config_file: str | None,
    stt_final: float | None,
    llm_ttft: float | None,
    llm_chunk: float | None,
    tts_ttfb: float | None,
    tts_chunk: float | None,
    faults: list[tuple[str, str, int | None]],
) -> None:
    """Run the vendor fakes (Deepgram, Anthropic, Cartesia) until SIGINT or SIGTERM.

    Point the real plugins at them: deepgram.STT(base_url=URL/v1/listen),
    anthropic.LLM(base_url=URL), cartesia.TTS(base_url=URL), any API key.
    """
    import asyncio
    import logging
    import signal

    from pinecall_loadlab.vendors import VendorFakes

    latencies = {
        ("deepgram", "first_s"): stt_final,
        ("anthropic", "first_s"): llm_ttft,
        ("anthropic", "chunk_s"): llm_chunk,
        ("cartesia", "first_s"): tts_ttfb,
        ("cartesia", "chunk_s"): tts_chunk,
    }
    config = vendors_config(config_file, host, port, latencies, faults)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")

    async def serve() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        async with VendorFakes(config) as fakes:
            click.echo(f"vendor fakes listening on {fakes.url}")
            click.echo(f"  deepgram.STT(base_url={fakes.deepgram_url!r})")
            click.echo(f"  anthropic.LLM(base_url={fakes.anthropic_url!r})")
            click.echo(f"  cartesia.TTS(base_url={fakes.cartesia_url!r})")
            await stop.wait()

    asyncio.run(serve())


@lab.command(name="run")
@click.argument("scenario", type=click.Choice(["capacity", "ghost", "death"]))
@click.option("--json", "as_json", is_flag=True, help="JSON for scripts.")
@click.option(
    "--interval",
    type=_SECONDS,
    default=1.0,
    show_default=True,
    help="Seconds between calls (the seeds' a second apart).",
)
@click.option(
    "--offer-deadline",
    type=_SECONDS,
    default=10.0,
    show_default=True,
    help="LiveKit's offer deadline (10 measured; ~3 by the source).",
)
@click.option(
    "--reoffer",
    type=_SECONDS,
    default=12.0,
    show_default=True,
    help="The dispatcher's re-offer time (and a fleet's wait): 12 s, the seed's.",
)
@click.option(
    "--connection-timeout",
    type=_SECONDS,
    default=5.0,
    show_default=True,
    help="LiveKit's wait before a lost connection's participant_left (disconnectCleanupDuration).",
)
@click.option(
    "--quiet",
    type=_SECONDS,
    default=10.0,
    show_default=True,
    help="death: seconds a caller who hears nothing after the loss counts as silent.",
)
def run(
    scenario: str,
    as_json: bool,
    interval: float,
    offer_deadline: float,
    reoffer: float,
    connection_timeout: float,
    quiet: float,
) -> None:
    """Run SCENARIO on the LiveKit stand-in, LiveKit choosing and the runtime choosing.

    capacity: two workers of 8 seats, 18 calls; ghost: two workers of 16 seats, 16 calls, the
    second machine gone at the 8th. Prints, for both modes, the calls placed, answered by an
    agent, answered by the overflow, silent, and seats used. death: real worker processes, 3
    calls answered and talked to, their worker SIGKILLed; prints the calls placed, answered,
    sentenced, silent, logs with a gap, and the seconds from each loss's webhook to the
    sentence's first audio. Uses the running Postgres and NATS (or embedded ones), on a database
    and namespace of its own, removed after.
    """
    import asyncio

    import msgspec

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
