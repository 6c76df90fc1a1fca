"""Meta's webhook on HTTP (issue 17, "WhatsApp"; ``shared/reference/app-socket.md`` §2).

==============================  =======================================================
route                           answer
==============================  =======================================================
GET  /v1/whatsapp/webhook       Meta's handshake: ``hub.challenge`` as text/plain when
                                ``hub.mode`` is ``subscribe`` and ``hub.verify_token`` is a
                                number's (call-log finds it by its hash); 403 otherwise
POST /v1/whatsapp/webhook       200 ``{"ok": true}`` once the body's signature is verified
                                and each of its messages and statuses is stored on the
                                WhatsApp stream (:mod:`~pinecall_chat.whatsapp_inbox`); a
                                replica processes them after
                                (:class:`~pinecall_chat.whatsapp_threads.Threads`); 503 when
                                JetStream did not store them (Meta delivers again)
==============================  =======================================================

A POST is checked in this order, and a refusal writes nothing: more than
:data:`~pinecall_chat.whatsapp_wire.MAX_BODY_BYTES` 413; a body that is not Meta's webhook (no
``object``/``entry``/``metadata.phone_number_id`` skeleton) 400; a number call-log does not know
404; ``X-Hub-Signature-256`` missing or not the HMAC of the raw body under that number's app
secret 401. The other numbers a body names must have the same app secret (Meta signs a body with
one app's), or their changes are not read. No key: Meta has none; the signature is the proof.
"""

from __future__ import annotations

import time
from typing import Annotated

import msgspec
from litestar import Request, get, post
from litestar.datastructures import State
from litestar.params import QueryParameter
from litestar.response import Response

from pinecall_chat.conversation import Conversations
from pinecall_chat.settings import ChatSettings
from pinecall_chat.whatsapp_graph import Graph
from pinecall_chat.whatsapp_inbox import Inbox
from pinecall_chat.whatsapp_threads import Threads
from pinecall_chat.whatsapp_wire import MAX_BODY_BYTES, Notification, parse, signed
from pinecall_clients.calllog import CallLogClient
from pinecall_clients.errors import CallLogRefused, CallUnknown
from pinecall_contracts.appsocket import Holding
from pinecall_contracts.whatsapp import (
    WhatsAppItem,
    WhatsAppNumber,
    WhatsAppNumberSecrets,
    WhatsAppVerify,
)
from pinecall_servicekit.errors import (
    BadRequest,
    Forbidden,
    NotFound,
    PinecallError,
    Unauthorized,
    Unavailable,
)
from pinecall_servicekit.http import problems
from pinecall_servicekit.lifespan import Opened

AnyRequest = Request[object, object, State]
CACHE_S = 5.0
"""How long a number's secrets are remembered, in seconds (a put is seen within it)."""


class WhatsApp:
    """The webhook's state: call-log (service key), the numbers' secrets briefly, the threads."""

    threads: Threads
    inbox: Inbox

    def __init__(self, call_log: CallLogClient) -> None:
        self.call_log = call_log
        self._numbers: dict[str, tuple[float, WhatsAppNumberSecrets | None]] = {}

    async def number(self, phone_number_id: str) -> WhatsAppNumberSecrets | None:
        cached = self._numbers.get(phone_number_id)
        if cached is not None and time.monotonic() - cached[0] < CACHE_S:
            return cached[1]
        try:
            found: WhatsAppNumberSecrets | None = await self.call_log.request(
                f"/v1/whatsapp/numbers/{phone_number_id}/secrets", None, WhatsAppNumberSecrets,
                within_s=5.0, method="GET",
            )  # fmt: skip
        except CallUnknown:
            found = None
        self._numbers[phone_number_id] = (time.monotonic(), found)
        return found


async def start(opened: Opened, settings: ChatSettings, engine: Conversations) -> WhatsApp | None:
    """The webhook's state for a replica's lifespan: call-log with the service key (None when
    there is none: the webhook answers 503), the Graph sender, and the threads, told by
    ``apps.holding`` which agents are held."""
    if settings.service_key is None:
        return None
    call_log = await opened.enter(CallLogClient(settings.call_log_url, settings.service_key))
    graph = Graph(
        settings.whatsapp_graph_url,
        settings.whatsapp_graph_version,
        settings.whatsapp_pair_interval_s,
    )
    opened.on_close(graph.aclose)
    wa = WhatsApp(call_log)
    bus = opened.bus
    wa.inbox = Inbox(
        bus, ack_wait_s=settings.whatsapp_ack_wait_s, retry_s=settings.whatsapp_retry_s
    )
    await wa.inbox.ensure()
    wa.threads = Threads(
        wa.number, engine, graph, window_s=settings.whatsapp_window_s,
        announce_s=settings.app_announce_s, quota_retry_s=settings.whatsapp_quota_retry_s,
        inbox=wa.inbox,
    )  # fmt: skip
    opened.on_close(wa.threads.aclose)
    # who holds which agent is heard before the first item is taken (Threads._until_heard)
    subscription = await bus.subscribe(bus.subjects.apps_holding, Holding, wa.threads.heard)
    opened.on_close(subscription.unsubscribe)
    await wa.inbox.start(wa.threads.handle)
    opened.on_close(wa.inbox.aclose)
    return wa


