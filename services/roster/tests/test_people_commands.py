"""``pinecall-runtime orgs …``, ``persons …`` and ``keys create --person`` as an operator runs
them: over NATS against a live roster replica (issue 21), each bad input a named error."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest

from pinecall_servicekit.keys import KEY_PATTERN
from pinecall_servicekit.lifecycle import ExitCode
from pinecall_testkit.roster import Keys, Replica


async def cli(*args: str, env: dict[str, str]) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "pinecall_runtime", *args, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await proc.communicate()
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


@pytest.fixture
def env(
    database_url: str, nats_url: str, nats_namespace: str, keys: Keys, tmp_path: Path
) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("PINECALL_")}
    return base | {
        "PINECALL_DATABASE_URL": database_url,
        "PINECALL_NATS_URL": nats_url,
        "PINECALL_NATS_NAMESPACE": nats_namespace,
        "PINECALL_OPERATOR_KEY": keys.operator,
        "PINECALL_STATE_DIR": str(tmp_path),
    }


async def test_orgs_persons_and_a_persons_key(roster: Replica, env: dict[str, str]) -> None:
    code, out, err = await cli("orgs", "create", "org_acme", "--environment", "production",
                               "--quota", "concurrent_calls=5", env=env)  # fmt: skip
    assert (code, out) == (0, "org_acme: made (production)\n"), err
    code, out, err = await cli("orgs", "list", "--json", env=env)
    assert code == 0, err
    assert json.loads(out)["orgs"][0]["quotas"] == {"concurrent_calls": 5}
    code, out, err = await cli("persons", "create", "--org", "org_acme", "--name", "ada",
                               "--role", "developer", "--agents", "booking", "--production",
                               env=env)  # fmt: skip
    assert code == 0, err
    person = out.strip()
    code, out, err = await cli("persons", "list", "--org", "org_acme", "--json", env=env)
    listed = json.loads(out)["persons"]
    assert [(p["id"], p["agents"], p["production"]) for p in listed] == [
        (person, ["booking"], True)
    ]
    code, out, err = await cli("keys", "create", "--kind", "app", "--name", "ada's",
                               "--environment", "production", "--person", person, env=env)  # fmt: skip
    assert code == 0, err
    assert KEY_PATTERN.match(out.strip())
    code, out, err = await cli("keys", "list", "--json", env=env)
    assert [k["person"] for k in json.loads(out) if k["name"] == "ada's"] == [person]
    code, out, err = await cli("persons", "set", person, "--disabled", env=env)
    assert (code, out) == (0, f"{person}: disabled\n"), err
    code, out, err = await cli("keys", "create", "--kind", "app", "--name", "ada's second",
                               "--environment", "production", "--person", person, env=env)  # fmt: skip
    assert (code, out) == (ExitCode.FAILED, ""), err
    assert f"[unprocessable] person {person} is disabled: no new key" in err
    code, out, err = await cli("persons", "set", person, "--enabled", "--role", "viewer",
                               "--all-agents", env=env)  # fmt: skip
    assert (code, out) == (0, f"{person}: viewer\n"), err


@pytest.mark.parametrize(
    ("args", "code", "words"),
    [
        (("orgs", "create", "org_acme", "--environment", "production", "--quota", "five"),
         ExitCode.USAGE, "is not NAME=COUNT"),
        (("orgs", "create", "org_acme", "--environment", "production", "--quota", "calls=5"),
         ExitCode.USAGE, "no quota 'calls': it is concurrent_calls"),
        (("keys", "create", "--kind", "app", "--name", "n", "--person", "5e1f0a2b3c4d"),
         ExitCode.USAGE, "--kind app needs --environment (production or sandbox)"),
        (("keys", "create", "--kind", "fleet", "--name", "n"),
         ExitCode.USAGE, "--kind fleet needs --environment (production or sandbox)"),
        (("orgs", "create", "org acme!", "--environment", "production"),
         ExitCode.USAGE, "Invalid value for NAME"),
        (("persons", "create", "--org", "o", "--name", "n", "--role", "boss"),
         ExitCode.USAGE, "'boss' is not one of"),
        (("persons", "create", "--org", "o", "--name", "n", "--role", "viewer", "--agents", "Bad!"),
         ExitCode.USAGE, "not an agent's name: 'Bad!'"),
        (("persons", "set", "5e1f0a2b3c4d"), ExitCode.USAGE, "nothing to change"),
        (("persons", "set", "5e1f0a2b3c4d", "--agents", "a", "--all-agents"),
         ExitCode.USAGE, "not both"),
        (("persons", "set", "nope", "--disabled"), ExitCode.USAGE, "Invalid value for PERSON"),
        (("persons", "set", "5e1f0a2b3c4d", "--disabled"), ExitCode.NOT_FOUND,
         "[not_found] no person 5e1f0a2b3c4d"),
        (("persons", "create", "--org", "org_none", "--name", "n", "--role", "viewer"),
         ExitCode.NOT_FOUND, "[not_found] no org org_none"),
    ],
)  # fmt: skip
async def test_a_bad_people_command_is_a_named_error(
    roster: Replica, env: dict[str, str], args: tuple[str, ...], code: int, words: str
) -> None:
    result, out, err = await cli(*args, env=env)
    assert result == code, (out, err)
    assert words in err
