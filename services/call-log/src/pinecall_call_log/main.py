"""``pinecall-runtime call-log serve|migrate``: the call log's process entry and image command."""

from __future__ import annotations

from pinecall_call_log.settings import CallLogSettings
from pinecall_call_log.store import migrate
from pinecall_servicekit.lifecycle import service_cli

cli = service_cli(
    "call-log",
    about="The call log: every entry of every call, exactly once, in order.",
    app="pinecall_call_log.app:create_app",
    settings=CallLogSettings.from_env,
    serves="Serve the call log's HTTP API (settings from the environment).",
    migrate=migrate,
)
