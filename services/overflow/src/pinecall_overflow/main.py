"""``pinecall-runtime overflow start``: the overflow of ``PINECALL_FLEET`` on ``LIVEKIT_URL``."""

from __future__ import annotations

import asyncio
import sys

import click

from pinecall_overflow.settings import OverflowSettings
from pinecall_servicekit.lifecycle import settings_or_exit
from pinecall_servicekit.telemetry import configure_telemetry


@click.group(name="overflow")
def cli() -> None:
    """The overflow: one sentence and a call back when a fleet is full."""


@cli.command()
def start() -> None:
    """Register with LiveKit as <fleet>/overflow and take the dispatcher's jobs until SIGTERM
    (drain, exit 0)."""
    from pinecall_jobs.native import dump_on_crash
    from pinecall_overflow.server import Overflow  # livekit-agents and the voice, once

    dump_on_crash()  # its jobs run in its threads: a native crash in one says where

    settings = settings_or_exit(lambda: OverflowSettings.from_env().check())
    configure_telemetry(
        "overflow",
        level=settings.log_level,
        fmt=settings.log_format,
        traces_file=settings.traces_file,
    )
    sys.exit(int(asyncio.run(Overflow(settings).run())))
