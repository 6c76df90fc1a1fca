"""A console: an app process that holds an agent and is handed no call, new or parked (the
SDK's ``App(..., takes_unclaimed=False)``; issue 16, "A console never takes a parked call").

``pinecall start pinecall_loadlab.apps.console:app`` (or ``lab app``) runs it; its settings are
its environment: ``CONSOLE_URL`` (call-log), ``CONSOLE_KEY`` (the org's app key), ``CONSOLE_ORG``,
``CONSOLE_AGENT`` and ``CONSOLE_INSTANCE`` (optional: its stable id).
"""

from __future__ import annotations

import os

import pinecall


def app() -> pinecall.App:
    """The console, from its environment (``KeyError`` naming a variable not set)."""
    console = pinecall.App(
        os.environ["CONSOLE_URL"],
        os.environ["CONSOLE_KEY"],
        org=os.environ["CONSOLE_ORG"],
        instance=os.environ.get("CONSOLE_INSTANCE") or None,
        takes_unclaimed=False,
    )
    console.agent(os.environ["CONSOLE_AGENT"])
    return console
