"""Pinecall's app SDK: hold your org's agents over the app socket.

::

    import pinecall

    app = pinecall.App("wss://call-log.example.com", key, org="org_acme")
    booking = app.agent("booking", definition="booking.yaml")

    @booking.tool("check_availability")
    async def check_availability(arguments, context):
        return {"available": True}

    # pinecall start mymodule:app    (runs it; SIGTERM drains, then exits 0)

:class:`App` holds the socket (reconnecting to any replica), :class:`Agent` an agent's tools and
hooks, :class:`Call` a call it serves (``say``, ``end``); :mod:`pinecall.errors` is what it
raises. The wire is ``pinecall_contracts.appsocket``'s.
"""

from pinecall.agent import Agent, ToolContext, load_definition
from pinecall.app import App
from pinecall.call import Call
from pinecall.errors import (
    AgentOutOfScope,
    BadKey,
    BadURL,
    CommandError,
    CommandRefused,
    CommandTimeout,
    NoCommonVersion,
    PinecallError,
    ProtocolError,
    Refused,
    Replaced,
    ToolError,
)

__all__ = [
    "Agent",
    "AgentOutOfScope",
    "App",
    "BadKey",
    "BadURL",
    "Call",
    "CommandError",
    "CommandRefused",
    "CommandTimeout",
    "NoCommonVersion",
    "PinecallError",
    "ProtocolError",
    "Refused",
    "Replaced",
    "ToolContext",
    "ToolError",
    "load_definition",
]
