"""A call as the app sees it while it serves it: what ``call.attached`` said, and its commands.

A :class:`Call` is a view: commands go by the call's id to whichever socket the app has, so a
``Call`` kept across a reconnect still steers the call once it is handed back to this app.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Literal

from pinecall_contracts.appsocket import CallAttached, CallCommandAck

if TYPE_CHECKING:
    from pinecall.app import App

Detached = Literal["ended", "drained", "lost"]
"""Why the app no longer serves a call: it ended; the app drained its agent; the socket went
(the server parked the call and hands it to another process, or back to this one)."""


class Call:
    """One call this app serves (or served: see :attr:`detached`)."""

    def __init__(self, app: App, attached: CallAttached) -> None:
        self._app = app
        self.id: str = attached.call
        self.agent: str = attached.agent
        self.started: dt.datetime = attached.started
        """When the call opened (UTC)."""
        self.seq: int = attached.seq
        """The call's log head when it was attached."""
        self.why: Literal["new", "handed", "parked"] = attached.why
        """new: it just opened; handed: another process let it go; parked: it waited for an
        app to register its agent."""
        self.claimed: bool = attached.claimed
        """True when a socket held it before."""
        self.prompt_hash: str | None = None
        """The SHA-256 of the prompt sent as ``call.setup`` (hex), once ``call.ready`` came."""
        self.prompt_matches: bool | None = None
        """Whether the call opened with that prompt (False: it runs another version's)."""
        self.detached: Detached | None = None
        """Why this app no longer serves the call; None while it does."""

    def __repr__(self) -> str:
        return f"Call({self.id!r}, agent={self.agent!r}, why={self.why!r})"

    @property
    def held(self) -> bool:
        """Whether this app serves the call now."""
        return self._app.holds(self.id)

    async def say(
        self, text: str, *, id: str | None = None, timeout_s: float = 10.0
    ) -> CallCommandAck:
        """Have the agent say ``text`` (at most 2000 characters) on the call: a ``call.command``
        on its log, once per ``id`` (minted when not given; the same ``id`` again is
        acknowledged as a duplicate, nothing said twice). Returns the acknowledgement (its
        ``seq``); raises :class:`pinecall.CommandRefused` or :class:`pinecall.CommandTimeout`."""
        return await self._app.command(self.id, "say", text, id=id, timeout_s=timeout_s)

    async def end(
        self, text: str | None = None, *, id: str | None = None, timeout_s: float = 10.0
    ) -> CallCommandAck:
        """End the call (``text``: the agent's last sentence, if any), as :meth:`say`."""
        return await self._app.command(self.id, "end", text, id=id, timeout_s=timeout_s)
