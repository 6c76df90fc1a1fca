"""The one policy against its documented table (issue 21, acceptance 1): every route of every
service's Litestar app (read from the app's own route table) and every NATS ops verb has a line
in the registry, and each answers, for a person of every role and a key of every kind, what
``docs/roles.md`` says."""

from __future__ import annotations

import ast
import datetime as dt
import re
from pathlib import Path

import pytest
from litestar import Litestar
from litestar.routes import WebSocketRoute

from pinecall_call_log.app import create_app as call_log
from pinecall_call_log.settings import CallLogSettings
from pinecall_chat.app import create_app as chat
from pinecall_chat.settings import ChatSettings
from pinecall_contracts.keys import KeyInfo, KeyKind
from pinecall_contracts.persons import ROLES, PersonInfo, Role
from pinecall_dispatcher.app import create_app as dispatcher
from pinecall_dispatcher.settings import DispatcherSettings
from pinecall_reaper.app import create_app as reaper
from pinecall_reaper.settings import ReaperSettings
from pinecall_roster.app import create_app as roster
from pinecall_roster.settings import RosterSettings
from pinecall_servicekit.persons import Holder
from pinecall_servicekit.policy import PERMISSIONS, Target, missing
from pinecall_servicekit.registry import ROUTES, VERBS
from pinecall_webhook_ingest.app import create_app as webhook_ingest
from pinecall_webhook_ingest.settings import IngestSettings

ROOT = Path(__file__).parents[2]
A_KEY = "pck_0123456789ab_" + "x" * 43
LIVEKIT = {"LIVEKIT_API_KEY": "devkey", "LIVEKIT_API_SECRET": "s" * 32}
NOW = dt.datetime(2026, 12, 3, tzinfo=dt.UTC)


def _apps() -> dict[str, Litestar]:
    """Every HTTP service's app, built as it serves (nothing connects before its lifespan)."""
    chat_env = {
        "PINECALL_FLEET_KEYS": f"production={A_KEY}",
        "PINECALL_CHAT_TOKEN_SECRET": "c" * 32,
    }
    return {
        "roster": roster(RosterSettings.from_env({})),
        "dispatcher": dispatcher(DispatcherSettings.from_env(LIVEKIT)),
        "call-log": call_log(CallLogSettings.from_env({})),
        "chat": chat(ChatSettings.from_env(chat_env)),
        "webhook-ingest": webhook_ingest(IngestSettings.from_env(LIVEKIT)),
        "reaper": reaper(ReaperSettings.from_env(LIVEKIT | {"PINECALL_SERVICE_KEY": A_KEY})),
    }


def _served() -> set[tuple[str, str]]:
    """(method, path template) of every route every app serves, but Litestar's own: its OpenAPI
    pages and the OPTIONS and HEAD it answers by itself."""
    served: set[tuple[str, str]] = set()
    for app in _apps().values():
        for route in app.routes:
            if route.path_format == "/schema" or route.path_format.startswith("/schema/"):
                continue
            methods = {"WS"} if isinstance(route, WebSocketRoute) else set(route.methods)
            served |= {(m, route.path_format) for m in methods - {"OPTIONS", "HEAD"}}
    return served


