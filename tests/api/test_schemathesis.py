"""schemathesis, all of its checks, against every HTTP service's OpenAPI (issue 21, acceptance 3).

Each service is served for real (its app's lifespan on the test's Postgres and NATS, on a loopback
port by Granian's embedded server, :func:`pinecall_testkit.call_log.listening`), beside what it
reaches (call-log, a dispatcher, the LiveKit stand-in). ``st run`` (schemathesis's CLI, in a
process of its own, so the services keep this loop) loads the schema the service serves
(``/schema/openapi.json``) and runs every phase (examples, coverage, fuzzing, stateful) with every
check, a bounded number of cases an operation and a fixed seed (a run is reproducible: the same
cases each time). Each operation is called with a real key of a kind its permission takes (the
one registry, :data:`pinecall_servicekit.registry.ROUTES`: an operator's where it may, else an
app's, a fleet's, a service's; none for the open and signed routes). A failure is a defect of the
service or of its schema: the run must find none.

What a check cannot apply to is in :data:`OPERATIONS`, each with why.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from pinecall_loadlab.livekit.testing import *  # noqa: F403  (the stand-in's fixtures)
from pinecall_loadlab.livekit.testing import API_KEY, API_SECRET, StandIn
from pinecall_servicekit.policy import PERMISSIONS
from pinecall_servicekit.registry import ROUTES
from pinecall_testkit.appsocket import call_log_settings
from pinecall_testkit.call_log import Keys, Listening, listening, make_keys
from pinecall_testkit.dispatcher import dispatcher_app
from pinecall_testkit.webhook_ingest import SANDBOX_KEY, SANDBOX_SECRET

pytestmark = pytest.mark.e2e

MAX_EXAMPLES = 10
"""Cases an operation, at most, in each of the fuzzing and stateful phases (the examples and
coverage phases make as many as the schema gives)."""
SEED = 21
"""The run's seed: the same cases every run (a failure is found again, never by chance)."""

ACCEPTED = ("2xx", "3xx", "401", "403", "404", "409", "429")
"""What positive_data_acceptance takes as a request accepted (schemathesis's own default)."""


@dataclass(frozen=True)
class Operation:
    """What the run is told of one operation, beyond its key (:func:`key_for`)."""

    accepted: tuple[str, ...] = ()
    """Statuses positive_data_acceptance takes as right besides :data:`ACCEPTED`, where the
    service answers a request its schema allows by what it holds (a definition, a worker), which
    no schema says."""
    parameters: Mapping[str, object] = field(default_factory=dict)
    """Parameters given one value (``query.<name>``, ``body.<field>``), where the generated one
    would only wait."""
    excluded: Mapping[str, str] = field(default_factory=dict)
    """{check: why it cannot apply to this operation}."""


OPERATIONS: dict[tuple[str, str], Operation] = {
    # a heartbeat's load is its active ÷ max_jobs, and its start not in the future: rules across
    # fields and the clock, which JSON Schema does not say (422 naming the rule); and Litestar's
    # schema drops an optional number's ``minimum: 0`` (load_per_core ≥ 0: 400)
    ("POST", "/v1/fleet/heartbeat"): Operation(accepted=("400", "422")),
    # a prefix naming another fleet than the key's could match no worker of it (422); and
    # Litestar's schema drops an optional parameter's ``minimum: 0`` (most ≥ 0: 400)
    ("GET", "/v1/fleet/wanted"): Operation(accepted=("400", "422")),
    # a call back names the caller's number or contact, one of two optional fields (422)
    ("POST", "/v1/callbacks"): Operation(accepted=("422",)),
    # ending or sealing an open call names its outcome; one ended names none (422 by its state)
    ("POST", "/v1/calls/{call}/end"): Operation(accepted=("422",)),
    ("POST", "/v1/calls/{call}/seal"): Operation(accepted=("422",)),
    # call.ended and the other kinds of the call log's own are never a writer's (422 naming them)
    ("POST", "/v1/calls/{call}/events"): Operation(accepted=("422",)),
    ("POST", "/v1/calls/{call}/entries"): Operation(accepted=("422",)),
    # an agent's definition names the agent it is put under (422 naming both)
    ("PUT", "/v1/agents/{agent}"): Operation(accepted=("422",)),
    # a WhatsApp number's agent must be defined first (422 no such agent)
    ("PUT", "/v1/whatsapp/numbers/{phone_number_id}"): Operation(accepted=("422",)),
    # Meta's notification is read from the raw body (its signature is over the bytes): the
    # route declares no body, and one left out is not Meta's (400)
    ("POST", "/v1/whatsapp/webhook"): Operation(accepted=("400",)),
    # a call's agent must be defined in its environment first (422 unknown_agent)
    ("POST", "/v1/written-calls"): Operation(accepted=("422",)),
    ("POST", "/v1/tokens"): Operation(accepted=("422",)),
    ("POST", "/v1/calls/outbound"): Operation(accepted=("422",)),
    # and Litestar's schema drops the constraints of a list's items (a script's line is 1-300
    # characters, not blank: 400), which the contract (VoiceEval) says
    ("POST", "/v1/evals/voice"): Operation(accepted=("400", "422")),
    # a number is E.164, checked by the dispatcher with a code of its own (422 invalid_number,
    # tests/dispatcher/test_numbers.py), which a pattern in the route would turn into a 400
    ("PUT", "/v1/phone-numbers/{number}"): Operation(accepted=("422",)),
    ("GET", "/v1/phone-numbers/{number}"): Operation(accepted=("422",)),
    ("DELETE", "/v1/phone-numbers/{number}"): Operation(accepted=("422",)),
    # a long poll: it would wait wait_s (up to 25 s) for a command nobody sends here
    ("GET", "/v1/calls/{call}/commands"): Operation(parameters={"query.wait_s": 0}),
    # a tool's call waits timeout_s for the app's answer, which no app gives here
    ("POST", "/v1/calls/{call}/tools"): Operation(parameters={"body.timeout_s": 0.5}),
    ("GET", "/v1/calls/{call}/recording"): Operation(
        excluded={
            "not_a_server_error": "503 unavailable: no recordings' bucket here (tests/recordings "
            "serve it with one); the route says 503 when none is configured"
        }
    ),
}
"""(method, path) → what the run is told of that operation; any other gets :data:`ACCEPTED`
and every check."""

