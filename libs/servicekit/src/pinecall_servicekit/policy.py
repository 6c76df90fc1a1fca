"""The one policy (issue 21): what a key, and the person who holds it, may do.

Every route of every service and every NATS ops verb names one permission in the registry
(:mod:`pinecall_servicekit.registry`); :func:`check` answers for a verified key
(:class:`~pinecall_servicekit.persons.Holder`) and the request's target (org, environment, agent):
nothing (allowed) or :class:`~pinecall_servicekit.errors.Forbidden`, a 403 whose detail says what
is missing and whose ``errors`` name the permission and the missing thing.

Two gates, both must pass:

1. The key's **kind** (:data:`PERMISSIONS`' ``kinds``): fleet keys are the workers', service keys
   the services' own reads and posts of each other, app and operator keys are persons' (or of no
   person). This is the gate every route had before persons (its ``kinds=`` tuple), unchanged.
2. The key's **person**, when it has one: refused when disabled; an operator key only for an
   operator person; the role at least the permission's ``least`` (viewer < developer < admin <
   owner); only the person's own org (an operator person: any); production only with production
   access, and only environments the org may use; only the person's agents when they have a list.
   A key of no person passes this gate, as every key did before persons existed.

The table a tenant reads is ``docs/roles.md``; a test holds the two equal.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from pinecall_contracts.keys import KeyKind
from pinecall_contracts.persons import ROLES, Role
from pinecall_servicekit.errors import Forbidden
from pinecall_servicekit.persons import Holder

PRODUCTION: Final = "production"


@dataclass(frozen=True, slots=True)
class Rule:
    """A permission: the key kinds that may ask (in the order a refusal names them), and the
    least role a person holding such a key needs (None: no person's key, only a fleet's or a
    service's; or no key at all when ``kinds`` is empty: the route checks a signature)."""

    kinds: tuple[KeyKind, ...]
    least: Role | None
    says: str


_WORKER: Final[tuple[KeyKind, ...]] = ("fleet",)
_SERVICE: Final[tuple[KeyKind, ...]] = ("service",)
_OPERATOR: Final[tuple[KeyKind, ...]] = ("operator",)
_APP: Final[tuple[KeyKind, ...]] = ("app",)
_APP_OR_OPERATOR: Final[tuple[KeyKind, ...]] = ("app", "operator")
_SERVICE_OR_OPERATOR: Final[tuple[KeyKind, ...]] = ("service", "operator")
_WORKER_SERVICE_OPERATOR: Final[tuple[KeyKind, ...]] = ("fleet", "service", "operator")

PERMISSIONS: Final[dict[str, Rule]] = {
    # the workers' (fleet keys)
    "fleet:heartbeat": Rule(_WORKER, None, "a worker's heartbeat"),
    "fleet:wanted": Rule(_WORKER, None, "KEDA's read of the workers a fleet wants"),
    "calls:run": Rule(_WORKER, None, "a worker running its call: open, entries, tools, commands"),
    "entries:write": Rule(
        ("fleet", "service"),
        None,
        "a call's entries: its worker's; a service's, only what became of a dead job's recording",
    ),
    # the services' own (service keys)
    "calls:admit": Rule(_SERVICE, None, "chat asking the dispatcher to admit a written call"),
    "numbers:secrets": Rule(_SERVICE, None, "chat reading a WhatsApp number's secrets"),
    # the platform's staff (operator keys)
    "fleet:read": Rule(_SERVICE_OR_OPERATOR, "viewer", "read the roster of every fleet"),
    "ops:read": Rule(_OPERATOR, "viewer", "read offers, journals and a call's log, across orgs"),
    "ops:steer": Rule(_OPERATOR, "admin", "cordon and uncordon workers"),
    "keys:read": Rule(_OPERATOR, "viewer", "list keys (never their secrets)"),
    "keys:write": Rule(_OPERATOR, "admin", "make and revoke keys"),
    "orgs:read": Rule(_OPERATOR, "viewer", "list orgs"),
    "orgs:write": Rule(_OPERATOR, "admin", "make orgs"),
    "persons:read": Rule(_OPERATOR, "viewer", "list persons"),
    "persons:write": Rule(_OPERATOR, "admin", "make persons and change them"),
    "quotas:write": Rule(_OPERATOR, "admin", "set an org's quotas"),
    "callbacks:read": Rule(_SERVICE_OR_OPERATOR, "viewer", "read the call backs owed"),
    "calls:read": Rule(_WORKER_SERVICE_OPERATOR, "viewer", "read calls' records"),
    "calls:end": Rule(_WORKER_SERVICE_OPERATOR, "developer", "end and seal a call"),
    "agents:log": Rule(_WORKER_SERVICE_OPERATOR, "developer", "write an agent's log"),
    "entries:read": Rule(
        _WORKER_SERVICE_OPERATOR, "viewer", "read a call's entries (a service's: no transcript)"
    ),
    # a tenant's (app keys, and operators where they do the same by hand)
    "logs:read": Rule(("fleet", "app", "operator"), "viewer", "read an agent's log"),
    "calls:follow": Rule(_APP_OR_OPERATOR, "viewer", "follow a call's page stream (its log token)"),
    "agents:list": Rule(_APP_OR_OPERATOR, "viewer", "list the org's agents"),
    "agents:read": Rule(("app", "fleet", "service", "operator"), "viewer", "read an agent"),
    "recordings:read": Rule(_APP_OR_OPERATOR, "viewer", "read a call's recordings"),
    "numbers:read": Rule(_APP_OR_OPERATOR, "viewer", "read the org's phone and WhatsApp numbers"),
    "agents:write": Rule(_APP_OR_OPERATOR, "developer", "put an agent's definition"),
    "evals:run": Rule(_APP_OR_OPERATOR, "developer", "run a simulated caller's call"),
    "tokens:create": Rule(_APP, "developer", "mint a web visitor's or a chat's token"),
    "calls:place": Rule(_APP, "developer", "place an outbound call"),
    "tools:answer": Rule(_APP, "developer", "answer a tool's call"),
    "apps:connect": Rule(_APP, "developer", "hold the org's agents on the app socket"),
    "callbacks:write": Rule(
        ("app", "fleet", "service", "operator"), "developer", "ask a call back"
    ),
    "numbers:write": Rule(_APP_OR_OPERATOR, "admin", "put and remove the org's numbers"),
    # no key: the route checks a signature or a token of its own
    "open": Rule((), None, "health, readiness and metrics"),
    "signed:livekit": Rule((), None, "LiveKit's webhooks, signed with the environment's secret"),
    "signed:meta": Rule((), None, "Meta's WhatsApp webhooks, signed with the app secret"),
    "signed:chat": Rule((), None, "the web chat's socket, with a chat token"),
    "signed:log-token": Rule((), None, "a call's page stream, with its log token"),
}
"""Every permission, one a line. A permission with no kinds takes no key."""


@dataclass(frozen=True, slots=True)
class Target:
    """What a request acts on, as far as the request says it: ``?org=``, the environment (the
    key's own for a fleet or app key, ``?environment=`` for an operator's), the ``{agent}``."""

    org: str | None = None
    environment: str | None = None
    agent: str | None = None


def _an(word: str) -> str:
    return f"{'an' if word[0] in 'aeiou' else 'a'} {word}"


def missing(holder: Holder, permission: str, target: Target = Target()) -> str | None:
    """What ``holder`` lacks to do ``permission`` on ``target``, said for the caller; None when
    it may. Pure: the table test walks it with every role. ``KeyError`` for a permission the
    registry does not know (a defect, never the caller's)."""
    rule = PERMISSIONS[permission]
    key, person = holder.key, holder.person
    if not rule.kinds:
        return f"{permission} takes no key"
    if key.kind not in rule.kinds:
        return f"{_an(key.kind)} key cannot do this (needs {' or '.join(rule.kinds)})"
    if person is None:
        return None
    if person.disabled:
        return f"person {person.id} is disabled"
    if key.kind == "operator" and not person.operator:
        return f"person {person.id} is not an operator: an operator key needs one"
    if rule.least is None:
        return f"{permission} is not a person's: only a {' or '.join(rule.kinds)} key of no person"
    if ROLES.index(person.role) < ROLES.index(rule.least):
        return f"{_an(person.role)} may not {rule.says} (needs {rule.least} or above)"
    if target.org is not None and target.org != person.org and not person.operator:
        return f"person {person.id} is of {person.org}, not of {target.org}"
    environment = target.environment or key.environment
    # an operator key naming no environment acts in every one, production among them
    if environment in (None, PRODUCTION) and not person.production:
        return f"person {person.id} has no production access"
    environments = () if person.operator else holder.environments  # staff: across orgs
    if environment and environments and environment not in environments:
        return f"org {person.org} may not use {environment}"
    agents = person.agents
    if target.agent is not None and agents is not None and target.agent not in agents:
        return f"person {person.id} may not touch agent {target.agent}"
    return None


def check(holder: Holder, permission: str, target: Target = Target()) -> None:
    """Allow, or raise ``Forbidden`` (403) saying what is missing (:func:`missing`); its
    ``errors`` carry ``{"permission": …, "missing": …}``."""
    if (lack := missing(holder, permission, target)) is not None:
        raise Forbidden(lack, errors=[{"permission": permission, "missing": lack}])