def _whatsapp(request: AnyRequest) -> WhatsApp:
    wa: WhatsApp | None = request.app.state.whatsapp
    if wa is None:
        raise Unavailable("this replica has no service key (PINECALL_SERVICE_KEY): no WhatsApp")
    return wa


@get("/v1/whatsapp/webhook", media_type="text/plain", responses=problems(400, 403, 503))
async def handshake(
    request: AnyRequest,
    mode: Annotated[str | None, QueryParameter(name="hub.mode")] = None,
    verify_token: Annotated[
        str | None, QueryParameter(name="hub.verify_token", max_length=512)
    ] = None,
    challenge: Annotated[str | None, QueryParameter(name="hub.challenge", max_length=256)] = None,
) -> str:
    """Meta's verification: echo ``hub.challenge`` for a number's verify token."""
    if mode != "subscribe" or not verify_token or challenge is None:
        raise Forbidden("not Meta's handshake: hub.mode=subscribe, hub.verify_token, hub.challenge")
    try:
        await _whatsapp(request).call_log.request(
            "/v1/whatsapp/verify", WhatsAppVerify(verify_token=verify_token), WhatsAppNumber,
            within_s=5.0,
        )  # fmt: skip
    except CallLogRefused as exc:
        raise Forbidden("no WhatsApp number has this verify token") from exc
    return challenge


@post("/v1/whatsapp/webhook", status_code=200, responses=problems(400, 401, 404, 413, 503))
async def webhook(request: AnyRequest) -> Response[dict[str, bool]]:
    """A signed notification: verified, acknowledged, processed after."""
    wa = _whatsapp(request)
    body = await request.body()
    if len(body) > MAX_BODY_BYTES:
        raise _TooLarge(f"a webhook body is at most {MAX_BODY_BYTES} bytes")
    try:
        notification = parse(body)
    except msgspec.MsgspecError as exc:
        raise BadRequest(f"not Meta's webhook: {exc}") from exc
    ids = notification.numbers()
    if not ids:
        raise BadRequest("the webhook names no phone_number_id")
    first = await wa.number(ids[0])
    if first is None:
        raise NotFound(f"no WhatsApp number {ids[0]}")
    if not signed(first.app_secret, body, request.headers.get("x-hub-signature-256")):
        raise Unauthorized("X-Hub-Signature-256 is not this body's under the number's app secret")
    numbers = {ids[0]: first}
    for other in ids[1:]:
        found = await wa.number(other)
        if found is not None and found.app_secret == first.app_secret:
            numbers[other] = found
    await _store(wa.inbox, notification, numbers)
    return Response({"ok": True})


async def _store(
    inbox: Inbox, notification: Notification, numbers: dict[str, WhatsAppNumberSecrets]
) -> None:
    """Store each message and status of ``notification`` on its thread's subject, in the body's
    order (``numbers``: the verified numbers it is about; another's changes are not read).
    ``BusUnavailable`` (503) when one is not stored: Meta delivers the body again, and what was
    stored of it is stored once."""
    for entry in notification.entry:
        for change in entry.changes:
            number = numbers.get(change.value.metadata.phone_number_id)
            if change.field != "messages" or number is None:
                continue
            phone = number.number.phone_number_id
            for message in change.value.messages:
                raw = msgspec.to_builtins(message)
                item = WhatsAppItem(number=phone, contact=message.from_, message=raw)
                await inbox.put(item, message.id)
            for status in change.value.statuses:
                raw = msgspec.to_builtins(status)
                item = WhatsAppItem(number=phone, contact=status.recipient_id, status=raw)
                await inbox.put(item, f"{status.id}/{status.status}")


class _TooLarge(PinecallError):
    status = 413
    code = "too_large"
    title = "Payload too large"


ROUTES = [handshake, webhook]
