"""``pinecall-runtime worker start``: a worker of ``PINECALL_FLEET`` on ``LIVEKIT_URL``."""

from __future__ import annotations

import asyncio
import sys

import click

from pinecall_servicekit.lifecycle import settings_or_exit
from pinecall_servicekit.telemetry import configure_telemetry
from pinecall_worker.settings import WorkerSettings


@click.group(name="worker")
def cli() -> None:
    """The worker: runs the calls of its fleet."""


@cli.command()
def start() -> None:
    """Register with LiveKit and take calls until SIGTERM (drain, exit 0) or a cordon (exit 3)."""
    from pinecall_jobs.native import dump_on_crash
    from pinecall_worker.call import entrypoint, prewarm  # the plugins, before registering
    from pinecall_worker.server import Worker

    dump_on_crash()  # a native crash of the main process (or a thread job's) says where

    settings = settings_or_exit(_settings)
    configure_telemetry(
        "worker",
        level=settings.log_level,
        fmt=settings.log_format,
        traces_file=settings.traces_file,
    )
    sys.exit(int(asyncio.run(Worker(settings, entrypoint, prewarm=prewarm).run())))


def _settings() -> WorkerSettings:
    """The environment's settings, refused (``SettingsError``, exit 78) before anything starts
    when they make no worker name the roster would take (``PINECALL_WORKER_HOST`` with a dot)."""
    settings = WorkerSettings.from_env()
    settings.worker_name(0)
    return settings
