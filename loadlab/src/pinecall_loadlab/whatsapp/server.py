"""The WhatsApp Cloud API fake as one loopback server: Meta's messages endpoint, and Meta's side
of the webhooks (contacts who write, statuses of what the business sent).

    async with WhatsAppFake(WhatsAppConfig(port=0, webhook_url=url)) as wa:
        ana = wa.contact("34600111222", name="Ana")
        ana.send("Do you have a table tonight?")          # a signed webhook, retried until 2xx
        [reply] = await ana.wait_received(1)               # what the business sent her
        wa.webhooks.faults.duplicate_next = 2              # the next two arrive twice
        wa.status_order = "reversed"                       # read, delivered, sent
        wa.advance(86_401)                                 # her 24-hour window closes

``POST /{version}/{phone_number_id}/messages`` (``Authorization: Bearer <access_token>``,
``{"messaging_product": "whatsapp", "to", "type": "text", "text": {"body"}}``) answers 200 with
a ``wamid`` and then sends that message's statuses as webhooks (sent, delivered, read, in
`status_order`; or ``failed`` for `fail_next`). Refusals are Graph errors, HTTP 400 unless said:
a missing or wrong token 401 (190); a number the app does not have, or a body that is not a text
message, 100; the contact's window closed (no message from them within `window_s` by the fake's
clock) 131047; a send to the same contact sooner than `pair_interval_s` after the last 131056.
Meta may report 131047 in a ``failed`` status after a 200 instead; the fake answers at once, so a
test sees the refusal where it is made.

The lab's own control (HTTP, for processes that do not hold the fake): ``POST
/lab/whatsapp/contacts/{wa_id}/messages {"text", "number"?, "name"?}`` → ``{"id"}``; ``GET
/lab/whatsapp/contacts/{wa_id}/messages`` → ``{"received": [{"id", "number", "text"}]}``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import re
import time
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Literal

from aiohttp import web

from pinecall_loadlab import serving

from . import wire
from .config import WhatsAppConfig
from .webhooks import Delivery, WebhookSender

log = logging.getLogger(__name__)

StatusOrder = Literal["in_order", "reversed", "shuffled"]
MAX_TEXT = 4096
"""The longest text body Meta takes, in characters."""
_DIGITS = re.compile(r"[0-9]{5,20}")


@dataclass(frozen=True, kw_only=True)
class Sent:
    """A message the business sent through the messages endpoint."""

    id: str
    number: str
    to: str
    text: str


@dataclass
class Contact:
    """A WhatsApp user the test plays."""

    fake: WhatsAppFake
    wa_id: str
    name: str
    received: list[Sent] = field(default_factory=list)
    _changed: asyncio.Event = field(default_factory=asyncio.Event)

    def send(self, text: str, number: str | None = None) -> Delivery:
        """Write ``text`` to business number ``number`` (the fake's first by default): a
        webhook with a new ``wamid``, stamped with the fake's clock; opens the window."""
        return self.fake.inbound(self, text, number)

    async def wait_received(self, n: int) -> list[Sent]:
        """The first ``n`` messages the business sent this contact, once there are that many
        (bound it with `asyncio.timeout`)."""
        while len(self.received) < n:
            self._changed.clear()
            await self._changed.wait()
        return self.received[:n]


class WhatsAppFake:
    """Meta's Cloud API for one app and its numbers, on `config.host`:`config.port`."""

    def __init__(self, config: WhatsAppConfig | None = None) -> None:
        self.config = config or WhatsAppConfig()
        self.webhooks = WebhookSender(self.config)
        self.contacts: dict[str, Contact] = {}
        self.sent: list[Sent] = []
        """Every message the messages endpoint took, in order."""
        self.refused: list[tuple[str, int]] = []
        """(to, Graph error code) of every send refused for a rule (window, pair rate)."""
        self.status_order: StatusOrder = "in_order"
        self.statuses: tuple[wire.Status, ...] = ("sent", "delivered", "read")
        self.fail_next = 0
        """The next N messages sent get one status: ``failed`` (131000)."""
        self.offset_s = 0.0
        self._window: dict[tuple[str, str], float] = {}
        self._last_send: dict[tuple[str, str], float] = {}
        self._random = random.Random(17)
        self.app = web.Application()
        self.app.router.add_post(r"/{version:v[0-9]+\.[0-9]+}/{number}/messages", self._messages)
        self.app.router.add_post("/lab/whatsapp/contacts/{wa_id}/messages", self._lab_send)
        self.app.router.add_get("/lab/whatsapp/contacts/{wa_id}/messages", self._lab_received)
        self._runner: web.AppRunner | None = None
        self.port = self.config.port

    @property
    def url(self) -> str:
        """The Graph API's base (``https://graph.facebook.com`` of the real one)."""
        return f"http://{self.config.host}:{self.port}"

    @property
    def number(self) -> str:
        """The first business number's phone_number_id."""
        return next(iter(self.config.numbers))

    def now(self) -> float:
        """The fake's clock, Unix seconds: the wall clock moved by `advance`."""
        return time.time() + self.offset_s

    def advance(self, seconds: float) -> None:
        """Move the fake's clock (timestamps, the 24-hour window) ``seconds`` on."""
        self.offset_s += seconds

    def set_webhook_url(self, url: str) -> None:
        self.webhooks.url = url

    def contact(self, wa_id: str, name: str = "Lab Contact") -> Contact:
        """The contact ``wa_id`` (digits), made the first time it is named."""
        if not _DIGITS.fullmatch(wa_id):
            raise ValueError(f"{wa_id!r} is not a wa_id (5-20 digits)")
        if wa_id not in self.contacts:
            self.contacts[wa_id] = Contact(self, wa_id, name)
        return self.contacts[wa_id]

    def inbound(self, contact: Contact, text: str, number: str | None = None) -> Delivery:
        number = number or self.number
        now = self.now()
        self._window[(number, contact.wa_id)] = now
        payload = wire.message_webhook(
            waba_id=self.config.waba_id,
            number=number,
            display=self.config.numbers[number],
            wa_id=contact.wa_id,
            name=contact.name,
            message_id=wire.wamid(),
            text=text,
            timestamp=int(now),
        )
        return self.webhooks.send(payload)

    # -- the messages endpoint ---------------------------------------------------------------

    async def _messages(self, request: web.Request) -> web.Response:
        number = request.match_info["number"]
        if request.headers.get("Authorization") != f"Bearer {self.config.access_token}":
            return web.json_response(wire.error(wire.ACCESS_TOKEN), status=401)
        if number not in self.config.numbers:
            said = (
                f"Unsupported post request. Object with ID '{number}' does not exist, cannot "
                "be loaded due to missing permissions, or does not support this operation"
            )
            return web.json_response(wire.error(wire.INVALID_PARAMETER, message=said), status=400)
        try:
            body = json.loads(await request.read())
        except ValueError:
            body = None
        why, to, text = _text_message(body)
        if why is not None:
            err = wire.error(wire.INVALID_PARAMETER, details=why)
            return web.json_response(err, status=400)
        code = self._rule(number, to)
        if code is not None:
            self.refused.append((to, code))
            return web.json_response(wire.error(code), status=400)
        self._last_send[(number, to)] = time.monotonic()
        message = Sent(id=wire.wamid(), number=number, to=to, text=text)
        self.sent.append(message)
        contact = self.contact(to)
        contact.received.append(message)
        contact._changed.set()
        self._statuses(message)
        return web.json_response(wire.sent(to, message.id))

    def _rule(self, number: str, to: str) -> int | None:
        """Which of Meta's rules refuses free text to ``to`` now, if one does."""
        opened = self._window.get((number, to))
        if opened is None or self.now() - opened > self.config.window_s:
            return wire.RE_ENGAGEMENT
        last = self._last_send.get((number, to))
        if last is not None and time.monotonic() - last < self.config.pair_interval_s:
            return wire.PAIR_RATE
        return None

    def _statuses(self, message: Sent) -> None:
        def status(said: wire.Status, error: int | None = None) -> dict[str, Any]:
            return wire.status_webhook(
                waba_id=self.config.waba_id,
                number=message.number,
                display=self.config.numbers[message.number],
                message_id=message.id,
                recipient=message.to,
                status=said,
                timestamp=int(self.now()),
                error=error,
            )

        if self.fail_next > 0:
            self.fail_next -= 1
            self.webhooks.send(status("failed", 131000))
            return
        order = list(self.statuses)
        if self.status_order == "reversed":
            order.reverse()
        elif self.status_order == "shuffled":
            self._random.shuffle(order)
        for said in order:
            self.webhooks.send(status(said))

    # -- the lab's control -------------------------------------------------------------------

    async def _lab_send(self, request: web.Request) -> web.Response:
        try:
            body = json.loads(await request.read())
            text = body["text"]
            number = body.get("number") or self.number
            contact = self.contact(request.match_info["wa_id"], body.get("name", "Lab Contact"))
            if not isinstance(text, str) or not text or number not in self.config.numbers:
                raise ValueError("text is a non-empty string; number one of the fake's")
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            return web.json_response({"error": f"not a lab message: {exc}"}, status=400)
        delivery = contact.send(text, number)
        message_id = delivery.payload["entry"][0]["changes"][0]["value"]["messages"][0]["id"]
        return web.json_response({"id": message_id, "delivery": delivery.id})

    async def _lab_received(self, request: web.Request) -> web.Response:
        contact = self.contacts.get(request.match_info["wa_id"])
        received = [] if contact is None else contact.received
        out = [{"id": m.id, "number": m.number, "text": m.text} for m in received]
        return web.json_response({"received": out})

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        """Listen; with port 0 the chosen port is in `port`."""
        await self.webhooks.start()
        self._runner = web.AppRunner(self.app, handle_signals=False, shutdown_timeout=1.0)
        await self._runner.setup()
        await web.TCPSite(self._runner, self.config.host, self.config.port).start()
        self.port = self._runner.addresses[0][1]
        log.info("whatsapp fake listening on %s", self.url)

    async def aclose(self) -> None:
        await self.webhooks.aclose()
        if self._runner is not None:
            await serving.stop(self._runner)

    async def __aenter__(self) -> WhatsAppFake:
        await self.start()
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


def _text_message(body: Any) -> tuple[str | None, str, str]:
    """(why Meta refuses it or None, to, text) of a messages endpoint body."""
    if not isinstance(body, dict):
        return "the body is not a JSON object", "", ""
    if body.get("messaging_product") != "whatsapp":
        return "messaging_product must be 'whatsapp'", "", ""
    to = body.get("to")
    if not isinstance(to, str) or not _DIGITS.fullmatch(to.lstrip("+")):
        return "to: a phone number or wa_id (digits)", "", ""
    if body.get("type", "text") != "text":
        return "type: the fake sends text messages only", "", ""
    text = body.get("text")
    said = text.get("body") if isinstance(text, dict) else None
    if not isinstance(said, str) or not said.strip():
        return "text.body: required, a non-empty string", "", ""
    if len(said) > MAX_TEXT:
        return f"text.body: at most {MAX_TEXT} characters", "", ""
    return None, to.lstrip("+"), said
