"""The page's stream: a log token minted for a call, and its entries as Server-Sent Events
(seed 002, "The page").

A log token is ``<payload>.<signature>``: the payload is base64url JSON ``{"call", "exp"}`` (exp
in Unix seconds), the signature HMAC-SHA256 of the payload with ``PINECALL_LOG_TOKEN_SECRET``,
which every replica shares, so any replica verifies a token another minted, with no read.

Each event is one entry: ``id`` is its seq, ``data`` the LoggedEntry as JSON (its ``kind``
inside). Events carry no ``event:`` name: a browser's ``EventSource`` hands a named event only to
listeners of that name, so a page would have to know every kind, and kinds are open (a newer
writer's own pass, :mod:`pinecall_contracts.entries`); unnamed, each reaches ``onmessage``.
A page that reconnects sends ``Last-Event-ID`` (or, rebuilding its ``EventSource`` after a
non-200, ``?last_event_id=``) and gets every entry with a higher seq, from
Postgres, whichever replica it reaches: no gap, no repeat. The stream follows the log by
``<ns>.calls.appended.<call>`` notices (subscribed before each read, so none is missed between a
read and the wait; a lost notice costs at most ``poll_s`` of delay) and ends after the seal.
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import hashlib
import hmac
import time
from collections.abc import AsyncIterator
from typing import Any

import msgspec
from litestar import get, post
from litestar.params import FromQuery
from litestar.response import Response, ServerSentEvent, ServerSentEventMessage

from pinecall_call_log.access import AnyRequest, CallPath, call_for, service_of
from pinecall_call_log.store import CallStore
from pinecall_contracts.calls import Appended, LogToken
from pinecall_servicekit.bus import Bus
from pinecall_servicekit.errors import Unauthorized, Unavailable, Unprocessable
from pinecall_servicekit.http import problems

RETRY_MS = 1000
"""The reconnection time a stream sets (``retry:``, milliseconds): a browser's own is about 3 s;
a page cut by a replica's restart is back in one."""


class _Claims(msgspec.Struct, frozen=True):
    call: str
    exp: int


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def mint(secret: str, call: str, ttl_s: float, now: float | None = None) -> tuple[str, int]:
    """A log token for ``call``, valid ``ttl_s`` seconds; returns it and its expiry (Unix s).
    ``Unavailable`` when no secret is set."""
    if not secret:
        raise Unavailable("no PINECALL_LOG_TOKEN_SECRET: this call log mints no log tokens")
    exp = int((now if now is not None else time.time()) + ttl_s)
    payload = _b64(msgspec.json.encode(_Claims(call=call, exp=exp)))
    signature = hmac.new(secret.encode(), payload.encode(), hashlib.sha256).digest()
    return f"{payload}.{_b64(signature)}", exp


def verify(secret: str, token: str | None, call: str, now: float | None = None) -> None:
    """Raise ``Unauthorized`` unless ``token`` is a live log token of ``call``."""
    if not secret or not token or token.count(".") != 1:
        raise Unauthorized("no log token: mint one for this call")
    payload, signature = token.split(".")
    wanted = hmac.new(secret.encode(), payload.encode(), hashlib.sha256).digest()
    try:
        good = hmac.compare_digest(_unb64(signature), wanted)
        claims = msgspec.json.decode(_unb64(payload), type=_Claims) if good else None
    except (ValueError, msgspec.MsgspecError):
        claims = None
    if claims is None or claims.call != call:
        raise Unauthorized("not a log token of this call")
    if claims.exp < (now if now is not None else time.time()):
        raise Unauthorized("the log token expired: mint another")


async def entries_after(
    store: CallStore, bus: Bus, call: str, after: int, *, poll_s: float = 15.0
) -> AsyncIterator[ServerSentEventMessage]:
    """Every entry of ``call`` with seq above ``after``, then each one written, until the seal.

    ``NotFound`` for an unknown call (raised before the first event).
    """
    notice = asyncio.Event()

    async def heard(_: Appended) -> None:
        notice.set()

    subscription = await bus.subscribe(bus.subjects.appended(call), Appended, heard)
    try:
        while True:
            notice.clear()
            log = await store.read(call, after, limit=500)
            for entry in log.entries:
                yield ServerSentEventMessage(id=entry.seq, data=msgspec.json.encode(entry).decode())
                after = entry.seq
            if log.entries:
                continue  # read on until the log has nothing newer
            if log.state == "sealed":
                return
            try:
                async with asyncio.timeout(poll_s):
                    await notice.wait()
            except TimeoutError:
                yield ServerSentEventMessage(comment="keep-alive")
    finally:
        await subscription.unsubscribe()


@post(
    "/v1/calls/{call:str}/log-token", status_code=200, responses=problems(400, 401, 403, 404, 503)
)
async def log_token(request: AnyRequest, call: CallPath) -> LogToken:
    """A token a page follows this call's stream with (minted by its app's server)."""
    await call_for(request, call)
    settings = service_of(request).settings
    token, exp = mint(settings.log_token_secret, call, settings.log_token_ttl_s)
    return LogToken(call=call, token=token, expires_at=dt.datetime.fromtimestamp(exp, dt.UTC))


@get(
    "/v1/calls/{call:str}/stream",
    responses=problems(400, 401, 404, 422, 503),
    response_headers={"Access-Control-Allow-Origin": "*"},
)
async def follow(
    request: AnyRequest,
    call: CallPath,
    log_token: FromQuery[str | None] = None,
    last_event_id: FromQuery[str | None] = None,
) -> Response[Any]:
    """The call's entries as Server-Sent Events after a cursor (a seq), to the seal.

    The cursor is the ``Last-Event-ID`` header (an ``EventSource`` reconnecting sends it) or
    the ``?last_event_id=`` query parameter (a page that rebuilds its ``EventSource`` after a
    non-200 cannot set the header: ``shared/reference/app-socket.md`` §3); the header wins when
    both are there; 0 when neither is. Not ASCII digits (at most 18, a seq's bigint): 422. A sealed call with nothing after the
    cursor is 204, which stops a browser's reconnecting. The first event sets the reconnection
    time (:data:`RETRY_MS`). Any origin may read it (the log token is the whole grant):
    ``Access-Control-Allow-Origin: *``, no credentials."""
    service = service_of(request)
    verify(service.settings.log_token_secret, log_token, call)
    await service.identity(call)
    last = request.headers.get("last-event-id") or last_event_id or "0"
    if not (last.isascii() and last.isdigit() and len(last) <= 18):  # "²" is a digit too
        raise Unprocessable("Last-Event-ID (or ?last_event_id=) is the seq of the last entry seen")
    after = int(last)
    record = await service.store.calls.record(call)  # where the log stands now
    if record is not None and record.state == "sealed" and record.last_seq <= after:
        return Response(None, status_code=204, headers={"Access-Control-Allow-Origin": "*"})
    return ServerSentEvent(
        entries_after(service.store.calls, service.bus, call, after),
        retry_duration=RETRY_MS,
    )


ROUTES = [log_token, follow]