OPERATOR_NAMES = {"environment": "production", "org": "org_acme"}
"""What an operator key names in the query where the route acts in one environment or org (a
person's key carries its own; an operator's, across them, says which: 422 otherwise)."""


class _NoModel:
    """The chat service's model where no chat is held (schemathesis opens no socket)."""

    async def stream(self, *args: object) -> AsyncIterator[str]:
        raise AssertionError("no model is asked in this test")
        yield ""  # pragma: no cover  (an async generator)


@asynccontextmanager
async def _serve(
    service: str, keys: Keys, standin: StandIn, database_url: str, nats_url: str, ns: str
) -> AsyncIterator[str]:
    """``service`` served on a loopback port, with what it reaches; yields its base URL."""

    def http(served: Listening) -> str:
        return served.url.replace("ws://", "http://")

    async with AsyncExitStack() as stack:

        async def serve(app: Any) -> str:
            return http(await stack.enter_async_context(listening(app)))

        from pinecall_call_log.app import create_app as call_log_app

        call_log = await serve(call_log_app(call_log_settings(database_url, nats_url, ns)))
        livekit = f"production={API_KEY}:{API_SECRET},sandbox={SANDBOX_KEY}:{SANDBOX_SECRET}"
        from pinecall_roster.app import create_app as roster_app
        from pinecall_roster.settings import RosterSettings

        roster = roster_app(
            RosterSettings.from_env(
                {},
                database_url=database_url,
                nats_url=nats_url,
                nats_namespace=ns,
                log_format="text",
            )
        )
        if service == "call-log":
            yield call_log
        elif service == "roster":
            yield await serve(roster)
        elif service in ("dispatcher", "chat"):
            await serve(roster)  # the fleets and their LiveKits, said on NATS
            dispatcher = await serve(
                dispatcher_app(
                    database_url,
                    nats_url,
                    ns,
                    call_log_url=call_log,
                    service_key=keys.service,
                )
            )
            if service == "dispatcher":
                yield dispatcher
            else:
                from pinecall_chat.app import create_app as chat_app
                from pinecall_chat.settings import ChatSettings

                settings = ChatSettings.from_env(
                    {}, database_url=database_url, nats_url=nats_url, nats_namespace=ns,
                    call_log_url=call_log, dispatcher_url=dispatcher, service_key=keys.service,
                    fleet_keys=f"production={keys.production},sandbox={keys.sandbox}",
                    chat_token_secret="a chat secret of the test", log_format="text",
                )  # fmt: skip
                yield await serve(chat_app(settings, model=_NoModel()))
        elif service == "webhook-ingest":
            from pinecall_webhook_ingest.app import create_app as ingest_app
            from pinecall_webhook_ingest.settings import IngestSettings

            yield await serve(
                ingest_app(
                    IngestSettings.from_env(
                        {},
                        nats_url=nats_url,
                        nats_namespace=ns,
                        log_format="text",
                        livekit_keys=livekit,
                    )
                )
            )
        elif service == "reaper":
            from pinecall_reaper.app import create_app as reaper_app
            from pinecall_reaper.settings import ReaperSettings

            yield await serve(
                reaper_app(
                    ReaperSettings.from_env(
                        {},
                        database_url=database_url,
                        nats_url=nats_url,
                        nats_namespace=ns,
                        call_log_url=call_log,
                        service_key=keys.service,
                        livekit_url=standin.url,
                        livekit_api_key=API_KEY,
                        livekit_api_secret=API_SECRET,
                        reap_every_s=3600,
                        log_format="text",
                    )
                )
            )
        else:
            raise AssertionError(f"no such service: {service}")


