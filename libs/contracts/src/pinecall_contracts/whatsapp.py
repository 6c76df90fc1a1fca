"""WhatsApp numbers: a business number of Meta's Cloud API tied to an org's agent.

Source: issue 17, "WhatsApp" (a number is tied to an org, an environment and an agent, REST + CLI
like agents); ``shared/reference/app-socket.md`` §2 (the verify token of Meta's handshake, the
App Secret that signs its webhooks, the access token of the messages endpoint).

A number is its ``phone_number_id`` (Meta's id of the business number, digits), one org's in one
environment. call-log keeps it (``PUT /v1/whatsapp/numbers/{phone_number_id}``). Its secrets go
in and never come back out of a read (:class:`WhatsAppNumber` has none; the verify token is kept
as its SHA-256 only); the chat service alone, with the service key, reads the app secret and the
access token it verifies webhooks and sends replies with (:class:`WhatsAppNumberSecrets`).
"""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any

import msgspec

from pinecall_contracts.agents import Org
from pinecall_contracts.base import Contract
from pinecall_contracts.calls import AgentField
from pinecall_contracts.ids import EnvironmentField
from pinecall_contracts.plain import means

PHONE_NUMBER_ID_PATTERN = r"^[0-9]{1,32}$(?![\s\S])"
"""Meta's ids are digits (``106540352242922``)."""
PhoneNumberId = Annotated[
    str, msgspec.Meta(pattern=PHONE_NUMBER_ID_PATTERN, examples=["106540352242922"])
]
Display = Annotated[str, msgspec.Meta(pattern=r"^$(?![\s\S])|^[0-9]{5,20}$(?![\s\S])")]
"""The number as people dial it, digits without ``+`` (``15550783881``); empty: not said."""
DISPLAY_GIVEN = means(
    r"^$(?![\s\S])|^\+?[0-9][0-9 ().-]{3,38}[0-9]$(?![\s\S])",
    "a phone number in E.164, like +15551234567 (spaces, dashes, dots and brackets are "
    "let through; 5 to 20 digits)",
)
DisplayGiven = Annotated[
    str,
    msgspec.Meta(
        pattern=DISPLAY_GIVEN,
        examples=["+15550783881", "+1 555-078-3881", "15550783881"],
        description="E.164 as Meta's WhatsApp Manager shows it; kept as its digits.",
    ),
]
"""The number as a put gives it: E.164 as Meta shows it (``+1 555-078-3881``, ``+15550783881``)
or its digits alone; :func:`display_digits` makes it :data:`Display`."""
SECRET_PATTERN = means(
    r"^[\x21-\x7e]+$(?![\s\S])", "printable ASCII with no spaces (8 to 512 characters)"
)
Secret = Annotated[str, msgspec.Meta(min_length=8, max_length=512, pattern=SECRET_PATTERN)]
"""A secret as Meta issues them: printable ASCII, no spaces, 8 to 512 characters (the verify
token is the app's own choice: the same rule)."""


def display_digits(given: str) -> str:
    """The digits of a display number as :data:`DisplayGiven` lets it through (``"+1
    555-078-3881"`` → ``"15550783881"``); ``ValueError`` saying what is expected when they are
    not 5 to 20."""
    digits = "".join(c for c in given if c.isdigit())
    if given and not 5 <= len(digits) <= 20:
        raise ValueError(
            f"display_phone_number {given!r}: expected E.164, like +15551234567 (5 to 20 digits)"
        )
    return digits


class WhatsAppNumberPut(Contract, frozen=True, kw_only=True, tag="whatsapp.number_put.v1"):
    """``PUT /v1/whatsapp/numbers/{phone_number_id}?org=``: tie the number to an agent, with its
    secrets. A put replaces the number's agent and secrets (the same again writes nothing)."""

    agent: AgentField
    """The org's agent that answers the number's contacts (422 when the org has no such agent
    in the environment)."""
    display_phone_number: DisplayGiven = ""
    """E.164 as Meta shows it (``+15550783881``); kept as its digits (:func:`display_digits`)."""
    verify_token: Secret
    """What Meta's handshake (``hub.verify_token``) must carry, 8 characters at least (printable
    ASCII, no spaces); kept as its SHA-256."""
    app_secret: Secret
    """The App Secret: the key of the webhooks' ``X-Hub-Signature-256``."""
    access_token: Secret
    """The Bearer token replies are sent with (Graph API, messages endpoint)."""


class WhatsAppNumber(Contract, frozen=True, kw_only=True, tag="whatsapp.number.v1"):
    """A number as every read answers it: no secret in it."""

    phone_number_id: PhoneNumberId
    org: Org
    environment: EnvironmentField
    agent: AgentField
    display_phone_number: Display = ""
    updated_at: dt.datetime
    """When its agent or secrets last changed (UTC)."""


class WhatsAppNumberList(Contract, frozen=True, kw_only=True, tag="whatsapp.number_list.v1"):
    """``GET /v1/whatsapp/numbers?org=``: the org's numbers in one environment, by id."""

    org: Org
    environment: EnvironmentField
    numbers: list[WhatsAppNumber] = []


class WhatsAppNumberSecrets(Contract, frozen=True, kw_only=True, tag="whatsapp.number_secrets.v1"):
    """``GET /v1/whatsapp/numbers/{phone_number_id}/secrets`` (the service key only): what the
    chat service verifies the number's webhooks and sends its replies with."""

    number: WhatsAppNumber
    app_secret: str
    access_token: str


class WhatsAppVerify(Contract, frozen=True, kw_only=True, tag="whatsapp.verify.v1"):
    """``POST /v1/whatsapp/verify`` (the service key only): whose is the verify token Meta's
    handshake carried? Answered with one number that has it (:class:`WhatsAppNumber`), or 404."""

    verify_token: Annotated[str, msgspec.Meta(max_length=512)]


class WhatsAppItem(Contract, frozen=True, kw_only=True, tag="whatsapp.item.v1"):
    """One verified message or status of a WhatsApp webhook, as the chat service's webhook
    stores it on the WhatsApp stream before Meta hears 200 (``Subjects.whatsapp_thread``,
    ``Nats-Msg-Id`` the message's wamid, or ``<wamid>/<status>`` for a status), and as a chat
    replica takes it off again. ``message``/``status``: Meta's own object as it came (issue 17,
    "WhatsApp"; ``shared/reference/app-socket.md`` §2); exactly one of them is set. No secret
    travels: the replica reads the number's from call-log."""

    number: PhoneNumberId
    """The business number's ``phone_number_id``."""
    contact: str
    """The contact's WhatsApp id (a message's ``from``, a status's ``recipient_id``)."""
    message: dict[str, Any] | None = None
    status: dict[str, Any] | None = None
