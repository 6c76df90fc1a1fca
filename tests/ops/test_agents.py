"""``pinecall-runtime agents put|list|show`` as an operator runs them, against a call-log served
as a real process: versions, idempotent puts, an app key instead of the operator's, and each
failure a named error with its exit code (issue 16, "Agents, as data"). One process serves the
module (its start is most of a test's time); each test acts for an org of its own."""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
import yaml

from pinecall_servicekit.lifecycle import ExitCode
from pinecall_servicekit.platform import Endpoints, free_port
from pinecall_testkit.call_log import Keys, Process, make_keys, one_served

pytestmark = pytest.mark.asyncio(loop_scope="module")

DEFINITION = """\
name: support-bot
prompt: |
  You answer the phone for Acme's bistro.
  Be brief.
greeting: Acme's bistro, how can I help?
voice: sonic-english-female
model: claude-sonnet-4-5
tools:
  - name: book_slot
    description: Book a table.
    parameters:
      type: object
      properties:
        day: {type: string}
      required: [day]
    timeout_s: 8
max_call_seconds: 900
"""


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def served(
    module_database_url: str, platform_endpoints: Endpoints, module_nats_namespace: str
) -> AsyncIterator[Process]:
    url, namespace = platform_endpoints.nats_url, module_nats_namespace
    async with one_served(module_database_url, url, namespace) as replica:
        yield replica


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def keys(module_database_url: str) -> Keys:
    return await make_keys(module_database_url)


@pytest.fixture
def acme() -> tuple[str, str]:
    """``--org ORG``: an org of this test's own (the module's tests share one call-log)."""
    return ("--org", f"org_{secrets.token_hex(4)}")


@pytest.fixture
def env(served: Process, keys: Keys, tmp_path: Path) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("PINECALL_")}
    return base | {
        "PINECALL_OPERATOR_KEY": keys.operator,
        "PINECALL_CALL_LOG_URL": served.url,
        "PINECALL_STATE_DIR": str(tmp_path / "no-up"),
    }


