"""``pinecall-runtime roster serve|migrate``: the roster's process entry and image command."""

from __future__ import annotations

from pinecall_roster.settings import RosterSettings
from pinecall_roster.store import migrate
from pinecall_servicekit.lifecycle import service_cli

cli = service_cli(
    "roster",
    about="The roster: hears every worker of every fleet.",
    app="pinecall_roster.app:create_app",
    settings=RosterSettings.from_env,
    check=RosterSettings.fleet_records,  # a malformed fleets or URLs setting fails now
    serves="Serve the roster's HTTP API and ops verbs (settings from the environment).",
    migrate=migrate,
)
