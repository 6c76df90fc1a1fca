"""``lab livekit``: the LiveKit stand-in on its own, for a developer or a test."""

from __future__ import annotations

from urllib.parse import urlsplit

import click

from pinecall_loadlab.livekit.policy import AffinityFormula
from pinecall_servicekit.operator import Number


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


def _urls(_ctx: click.Context, _param: click.Parameter, values: tuple[str, ...]) -> list[str]:
    for value in values:
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise click.BadParameter(f"{value!r} is not an http(s) URL")
    return list(values)


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=7880,
    show_default=True,
    help="Port (0 picks a free one).",
)
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
    callback=_urls,
    metavar="URL",
    help="POST every webhook to URL; repeatable.",
)
@click.option(
    "--offer-deadline",
    type=Number(min=0, min_open=True),
    default=10.0,
    show_default=True,
    help="Seconds one job's offers may take in all (10 measured; ~3 by the source).",
)
@click.option(
    "--target-load",
    type=Number(min=0, max=1, min_open=True),
    default=0.7,
    show_default=True,
    help="agents.target_load.",
)
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
    webhooks: list[str],
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
    from pinecall_servicekit.frozen import freeze_what_started

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    config = StandInConfig(
        keys=keys or {"devkey": "secret"},
        webhook_urls=webhooks,
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
            # what it holds from now on is its rooms; a full collection walking its imports too
            # held it 36 ms under bench/ring_to_offer.py, and every ring waiting on it
            freeze_what_started()
            click.echo(f"LiveKit stand-in listening on {lk.url}", err=False)
            await stop.wait()

    asyncio.run(serve())
