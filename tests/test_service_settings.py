"""Each service whose settings hold more than plain values (LiveKit's keys, the fleets rows, the
reaper's service key) checks them before it serves or migrates: exit 78, ``error [settings]``,
not a failure at the first request (``pinecall_servicekit.lifecycle.service_cli``'s ``check``)."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from pinecall_dispatcher.main import cli as dispatcher
from pinecall_reaper.main import cli as reaper
from pinecall_roster.main import cli as roster
from pinecall_webhook_ingest.main import cli as webhook_ingest

NO_LIVEKIT_KEYS = {
    "LIVEKIT_API_KEY": None,
    "LIVEKIT_API_SECRET": None,
    "PINECALL_LIVEKIT_KEYS": None,
}


@pytest.mark.parametrize(
    ("cli", "command", "env", "said"),
    [
        (dispatcher, "serve", NO_LIVEKIT_KEYS, "no LiveKit keys"),
        (dispatcher, "migrate", NO_LIVEKIT_KEYS, "no LiveKit keys"),
        (webhook_ingest, "serve", NO_LIVEKIT_KEYS, "no LiveKit keys"),
        (roster, "serve", {"PINECALL_LIVEKIT_URLS": "sandbox"}, "PINECALL_LIVEKIT_URLS"),
        (roster, "migrate", {"PINECALL_LIVEKIT_URLS": "sandbox"}, "PINECALL_LIVEKIT_URLS"),
        (reaper, "serve", NO_LIVEKIT_KEYS | {"PINECALL_SERVICE_KEY": None}, "SERVICE_KEY"),
    ],
    ids=lambda v: v.name if isinstance(v, click.Group) else None,
)
def test_settings_the_service_cannot_run_with_exit_78_before_it_starts(
    cli: click.Group, command: str, env: dict[str, str | None], said: str
) -> None:
    result = CliRunner().invoke(cli, [command], env=env)
    assert result.exit_code == 78, result.output
    assert result.output.startswith("error [settings]: ")
    assert said in result.output
