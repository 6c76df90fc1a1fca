"""``lab vendors``: the vendor fakes on their own wire (Deepgram, Anthropic, Cartesia)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from pinecall_servicekit.operator import Number

if TYPE_CHECKING:
    from pinecall_loadlab.vendors import VendorsConfig


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
    settings: dict[tuple[str, str], float | None],
    faults: list[tuple[str, str, int | None]],
) -> VendorsConfig:
    """The config `lab vendors` serves: the file's (or the defaults), then the flags over it
    (``settings``: ``(vendor, field)`` → the flag's value, None when not given; ``faults``
    appended to the file's plan). A file that is not a `VendorsConfig` — an unknown key, a bad
    value — is a usage error."""
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
    for (vendor, field), value in settings.items():
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


SECONDS = Number(min=0)
"""A number of seconds, 0 or more (the lab's latencies and waits)."""


@click.command()
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
    "--stt-final", type=SECONDS, help="Deepgram: seconds from an utterance's end to its final."
)
@click.option("--llm-ttft", type=SECONDS, help="Anthropic: seconds to the first text delta.")
@click.option("--llm-chunk", type=SECONDS, help="Anthropic: seconds between deltas.")
@click.option("--tts-ttfb", type=SECONDS, help="Cartesia: seconds to the first audio chunk.")
@click.option("--tts-chunk", type=SECONDS, help="Cartesia: seconds between audio chunks.")
@click.option(
    "--tool-share",
    type=Number(0, 1),
    help="Anthropic: the share of turns on which the model asks one of the tools offered.",
)
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
    tool_share: float | None,
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

    settings = {
        ("deepgram", "first_s"): stt_final,
        ("anthropic", "first_s"): llm_ttft,
        ("anthropic", "chunk_s"): llm_chunk,
        ("cartesia", "first_s"): tts_ttfb,
        ("cartesia", "chunk_s"): tts_chunk,
        ("anthropic", "tool_share"): tool_share,
    }
    config = vendors_config(config_file, host, port, settings, faults)
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