def _verbs() -> set[str]:
    """The name of every ``Verb(...)`` in every service's source."""
    names: set[str] = set()
    for path in ROOT.glob("services/*/src/**/*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Verb":
                first = node.args[0]
                assert isinstance(first, ast.Constant), f"{path}: a verb's name is a literal"
                names.add(first.value)
    return names


def _documented() -> dict[str, tuple[tuple[str, ...], dict[Role, bool]]]:
    """``docs/roles.md``'s table: permission → (key kinds, role → yes)."""
    rows: dict[str, tuple[tuple[str, ...], dict[Role, bool]]] = {}
    for line in (ROOT / "docs" / "roles.md").read_text().splitlines():
        match = re.match(r"^\| `([a-z:-]+)` \|", line)
        if match:
            cells = [c.strip() for c in line.strip("|").split("|")]
            kinds = () if cells[2] == "no key" else tuple(cells[2].split(", "))
            rows[match[1]] = (kinds, {r: c == "yes" for r, c in zip(ROLES, cells[3:], strict=True)})
    return rows


def _holder(kind: KeyKind, role: Role | None = None, **person: object) -> Holder:
    environment = "sandbox" if kind in ("app", "fleet") else None
    key = KeyInfo(id="0a1b2c3d4e5f", kind=kind, name="k", environment=environment, created_at=NOW)
    if role is None:
        return Holder(key)
    fields: dict[str, object] = {"production": True, "operator": kind == "operator"} | person
    who = PersonInfo(id="5e1f0a2b3c4d", org="org_acme", name="ada", role=role, created_at=NOW,
                     **fields)  # type: ignore[arg-type]  # fmt: skip
    return Holder(key, who, ("production", "sandbox"))


def test_every_route_of_every_service_has_one_line_in_the_registry_and_no_line_is_stale() -> None:
    served = _served()
    assert served - ROUTES.keys() == set(), "routes with no permission: add them to the registry"
    assert ROUTES.keys() - served == set(), "registry lines no service serves"
    assert set(ROUTES.values()) | set(VERBS.values()) <= PERMISSIONS.keys()


def test_every_ops_verb_has_one_line_in_the_registry() -> None:
    assert _verbs() == VERBS.keys()


def test_the_documented_table_is_the_policys_table() -> None:
    documented = _documented()
    assert documented.keys() == PERMISSIONS.keys()
    for name, (kinds, _) in documented.items():
        assert kinds == PERMISSIONS[name].kinds, name


_ALL = sorted({*((f"{m} {p}", perm) for (m, p), perm in ROUTES.items()),
               *((f"verb {v}", perm) for v, perm in VERBS.items())})  # fmt: skip


@pytest.mark.parametrize(("what", "permission"), _ALL, ids=[w for w, _ in _ALL])
def test_every_route_and_verb_answers_every_role_and_kind_as_the_table_says(
    what: str, permission: str
) -> None:
    kinds, roles = _documented()[permission]
    for kind in ("operator", "fleet", "app", "service"):
        # a key of no person: its kind alone
        assert (missing(_holder(kind), permission) is None) == (kind in kinds), (what, kind)
    for kind in ("app", "operator"):  # the kinds a person holds
        for role in ROLES:
            allowed = missing(_holder(kind, role), permission) is None
            assert allowed == (kind in kinds and roles[role]), (what, kind, role)


@pytest.mark.parametrize("permission", sorted(PERMISSIONS))
def test_a_disabled_person_is_refused_everywhere(permission: str) -> None:
    for kind in ("app", "operator"):
        lack = missing(_holder(kind, "owner", disabled=True), permission)
        assert lack is not None
        if kind in PERMISSIONS[permission].kinds:
            assert "disabled" in lack


def test_a_viewer_changes_nothing() -> None:
    changes = {perm for (method, _), perm in ROUTES.items() if method not in ("GET", "WS")}
    changes |= {VERBS["fleet-cordon"]}
    changes -= {"open", "signed:livekit", "signed:meta", "calls:follow"}  # a log token is a read
    for permission in changes:
        for kind in ("app", "operator"):
            assert missing(_holder(kind, "viewer"), permission) is not None, permission


def test_without_production_a_person_is_refused_production_and_allowed_the_sandbox() -> None:
    person = _holder("app", "owner", production=False)
    production = Target(environment="production")
    for permission in ("agents:read", "agents:write", "numbers:read", "logs:read", "tokens:create"):
        assert (
            missing(person, permission, production)
            == "person 5e1f0a2b3c4d has no production access"
        )
        assert missing(person, permission, Target(environment="sandbox")) is None
    staff = _holder("operator", "admin", production=False)
    assert missing(staff, "ops:read") == "person 5e1f0a2b3c4d has no production access"
    assert missing(staff, "ops:read", Target(environment="sandbox")) is None


def test_a_person_acts_only_for_their_org_and_their_agents() -> None:
    person = _holder("app", "developer", agents=["booking"])
    assert missing(person, "agents:write", Target(org="org_acme", agent="booking")) is None
    assert missing(person, "agents:write", Target(agent="sales")) == (
        "person 5e1f0a2b3c4d may not touch agent sales"
    )
    assert missing(person, "agents:write", Target(org="org_other")) == (
        "person 5e1f0a2b3c4d is of org_acme, not of org_other"
    )
    staff = _holder("operator", "viewer")
    assert missing(staff, "agents:list", Target(org="org_other")) is None


def test_an_operator_key_is_an_operator_persons_only() -> None:
    assert missing(_holder("operator", "owner", operator=False), "ops:read") == (
        "person 5e1f0a2b3c4d is not an operator: an operator key needs one"
    )
