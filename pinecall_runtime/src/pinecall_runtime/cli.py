"""``pinecall-runtime``: a click group whose subcommands come from installed distributions.

Each service registers its click group under the entry point group ``pinecall_runtime.commands``
(``roster``, ``fleet``, ``keys``, ``worker``, ``lab``…); this module adds ``migrate`` (every
service's migrations), ``up`` (the platform on one machine), ``load``, the operator's
``doctor`` and ``logs``, which reach the services over NATS only, and ``agents`` and ``numbers``,
which reach call-log over HTTP.
"""

from __future__ import annotations

import importlib
from importlib.metadata import EntryPoint, entry_points

import click

from pinecall_servicekit.operator import OperatorSettings, run

COMMANDS = "pinecall_runtime.commands"
MIGRATIONS = "pinecall_runtime.migrations"
OWN = {
    "up": "pinecall_runtime.up:up",
    "load": "pinecall_runtime.load:load",
    "doctor": "pinecall_runtime.doctor.command:doctor",
    "logs": "pinecall_runtime.logs:logs",
    "agents": "pinecall_runtime.agents:agents",
    "numbers": "pinecall_runtime.numbers:numbers",
}
"""This CLI's own commands, imported only when one is invoked or shown, like the services'
(each pulls SQLAlchemy or httpx: a second on every ``fleet list`` otherwise)."""


def _entry_points(group: str) -> dict[str, EntryPoint]:
    return {ep.name: ep for ep in entry_points(group=group)}


class RuntimeGroup(click.Group):
    """Lists installed commands by name; imports one only when it is invoked or shown."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(OWN) | set(_entry_points(COMMANDS)))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = super().get_command(ctx, cmd_name)
        if command is not None:
            return command
        if cmd_name in OWN:
            module, attr = OWN[cmd_name].split(":")
            own: click.Command = getattr(importlib.import_module(module), attr)
            return own
        ep = _entry_points(COMMANDS).get(cmd_name)
        return ep.load() if ep else None


@click.group(cls=RuntimeGroup)
@click.version_option(package_name="pinecall-runtime")
def main() -> None:
    """Pinecall Runtime: voice agents' calls on LiveKit, seen and steered from one place."""


@main.command()
@run
async def migrate() -> None:
    """Run every installed service's migrations on PINECALL_DATABASE_URL."""
    import asyncio

    from pinecall_servicekit.db import translate_errors

    url = OperatorSettings.load().database_url
    for name, ep in sorted(_entry_points(MIGRATIONS).items()):
        async with translate_errors(f"migrating {name}"):
            await asyncio.to_thread(ep.load(), url)
        click.echo(f"{name}: migrated")
