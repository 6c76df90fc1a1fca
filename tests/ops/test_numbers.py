"""``pinecall-runtime numbers put|list|show`` as an operator runs them, against a call-log served
as a real process (issue 17, "WhatsApp": a number tied to an org's agent, REST + CLI like
agents): no command prints a secret; each failure is a named error with its exit code."""

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

from pinecall_runtime.up.services import EXAMPLE
from pinecall_servicekit.lifecycle import ExitCode
from pinecall_servicekit.platform import Endpoints
from pinecall_testkit.call_log import Keys, Process, make_keys, one_served

pytestmark = pytest.mark.asyncio(loop_scope="module")

SECRETS = ("verify-tok-1", "app-secret-1", "access-tok-1")
NUMBER_ID = "106540352240001"
"""This file's own number: not the README's (``106540352242922``), which its README test puts in
another org of the same database — one number is one org's."""
NUMBER = f"""\
phone_number_id: "{NUMBER_ID}"
agent: booking
display_phone_number: "15550783881"
verify_token: {SECRETS[0]}
app_secret: {SECRETS[1]}
access_token: {SECRETS[2]}
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
def env(served: Process, keys: Keys, tmp_path: Path) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("PINECALL_")}
    return base | {
        "PINECALL_OPERATOR_KEY": keys.operator,
        "PINECALL_CALL_LOG_URL": served.url,
        "PINECALL_STATE_DIR": str(tmp_path / "no-up"),
    }


async def cli(env: dict[str, str], *args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "pinecall_runtime", *args,
        env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    async with asyncio.timeout(120):
        out, err = await proc.communicate()
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_put_list_and_show_a_number_without_a_secret(
    env: dict[str, str], tmp_path: Path
) -> None:
    org = ("--org", f"org_{secrets.token_hex(4)}")
    agent = tmp_path / "booking.yaml"
    agent.write_text("name: booking\nprompt: You book tables.\n")
    assert (await cli(env, "agents", "put", str(agent), *org))[0] == 0
    number = tmp_path / "number.yaml"
    number.write_text(NUMBER)
    code, out, err = await cli(env, "numbers", "put", str(number), *org)
    assert code == 0, err
    assert f"{NUMBER_ID} (+15550783881)" in out
    assert "agent booking" in out
    code, listed, _ = await cli(env, "numbers", "list", *org)
    assert code == 0
    assert "1 WhatsApp numbers" in listed
    assert "booking" in listed
    code, shown, _ = await cli(env, "numbers", "show", NUMBER_ID, *org, "--json")
    assert code == 0
    assert json.loads(shown)["agent"] == "booking"
    for said in (out, listed, shown):
        assert not any(s in said for s in SECRETS)


async def test_each_failure_is_named_with_its_exit_code(
    env: dict[str, str], tmp_path: Path
) -> None:
    org = ("--org", f"org_{secrets.token_hex(4)}")
    number = tmp_path / "number.yaml"
    number.write_text(NUMBER)
    code, _, err = await cli(env, "numbers", "put", str(number), *org)  # no agent booking
    assert code == ExitCode.FAILED
    assert "no agent booking" in err
    bad = tmp_path / "bad.yaml"
    bad.write_text(NUMBER.replace("agent:", "agnet:"))
    code, _, err = await cli(env, "numbers", "put", str(bad), *org)
    assert code == ExitCode.FAILED
    assert "agnet" in err
    code, _, err = await cli(env, "numbers", "show", "999", *org)
    assert code == ExitCode.NOT_FOUND
    code, _, err = await cli(env, "numbers", "show", "not-digits", *org)
    assert code == 2


def readme_number() -> str:
    """The README's ``number.yaml``, as a reader copies it."""
    readme = (EXAMPLE.parents[1] / "README.md").read_text()
    block = readme.split("```yaml\n# number.yaml\n", 1)[1]
    return block.split("```", 1)[0]


async def test_the_readmes_number_is_put_as_written_and_a_refusal_says_what_is_expected(
    env: dict[str, str], tmp_path: Path
) -> None:
    """The README's number (its display number in E.164, as Meta shows it) is put as written;
    a verify token too short is refused saying so in words, never as a regex; the help says
    what each field takes."""
    org = ("--org", f"org_{secrets.token_hex(4)}")
    agent = tmp_path / "booking.yaml"
    agent.write_text("name: booking\nprompt: You book tables.\n")
    assert (await cli(env, "agents", "put", str(agent), *org))[0] == 0
    number = tmp_path / "number.yaml"
    number.write_text(readme_number())
    code, out, err = await cli(env, "numbers", "put", str(number), *org)
    assert code == 0, err
    assert "106540352242922 (+15550783881)" in out
    short = tmp_path / "short.yaml"
    short.write_text(readme_number().replace("my-verify-token-1", "short"))
    code, _, err = await cli(env, "numbers", "put", str(short), *org)
    assert code == ExitCode.FAILED
    assert "verify_token" in err
    assert "at least 8 characters" in err
    spelled = tmp_path / "spelled.yaml"
    spelled.write_text(readme_number().replace('"+15550783881"', '"call me"'))
    code, _, err = await cli(env, "numbers", "put", str(spelled), *org)
    assert code == ExitCode.FAILED
    assert "E.164, like +15551234567" in err
    assert "regex" not in err
    code, helped, _ = await cli(env, "numbers", "put", "--help")
    assert code == 0
    assert "8 to 512" in helped
    assert "E.164" in helped
