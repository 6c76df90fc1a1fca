"""``pinecall-runtime reaper serve``: the reaper's process entry and image command."""

from __future__ import annotations

from pinecall_reaper.settings import ReaperSettings
from pinecall_servicekit.lifecycle import service_cli

cli = service_cli(
    "reaper",
    about="The reaper: every minute, ends what nobody is running and takes down its room.",
    app="pinecall_reaper.app:create_app",
    settings=ReaperSettings.from_env,
    check=ReaperSettings.check,
    serves=(
        "Serve /healthz, /readyz and /metrics and reap every PINECALL_REAP_EVERY_S seconds.\n\n"
        "One Granian worker: the reap runs in the app's lifespan, and a second replica is "
        "another process (replicas do not fight, see pinecall_reaper.reaper)."
    ),
    workers=False,
)
