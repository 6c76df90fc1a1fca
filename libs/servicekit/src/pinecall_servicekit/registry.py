"""The one registry of who may do what (issue 21): every route of every service and every NATS
ops verb, and the permission (:data:`pinecall_servicekit.policy.PERMISSIONS`) it needs.

One table, read by the check on every request (:func:`pinecall_servicekit.http.request_key`,
:mod:`pinecall_servicekit.verbs`): a route is found by its method and its path template as
Litestar routes it (``/v1/calls/{call}``; a WebSocket's method is ``WS``). A route or verb
missing here answers 500 (a defect, not the caller's); a test walks every service's Litestar app
from its route table, and every verb, so a new one without a line fails it.
"""

from __future__ import annotations

from typing import Final

ROUTES: Final[dict[tuple[str, str], str]] = {
    # every service (servicekit.http)
    ("GET", "/healthz"): "open",
    ("GET", "/readyz"): "open",
    ("GET", "/metrics"): "open",
    # roster
    ("POST", "/v1/fleet/heartbeat"): "fleet:heartbeat",
    ("GET", "/v1/fleet/wanted"): "fleet:wanted",
    ("GET", "/v1/ops/fleet"): "fleet:read",
    ("GET", "/v1/ops/fleets"): "fleet:read",
    ("POST", "/v1/ops/fleet/{fleet_name}/{worker}/cordon"): "ops:steer",
    ("POST", "/v1/ops/fleet/{fleet_name}/{worker}/uncordon"): "ops:steer",
    ("POST", "/v1/ops/keys/{key_id}/revoke"): "keys:write",
    # dispatcher
    ("POST", "/v1/tokens"): "tokens:create",
    ("POST", "/v1/written-calls"): "calls:admit",
    ("GET", "/v1/ops/offers"): "ops:read",
    ("GET", "/v1/ops/calls/{call}/journal"): "ops:read",
    ("POST", "/v1/ops/quotas"): "quotas:write",
    ("POST", "/v1/evals/voice"): "evals:run",
    ("POST", "/v1/calls/outbound"): "calls:place",
    ("PUT", "/v1/phone-numbers/{number}"): "numbers:write",
    ("DELETE", "/v1/phone-numbers/{number}"): "numbers:write",
    ("GET", "/v1/phone-numbers"): "numbers:read",
    ("GET", "/v1/phone-numbers/{number}"): "numbers:read",
    # call-log
    ("POST", "/v1/calls"): "calls:run",
    ("GET", "/v1/calls"): "calls:read",
    ("GET", "/v1/calls/{call}"): "calls:read",
    ("POST", "/v1/calls/{call}/entries"): "entries:write",
    ("POST", "/v1/entries"): "entries:write",
    ("GET", "/v1/calls/{call}/entries"): "entries:read",
    ("GET", "/v1/calls/{call}/commands"): "calls:run",
    ("POST", "/v1/calls/{call}/events"): "calls:run",
    ("POST", "/v1/calls/{call}/reopened"): "calls:run",
    ("POST", "/v1/calls/{call}/served"): "calls:run",
    ("POST", "/v1/calls/{call}/end"): "calls:end",
    ("POST", "/v1/calls/{call}/seal"): "calls:end",
    ("POST", "/v1/calls/{call}/tools"): "calls:run",
    ("POST", "/v1/calls/{call}/tools/{tool_id}/result"): "tools:answer",
    ("POST", "/v1/calls/{call}/log-token"): "calls:follow",
    ("GET", "/v1/calls/{call}/stream"): "signed:log-token",
    ("GET", "/v1/calls/{call}/recording"): "recordings:read",
    ("POST", "/v1/callbacks"): "callbacks:write",
    ("GET", "/v1/callbacks"): "callbacks:read",
    ("POST", "/v1/agents/{agent}/log"): "agents:log",
    ("GET", "/v1/agents/{agent}/log"): "logs:read",
    ("PUT", "/v1/agents/{agent}"): "agents:write",
    ("GET", "/v1/agents"): "agents:list",
    ("GET", "/v1/agents/{agent}"): "agents:read",
    ("PUT", "/v1/whatsapp/numbers/{phone_number_id}"): "numbers:write",
    ("GET", "/v1/whatsapp/numbers"): "numbers:read",
    ("GET", "/v1/whatsapp/numbers/{phone_number_id}"): "numbers:read",
    ("GET", "/v1/whatsapp/numbers/{phone_number_id}/secrets"): "numbers:secrets",
    ("POST", "/v1/whatsapp/verify"): "numbers:secrets",
    ("WS", "/v1/apps/socket"): "apps:connect",
    # chat
    ("POST", "/v1/chat/tokens"): "tokens:create",
    ("WS", "/v1/chat"): "signed:chat",
    ("GET", "/v1/whatsapp/webhook"): "signed:meta",
    ("POST", "/v1/whatsapp/webhook"): "signed:meta",
    # webhook-ingest
    ("POST", "/v1/livekit/webhook"): "signed:livekit",
}
"""(method, path template) → permission, for every route of every service."""

VERBS: Final[dict[str, str]] = {
    "fleet-list": "fleet:read",
    "fleet-records": "fleet:read",
    "fleet-cordon": "ops:steer",
    "dispatch-offers": "ops:read",
    "dispatch-journal": "ops:read",
    "calls-log": "ops:read",
    "recordings-failed": "ops:read",
    "orgs-create": "orgs:write",
    "orgs-list": "orgs:read",
    "persons-create": "persons:write",
    "persons-list": "persons:read",
    "persons-set": "persons:write",
    "keys-create": "keys:write",
    "keys-list": "keys:read",
    "keys-revoke": "keys:write",
}
"""A NATS ops verb's endpoint name → permission, for every verb of every service."""
