"""An org's phone numbers: each rings one agent in one environment (issue 18, "Numbers").

The dispatcher keeps them (``DESIGN.md``: it owns phone numbers) and, for each, an inbound SIP
trunk and a dispatch rule on its environment's LiveKit that dispatch the caller's room to the
fleet's plain name with a ``CallRing`` naming the org and agent, so a phone call is placed as
every call is. Numbers are E.164 (``+`` and 7 to 15 digits, no leading 0, ITU-T E.164 §6).
"""

from __future__ import annotations

import datetime as dt

from pinecall_contracts.agents import Org
from pinecall_contracts.base import Contract
from pinecall_contracts.calls import AgentField
from pinecall_contracts.ids import E164, EnvironmentField, Fleet


class PhoneNumberPut(Contract, frozen=True, kw_only=True, tag="phones.number_put.v1"):
    """``PUT /v1/phone-numbers/{number}?org=``: the number rings ``agent``. The same put again
    answers the number as it stands and makes nothing; a number held by another agent or org
    is 409."""

    agent: AgentField


class PhoneNumber(Contract, frozen=True, kw_only=True, tag="phones.number.v1"):
    """A number as every read answers it, with what the dispatcher keeps for it on LiveKit."""

    number: E164
    org: Org
    environment: EnvironmentField
    agent: AgentField
    fleet: Fleet
    """The fleet whose plain name the rule dispatches to (the environment's)."""
    trunk_id: str
    """The inbound SIP trunk holding the number on the environment's LiveKit (``ST_…``)."""
    rule_id: str
    """The dispatch rule of that trunk (``SDR_…``)."""
    created_at: dt.datetime


class PhoneNumberList(Contract, frozen=True, kw_only=True, tag="phones.number_list.v1"):
    """``GET /v1/phone-numbers?org=``: the org's numbers in one environment, by number."""

    org: Org
    environment: EnvironmentField
    numbers: list[PhoneNumber] = []
