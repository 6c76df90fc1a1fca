"""``lab whatsapp``: Meta's WhatsApp Cloud API faked on its own wire."""

from __future__ import annotations

import click

from pinecall_loadlab.commands.vendors import SECONDS
from pinecall_servicekit.operator import Number

_WHATSAPP_PORT = 7895
"""`pinecall_loadlab.whatsapp.config.DEFAULT_PORT`, kept here so ``--help`` loads no lab code."""


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port",
    default=None,
    type=click.IntRange(0, 65535),
    help=f"Port (0 picks a free one). Default: the config file's, else {_WHATSAPP_PORT}.",
)
@click.option(
    "--config",
    "config_file",
    type=click.Path(exists=True, dir_okay=False),
    help="A JSON or TOML WhatsAppConfig (app secret, access token, numbers…); flags override it.",
)
@click.option("--webhook", "webhook_url", help="The app's callback URL, where webhooks go.")
@click.option("--pair-interval", type=SECONDS, help="Seconds between sends to one contact.")
@click.option("--window", type=Number(min=0, min_open=True), help="The window, s.")
def whatsapp(
    host: str,
    port: int | None,
    config_file: str | None,
    webhook_url: str | None,
    pair_interval: float | None,
    window: float | None,
) -> None:
    """Run the WhatsApp Cloud API fake until SIGINT or SIGTERM.

    Point the app's Graph URL at it (POST /{version}/{phone_number_id}/messages); contacts write
    with POST /lab/whatsapp/contacts/{wa_id}/messages {"text"}, and what the business sent them
    is at GET /lab/whatsapp/contacts/{wa_id}/messages.
    """
    import asyncio
    import logging
    import signal
    from pathlib import Path

    import msgspec

    from pinecall_loadlab.whatsapp import WhatsAppConfig, WhatsAppFake, load_config

    try:
        config = load_config(Path(config_file)) if config_file else WhatsAppConfig()
    except (msgspec.ValidationError, msgspec.DecodeError) as e:
        raise click.BadParameter(f"{config_file}: {e}", param_hint="--config") from None
    changes: dict[str, object] = {"host": host}
    for field, value in (("port", port), ("webhook_url", webhook_url),
                         ("pair_interval_s", pair_interval), ("window_s", window)):  # fmt: skip
        if value is not None:
            changes[field] = value
    config = msgspec.structs.replace(config, **changes)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")

    async def serve() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        async with WhatsAppFake(config) as fake:
            click.echo(f"whatsapp fake listening on {fake.url} (Graph API {fake.url}/v21.0/…)")
            for number, display in config.numbers.items():
                click.echo(f"  number {number} (+{display})")
            click.echo(f"  webhooks to {config.webhook_url or '(none yet)'}")
            await stop.wait()

    asyncio.run(serve())