async def cli(env: dict[str, str], *args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "pinecall_runtime", "agents", *args,
        env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    async with asyncio.timeout(120):
        out, err = await proc.communicate()
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_put_list_and_show_versions_of_an_agent(
    env: dict[str, str], tmp_path: Path, acme: tuple[str, str]
) -> None:
    file = tmp_path / "support-bot.yaml"
    file.write_text(DEFINITION)
    code, out, err = await cli(env, "put", str(file), *acme)
    assert code == ExitCode.OK, err
    assert out.startswith(f"support-bot ({acme[1]}, production): version 1, prompt sha256 ")
    code, out, _ = await cli(env, "put", str(file), *acme)  # the same: nothing stored
    assert "version 1" in out

    changed = yaml.safe_load(DEFINITION) | {"voice": "alloy"}
    as_json = tmp_path / "support-bot.json"
    as_json.write_text(json.dumps(changed))
    code, out, _ = await cli(env, "put", str(as_json), *acme, "--json")
    assert (code, json.loads(out)["version"]) == (ExitCode.OK, 2)

    code, out, _ = await cli(env, "list", *acme)
    assert code == ExitCode.OK
    lines = out.splitlines()
    assert lines[0] == f"{acme[1]} (production): 1 agents"
    assert lines[2].split()[:5] == ["support-bot", "2", "claude-sonnet-4-5", "alloy", "book_slot"]

    code, shown, _ = await cli(env, "show", "support-bot", *acme)
    assert code == ExitCode.OK
    assert shown.startswith(f"# support-bot: version 2 of {acme[1]} in production, ")
    assert yaml.safe_load(shown) == changed | {
        "greeting": changed["greeting"],
        "language": "en",
        "record": False,
    }
    code, older, _ = await cli(env, "show", "support-bot", "--version", "1", *acme, "--json")
    assert json.loads(older)["definition"]["voice"] == "sonic-english-female"

    # what show prints, put back, is the version that stands
    again = tmp_path / "shown.yaml"
    again.write_text(shown)
    code, out, _ = await cli(env, "put", str(again), *acme)
    assert (code, "version 2" in out) == (ExitCode.OK, True)


async def test_an_app_key_acts_in_its_own_environment(
    env: dict[str, str], keys: Keys, tmp_path: Path, acme: tuple[str, str]
) -> None:
    file = tmp_path / "a.yaml"
    file.write_text(DEFINITION)
    code, out, err = await cli(env, "put", str(file), *acme, "--key", keys.app_sandbox)
    assert code == ExitCode.OK, err
    assert f"({acme[1]}, sandbox): version 1" in out
    _, listed, _ = await cli(env, "list", *acme, "--environment", "sandbox", "--json")
    assert [a["version"] for a in json.loads(listed)["agents"]] == [1]
    _, production, _ = await cli(env, "list", *acme, "--json")
    assert json.loads(production)["agents"] == []
    code, _, err = await cli(env, "list", *acme, "--key", keys.production)  # a fleet key
    assert (code, err.startswith("Error: [forbidden] ")) == (ExitCode.FAILED, True)


async def test_call_log_found_through_up_json(
    env: dict[str, str], tmp_path: Path, acme: tuple[str, str]
) -> None:
    """With no PINECALL_CALL_LOG_URL, the URL and the operator key are the running up's."""
    state = tmp_path / "state"
    state.mkdir()
    up = {
        "database_url": "postgresql://postgres@127.0.0.1:5432/test",
        "nats_url": "nats://127.0.0.1:4222",
        "operator_key": env["PINECALL_OPERATOR_KEY"],
        "urls": {"call-log": env["PINECALL_CALL_LOG_URL"]},
    }
    (state / "up.json").write_text(json.dumps(up))
    bare = {
        k: v for k, v in env.items() if k not in {"PINECALL_CALL_LOG_URL", "PINECALL_OPERATOR_KEY"}
    }
    code, out, err = await cli(bare | {"PINECALL_STATE_DIR": str(state)}, "list", *acme)
    assert (code, out.splitlines()[0]) == (ExitCode.OK, f"{acme[1]} (production): 0 agents"), err


@pytest.mark.parametrize(
    ("file_text", "code", "said"),
    [
        (DEFINITION.replace("timeout_s: 8", "timeout_s: 500"), ExitCode.FAILED, "[unprocessable]"),
        (
            DEFINITION.replace("max_call", "  - name: book_slot\nmax_call"),
            ExitCode.FAILED,
            "$.tools[1].name",
        ),
        ("name: support-bot\n", ExitCode.FAILED, "[bad_request]"),
        ("- a list\n", ExitCode.FAILED, "[bad_request]"),
        ("name: [unclosed\n", ExitCode.FAILED, "[bad_request]"),
        (  # a probe's typos were stored as the defaults without a word
            DEFINITION.replace("max_call_seconds", "max_call_second").replace(
                "timeout_s", "timeout"
            ),
            ExitCode.FAILED,
            "max_call_second: no such field (not max_call_seconds?)",
        ),
    ],
    ids=["tool timeout", "duplicate tool", "no prompt", "not a mapping", "not YAML", "typo"],
)
async def test_a_definition_refused_is_a_named_error_and_stores_nothing(
    env: dict[str, str], tmp_path: Path, acme: tuple[str, str], file_text: str, code: int, said: str
) -> None:
    file = tmp_path / "bad.yaml"
    file.write_text(file_text)
    exit_code, _, err = await cli(env, "put", str(file), *acme)
    assert (exit_code, said in err) == (code, True), err
    _, listed, _ = await cli(env, "list", *acme, "--json")
    assert json.loads(listed)["agents"] == []


async def test_an_unknown_agent_nobody_answering_and_no_key_are_named(
    env: dict[str, str], acme: tuple[str, str]
) -> None:
    code, _, err = await cli(env, "show", "nobody", *acme)
    assert (code, err.startswith(f"Error: [not_found] no agent nobody of {acme[1]}")) == (
        ExitCode.NOT_FOUND,
        True,
    ), err
    code, _, err = await cli(env, "show", "nobody", "--version", "0", *acme)
    assert code == ExitCode.USAGE
    silent = env | {"PINECALL_CALL_LOG_URL": f"http://127.0.0.1:{free_port()}"}
    code, _, err = await cli(silent, "list", *acme)
    assert (code, "[unavailable] call-log did not answer" in err) == (ExitCode.UNAVAILABLE, True)
    assert "PINECALL_CALL_LOG_URL from the environment" in err
    # not a URL at all: a setting that cannot be (78), not nine retries and "did not answer"
    code, _, err = await cli(env | {"PINECALL_CALL_LOG_URL": "notaurl"}, "list", *acme)
    assert (code, "[settings]" in err, "call_log_url" in err) == (ExitCode.CONFIG, True, True)
    keyless = {k: v for k, v in env.items() if k != "PINECALL_OPERATOR_KEY"}
    code, _, err = await cli(keyless, "list", *acme)
    assert (code, "[unauthorized] no operator key" in err) == (ExitCode.FAILED, True)
    code, _, err = await cli(env, "list")
    assert (code, "--org" in err) == (ExitCode.USAGE, True)


NOWHERE = ("--org", "org_acme")


@pytest.mark.parametrize(
    "args",
    [
        ("show", "bad\nname", *NOWHERE),
        ("show", "../../v1/calls", *NOWHERE),
        ("show", "", *NOWHERE),
        ("show", "a?b", *NOWHERE),
        ("list", "--org", "org\nacme"),
        ("list", *NOWHERE, "--key", ""),
        ("list", *NOWHERE, "--key", "pk_a\nb"),
    ],
    ids=[
        "newline",
        "a path",
        "empty",
        "a query",
        "an org with a newline",
        "no key",
        "a key with a newline",
    ],
)
async def test_a_name_or_org_that_is_none_is_a_usage_error_sent_nowhere(
    env: dict[str, str], args: tuple[str, ...]
) -> None:
    """A probe's ``agents show ../../v1/calls`` read call-log's calls list with the operator key
    and died in a traceback: names and orgs are checked against their grammar first."""
    code, out, err = await cli(env, *args)
    assert code == ExitCode.USAGE, (out, err)
    assert "is not an" in err
    assert "Traceback" not in err
