"""What cannot work is said by name, not retried for ever: a URL that is no app socket, a key that
is not a good app key, an agent the org does not define; ``pinecall start`` says it and exits 78
(issue 16, acceptance 6, from the SDK's side)."""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any, TypeVar

import pytest

from pinecall import AgentOutOfScope, App, BadKey, BadURL, Refused
from pinecall_contracts.appsocket import Close
from pinecall_testkit.call_log import Keys, Listening

from .conftest import APPS

E = TypeVar("E", bound=Exception)


@pytest.mark.parametrize("url", ["ftp://call-log", "ws://", "call-log:8102", "ws://host:port"])
def test_a_url_that_is_no_app_socket_is_refused_at_once(url: str) -> None:
    with pytest.raises(BadURL):
        App(url, "pk_key", org="org_acme")


def test_an_app_needs_a_key_an_org_and_an_instance_of_their_grammar() -> None:
    with pytest.raises(BadKey):
        App("ws://call-log", "", org="org_acme")
    with pytest.raises(ValueError, match="org"):
        App("ws://call-log", "pk_key", org="org acme")
    with pytest.raises(ValueError, match="instance"):
        App("ws://call-log", "pk_key", org="org_acme", instance="-a b")
    app = App("https://call-log.example.com", "pk_key", org="org_acme")
    assert app.url == "wss://call-log.example.com/v1/apps/socket"  # call-log's own URL will do
    with pytest.raises(ValueError, match="not an agent's name"):
        app.agent("Booking Bot")


async def _stopped_by(app: App, kind: type[E]) -> E:
    """What ``app.run()`` raised, of ``kind``."""
    with pytest.raises(kind) as raised:
        async with asyncio.timeout(30):  # a failure bound: a retry for ever would hang here
            await app.run()
    return raised.value


async def test_a_bad_key_a_wrong_path_or_an_agent_out_of_scope_stops_run_by_name(
    replica: Listening, keys: Keys
) -> None:
    for key in ("pk_not-a-key", keys.production):  # not a key; a fleet key
        app = App(replica.url, key, org="org_acme")
        app.agent("booking")
        assert (await _stopped_by(app, BadKey)).close_code == Close.BAD_KEY
    lost = App(replica.url + "/v1/nowhere", keys.app, org="org_acme")
    lost.agent("booking")
    assert "HTTP 403" in (await _stopped_by(lost, BadURL)).message
    ghost = App(replica.url, keys.app, org="org_acme")
    ghost.agent("ghost")
    out = await _stopped_by(ghost, AgentOutOfScope)
    assert isinstance(out, Refused)
    assert "ghost" in out.message


async def test_pinecall_start_with_a_bad_key_says_so_and_exits_78(
    replica: Listening, booking: dict[str, Any]
) -> None:
    env = os.environ | {"HELD_URL": replica.url, "HELD_KEY": "pk_not-a-key"}
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "pinecall", "start", "held:app", "--app-dir", str(APPS),
        env=env, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    async with asyncio.timeout(30):
        _, said = await process.communicate()
    assert process.returncode == 78, said
    assert "Error: [bad_key] the server closed the app socket 4001" in said.decode()


@pytest.mark.parametrize(
    ("env", "args", "code", "said"),
    [
        ({"HELD_URL": "http://127.0.0.1:1", "HELD_KEY": ""}, [], 78, "Error: [bad_key] "),
        ({"HELD_URL": "ftp://example.com", "HELD_KEY": "pk_x"}, [], 78, "Error: [bad_url] "),
        ({"HELD_URL": "http://127.0.0.1:1", "HELD_KEY": "pk_x"}, ["--app-dir", "/nonexistent"],
         2, "'/nonexistent' does not exist"),
        ({"HELD_URL": "http://127.0.0.1:1", "HELD_KEY": "pk_x"}, ["--target", "held:nosuch"],
         2, "held has no nosuch"),
    ],
    ids=["no key", "not a socket URL", "no app dir", "no such attribute"],
)  # fmt: skip
async def test_pinecall_start_says_an_app_that_cannot_be_by_name_before_it_dials(
    env: dict[str, str], args: list[str], code: int, said: str
) -> None:
    """A new user's probe: an ``App`` made as its module is imported (the booking example's way)
    with no key or a URL of another scheme died in a traceback, exit 1; ``--app-dir`` pointing
    nowhere was accepted and the app imported from the current folder; ``held:nosuch`` was said
    to be "no pinecall.App (it is NoneType)"."""
    target = "held:app"
    if args[:1] == ["--target"]:
        target, args = args[1], ["--app-dir", str(APPS)]
    else:
        args = args or ["--app-dir", str(APPS)]
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "pinecall", "start", target, *args,
        env=os.environ | env, stderr=asyncio.subprocess.PIPE, cwd="/",
    )  # fmt: skip
    async with asyncio.timeout(30):
        _, err = await process.communicate()
    assert (process.returncode, said in err.decode()) == (code, True), err.decode()
    assert "Traceback" not in err.decode()
