"""The ``lab`` commands of ``pinecall-runtime`` (mounted from this distribution's entry point):
``livekit``, ``vendors``, ``whatsapp`` and ``s3`` (the stand-ins on their own; ``recordings`` measures what ``s3`` holds), ``callers``, ``chats``, ``app`` (a tenant's app
with a ledger, :mod:`pinecall_loadlab.apps.command`), ``run`` (an experiment) and ``simulate``
(a day on a virtual clock), a module each.

Heavy imports happen inside each command, so listing the CLI does not load the lab.
"""

from __future__ import annotations

import click

from pinecall_loadlab.apps.command import app
from pinecall_loadlab.callers_command import callers
from pinecall_loadlab.chats_command import chats
from pinecall_loadlab.commands.livekit import livekit
from pinecall_loadlab.commands.run import run
from pinecall_loadlab.commands.s3 import recordings, s3
from pinecall_loadlab.commands.simulate import simulate
from pinecall_loadlab.commands.vendors import vendors, vendors_config
from pinecall_loadlab.commands.whatsapp import whatsapp


@click.group()
def lab() -> None:
    """The load lab: stand-ins and experiments (never part of production)."""


for command in (livekit, vendors, whatsapp, s3, callers, chats, app, run, simulate, recordings):
    lab.add_command(command)

__all__ = ["lab", "vendors_config"]