def key_for(method: str, path: str, keys: Keys) -> str | None:
    """A real key of a kind the route's permission takes (an operator's first), or None for a
    route that takes none (open, or signed in a way of its own)."""
    kinds = PERMISSIONS[ROUTES[(method, path)]].kinds
    for kind, key in (
        ("operator", keys.operator),
        ("app", keys.app),
        ("fleet", keys.production),
        ("service", keys.service),
    ):
        if kind in kinds:
            return key
    return None


def _toml(value: object) -> str:
    """``value`` (a string, a bool, a list or a table of them) as TOML: JSON's strings are TOML's
    basic strings."""
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(k)} = {_toml(v)}" for k, v in value.items()) + " }"
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return json.dumps(value)


def config(schema: dict[str, Any], keys: Keys) -> str:
    """schemathesis's configuration of a run against ``schema``: every operation's key, and the
    checks it leaves out (:data:`OPERATIONS`)."""
    lines = [
        "checks.enabled = true",  # every check (a CLI --checks would override the operations')
        # Postgres's text holds no NUL: every service answers one 422 unstorable (their
        # test_bad_input), so a generated NUL only repeats that
        "generation.allow-x00 = false",
        "",
    ]
    for path, item in schema.get("paths", {}).items():
        for verb in item:
            method = verb.upper()
            if method not in ("GET", "PUT", "POST", "DELETE", "PATCH"):
                continue
            said = []
            key = key_for(method, path, keys)
            if key is not None:
                said.append(f"headers = {_toml({'Authorization': f'Bearer {key}'})}")
            operation = OPERATIONS.get((method, path), Operation())
            fixed = dict(operation.parameters)
            if key == keys.operator:
                query = {p["name"] for p in item[verb].get("parameters", []) if p["in"] == "query"}
                fixed |= {f"query.{n}": v for n, v in OPERATOR_NAMES.items() if n in query}
            if fixed:
                said.append(f"parameters = {_toml(fixed)}")
            if operation.accepted:
                statuses = [*ACCEPTED, *operation.accepted]
                said.append(
                    f"checks.positive_data_acceptance.expected-statuses = {_toml(statuses)}"
                )
            for check in operation.excluded:
                said.append(f"checks.{check}.enabled = false")
            if said:  # one filter: include-path and include-method would be either, not both
                lines += [
                    "[[operations]]",
                    f"include-name = {_toml(f'{method} {path}')}",
                    *said,
                    "",
                ]
    return "\n".join(lines)


async def run_schemathesis(url: str, config_text: str, folder: Path) -> dict[str, Any]:
    """``st run`` against the service at ``url`` with every check; its JSON report."""
    import asyncio

    (folder / "schemathesis.toml").write_text(config_text)
    report = folder / "report.json"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "schemathesis.cli", "--no-color",
        "--config-file", str(folder / "schemathesis.toml"),
        "run", f"{url}/schema/openapi.json",
        "--max-examples", str(MAX_EXAMPLES), "--seed", str(SEED),
        "--workers", "1", "--request-timeout", "10", "--output-truncate", "false",
        "--report", "json", "--report-json-path", str(report),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        cwd=folder,  # its cache (.schemathesis/) is the test's
    )  # fmt: skip
    out, _ = await proc.communicate()
    (folder / "output.txt").write_bytes(out)
    found: dict[str, Any] = json.loads(report.read_text())
    found["output"] = out.decode(errors="replace")
    return found


SERVICES = ["roster", "call-log", "dispatcher", "webhook-ingest", "chat", "reaper"]


@pytest.fixture
async def keys(database_url: str) -> Keys:
    return await make_keys(database_url)


@pytest.mark.parametrize("service", SERVICES)
async def test_schemathesis_finds_no_failure(
    service: str,
    keys: Keys,
    standin: StandIn,
    database_url: str,
    nats_url: str,
    nats_namespace: str,
    tmp_path: Path,
) -> None:
    async with _serve(service, keys, standin, database_url, nats_url, nats_namespace) as url:
        async with httpx.AsyncClient() as http:
            schema = (await http.get(f"{url}/schema/openapi.json")).raise_for_status().json()
        report = await run_schemathesis(url, config(schema, keys), tmp_path)
    operations, cases = report["operations"], report["test_cases"]
    print(
        f"{service}: {operations['tested']} operations of {operations['total']}, "
        f"{cases['generated']} cases, {len(report['failures'])} failures"
    )
    assert operations["total"] > 0, f"{service} publishes no operation"
    assert report["errors"] == [], report["output"]
    assert report["failures"] == [], report["output"]
    assert operations["tested"] == operations["total"], report["output"]
    assert report["exit_code"] == 0, report["output"]
