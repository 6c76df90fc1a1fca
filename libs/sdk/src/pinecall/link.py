"""One app socket opened: the WebSocket upgrade (``websockets``), ``hello``, ``welcome``; and which
failures are worth another try.

The upgrade carries the app key (``Authorization: Bearer``) and the subprotocol
``pinecall.app.v1``; the server accepts, then closes with a code when something is wrong
(``pinecall_contracts.appsocket.Close``). A close it would send again (a bad key, no common
version, an agent out of scope, this instance replaced, a frame out of order) is a
:class:`pinecall.errors.Refused`; anything else (the replica stopping, a missed heartbeat, a slow
read, a network error, a 5xx from a proxy) is tried again, to any replica behind the URL.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import socket
import urllib.parse
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version

import msgspec
from websockets.asyncio.client import ClientConnection, connect
from websockets.client import process_exception
from websockets.exceptions import ConnectionClosed, InvalidStatus, InvalidURI
from websockets.typing import Subprotocol
from websockets.uri import parse_uri

from pinecall.errors import REFUSED, BadURL
from pinecall_contracts.appsocket import SUBPROTOCOL, ErrorFrame, Hello, ToApp, Welcome
from pinecall_contracts.base import encode

log = logging.getLogger("pinecall")

try:
    SDK = f"pinecall-python/{version('pinecall')}"
except PackageNotFoundError:  # run from a source tree
    SDK = "pinecall-python"
"""This SDK and its version: ``hello.sdk`` and the upgrade's ``User-Agent``."""

PATH = "/v1/apps/socket"
"""Where call-log serves the app socket."""
OPEN_TIMEOUT_S = 10.0
"""The upgrade and the ``welcome``, at most this long (seconds), before the attempt is retried."""
DECODER = msgspec.json.Decoder(ToApp)


class Dropped(Exception):
    """The socket closed with a code worth reconnecting after (or none: the network)."""

    def __init__(self, code: int, reason: str) -> None:
        super().__init__(f"the socket closed ({code}{': ' + reason if reason else ''})")
        self.code, self.reason = code, reason


def closed(exc: ConnectionClosed) -> Exception:
    """What a close means: a :class:`~pinecall.errors.Refused` for a code a reconnect would get
    again, else :class:`Dropped`."""
    code, reason = (exc.rcvd.code, exc.rcvd.reason) if exc.rcvd is not None else (1006, "")
    kind = REFUSED.get(code)
    if kind is not None:
        return kind(f"the server closed the app socket {code}: {reason or kind.__doc__}")
    return Dropped(code, reason)


def retryable(exc: Exception) -> bool:
    """Whether another attempt at opening the socket may succeed: a close worth reconnecting
    after, or what ``websockets`` counts as transient (a network error, a timeout, 500/502/503/
    504 on the upgrade)."""
    return isinstance(exc, Dropped) or process_exception(exc) is None


def socket_url(url: str) -> str:
    """The app socket's URL from what an app is given: ``ws(s)://`` as it is, ``http(s)://`` as
    ``ws(s)://``, and :data:`PATH` when it names no path (call-log's own URL). ``BadURL`` for
    anything else."""
    parts = urllib.parse.urlsplit(url)
    scheme = {"ws": "ws", "wss": "wss", "http": "ws", "https": "wss"}.get(parts.scheme.lower())
    if scheme is None or not parts.hostname:
        raise BadURL(f"{url!r} is no app socket's URL: ws(s):// or http(s):// and a host")
    path = parts.path if parts.path not in ("", "/") else PATH
    made = urllib.parse.urlunsplit((scheme, parts.netloc, path, parts.query, ""))
    try:
        parse_uri(made)
    except (InvalidURI, ValueError) as exc:  # ValueError: a port that is no number
        raise BadURL(f"{url!r} is no app socket's URL: {exc}") from None
    return made


def default_instance() -> str:
    """``<host>-<pid>``: stable for the process, another for the next one."""
    host = re.sub(r"[^A-Za-z0-9_.:-]", "-", socket.gethostname()).lstrip("_.:-")[:100]
    return f"{host or 'app'}-{os.getpid()}"


@dataclass
class Link:
    """An open socket that heard ``welcome``."""

    ws: ClientConnection
    welcome: Welcome


async def open_link(url: str, key: str, hello: Hello, user_agent: str) -> Link:
    """Upgrade, say ``hello``, hear ``welcome``. Raises ``BadURL`` (an HTTP answer that is no
    upgrade), a ``Refused`` (a close a reconnect would get again), or what :func:`retryable`
    says is worth another try."""
    try:
        ws = await connect(
            url,
            subprotocols=[Subprotocol(SUBPROTOCOL)],
            additional_headers={"Authorization": f"Bearer {key}"},
            user_agent_header=user_agent,
            open_timeout=OPEN_TIMEOUT_S,
            max_size=None,  # the server bounds what it sends; its frames are never refused here
        )
    except InvalidStatus as exc:
        if process_exception(exc) is None:  # a 5xx: a proxy with no replica behind it yet
            raise
        status = exc.response.status_code
        raise BadURL(
            f"{url} answered the upgrade with HTTP {status}: no app socket there"
        ) from None
    try:
        await ws.send(encode(hello).decode())
        async with asyncio.timeout(OPEN_TIMEOUT_S):
            while True:
                text = await ws.recv(decode=True)
                try:
                    frame = DECODER.decode(text)
                except msgspec.MsgspecError:  # a frame a newer server added: not ours to read
                    continue
                if isinstance(frame, Welcome):
                    return Link(ws, frame)
                if isinstance(frame, ErrorFrame):
                    log.warning("app socket: %s: %s", frame.code, frame.message)
    except ConnectionClosed as exc:
        raise closed(exc) from None
    except BaseException:
        await ws.close()
        raise
