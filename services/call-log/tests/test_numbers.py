"""WhatsApp numbers (issue 17, "WhatsApp"): tied to an org's agent in one environment; put, read
and listed like agents; no read answers a secret; the chat service alone reads them (its service
key); every refusal is a problem detail and writes nothing (acceptance 7)."""

from __future__ import annotations

from typing import Any

import pytest

from pinecall_testkit.call_log import Keys, Replica, bearer

PROBLEM = "application/problem+json"
NUMBER = "/v1/whatsapp/numbers/106540352242922"
ACME = {"org": "org_acme"}
SECRETS = ("lab-verify-token", "lab-app-secret-1", "lab-access-token-1")


def body(**changes: Any) -> dict[str, Any]:
    verify, app, access = SECRETS
    put = {"agent": "booking", "display_phone_number": "15550783881", "verify_token": verify,
           "app_secret": app, "access_token": access}  # fmt: skip
    return put | changes


@pytest.fixture
async def agent(call_log: Replica, keys: Keys) -> None:
    """``booking`` of org_acme, in production and in sandbox."""
    for key in (keys.app, keys.app_sandbox):
        definition = {"name": "booking", "prompt": "You book tables."}
        put = await call_log.put(
            "/v1/agents/booking", json=definition, params=ACME, headers=bearer(key)
        )
        assert put.status_code == 200, put.text


def _no_secret(answer: Any) -> None:
    said = str(answer)
    assert not any(secret in said for secret in SECRETS), said


async def test_a_number_is_put_read_and_listed_without_its_secrets(
    call_log: Replica, keys: Keys, agent: None
) -> None:
    app = bearer(keys.app)
    put = await call_log.put(NUMBER, json=body(), params=ACME, headers=app)
    assert put.status_code == 200, put.text
    stored = put.json()
    assert stored == {
        "type": "whatsapp.number.v1", "phone_number_id": "106540352242922", "org": "org_acme",
        "environment": "production", "agent": "booking",
        "display_phone_number": "15550783881", "updated_at": stored["updated_at"],
    }  # fmt: skip
    got = await call_log.get(NUMBER, params=ACME, headers=app)
    assert got.json() == stored
    listed = await call_log.get("/v1/whatsapp/numbers", params=ACME, headers=app)
    assert listed.json()["numbers"] == [stored]
    operator = await call_log.get(
        NUMBER, params=ACME | {"environment": "production"}, headers=bearer(keys.operator)
    )
    assert operator.json() == stored
    for answer in (put.json(), got.json(), listed.json(), operator.json()):
        _no_secret(answer)
    again = await call_log.put(NUMBER, json=body(), params=ACME, headers=app)
    assert again.json()["updated_at"] == stored["updated_at"]  # the same put writes nothing


async def test_the_service_key_reads_the_secrets_and_finds_a_verify_token(
    call_log: Replica, keys: Keys, agent: None
) -> None:
    await call_log.put(NUMBER, json=body(), params=ACME, headers=bearer(keys.app))
    service = bearer(keys.service)
    secrets = await call_log.get(f"{NUMBER}/secrets", headers=service)
    assert secrets.status_code == 200, secrets.text
    said = secrets.json()
    assert (said["app_secret"], said["access_token"]) == SECRETS[1:]
    assert said["number"]["agent"] == "booking"
    found = await call_log.post(
        "/v1/whatsapp/verify", json={"verify_token": SECRETS[0]}, headers=service
    )
    assert found.json()["phone_number_id"] == "106540352242922"
    wrong = await call_log.post(
        "/v1/whatsapp/verify", json={"verify_token": "forged-token"}, headers=service
    )
    assert wrong.status_code == 404
    for key in (keys.app, keys.operator, keys.production):
        refused = await call_log.get(f"{NUMBER}/secrets", headers=bearer(key))
        assert refused.status_code == 403
        _no_secret(refused.json())


async def test_a_put_moves_the_number_to_another_agent_and_changes_its_secrets(
    call_log: Replica, keys: Keys, agent: None
) -> None:
    app = bearer(keys.app)
    await call_log.put("/v1/agents/concierge", json={"name": "concierge", "prompt": "Help."},
                       params=ACME, headers=app)  # fmt: skip
    await call_log.put(NUMBER, json=body(), params=ACME, headers=app)
    moved = await call_log.put(
        NUMBER, json=body(agent="concierge", app_secret="another-secret"), params=ACME,
        headers=app,
    )  # fmt: skip
    assert moved.json()["agent"] == "concierge"
    secrets = (await call_log.get(f"{NUMBER}/secrets", headers=bearer(keys.service))).json()
    assert secrets["app_secret"] == "another-secret"


async def test_a_number_of_another_org_or_environment_is_409_and_404(
    call_log: Replica, keys: Keys, agent: None
) -> None:
    await call_log.put(NUMBER, json=body(), params=ACME, headers=bearer(keys.app))
    other = {"org": "org_other"}
    await call_log.put("/v1/agents/booking", json={"name": "booking", "prompt": "x"},
                       params=other, headers=bearer(keys.app))  # fmt: skip
    taken = await call_log.put(NUMBER, json=body(app_secret="stolen-secret"), params=other,
                               headers=bearer(keys.app))  # fmt: skip
    assert (taken.status_code, taken.headers["content-type"]) == (409, PROBLEM)
    sandbox = await call_log.put(NUMBER, json=body(), params=ACME, headers=bearer(keys.app_sandbox))
    assert sandbox.status_code == 409
    assert (await call_log.get(NUMBER, params=other, headers=bearer(keys.app))).status_code == 404
    no_such = await call_log.get("/v1/whatsapp/numbers/999", params=ACME, headers=bearer(keys.app))
    assert no_such.status_code == 404
    secrets = (await call_log.get(f"{NUMBER}/secrets", headers=bearer(keys.service))).json()
    assert (secrets["number"]["org"], secrets["app_secret"]) == ("org_acme", SECRETS[1])


@pytest.mark.parametrize(
    ("path", "params", "sent", "status"),
    [
        (NUMBER, ACME, body(agent="nobody"), 422),  # no such agent
        (NUMBER, {}, body(), 422),  # no org
        (NUMBER, ACME, body(verify_token="short"), 400),
        (NUMBER, ACME, body(app_secret="has a space"), 400),
        (NUMBER, ACME, body(display_phone_number="+1 555"), 422),  # 4 digits
        (NUMBER, ACME, body(display_phone_number="call me"), 400),
        (NUMBER, ACME, {"agent": "booking"}, 400),  # no secrets
        (NUMBER, ACME, "not json", 400),
        ("/v1/whatsapp/numbers/not-digits", ACME, body(), 400),
        (NUMBER, ACME | {"environment": "sandbox"}, body(), 403),  # another environment's
    ],
)
async def test_bad_input_is_a_problem_and_writes_nothing(
    call_log: Replica, keys: Keys, agent: None, path: str, params: dict[str, str], sent: Any,
    status: int,
) -> None:  # fmt: skip
    app = bearer(keys.app)
    kwargs: dict[str, Any] = {"content": sent} if isinstance(sent, str) else {"json": sent}
    refused = await call_log.put(path, params=params, headers=app, **kwargs)
    assert (refused.status_code, refused.headers["content-type"]) == (status, PROBLEM), refused.text
    listed = await call_log.get("/v1/whatsapp/numbers", params=ACME, headers=app)
    assert listed.json()["numbers"] == []


async def test_a_display_number_is_taken_as_meta_shows_it_and_a_refusal_says_what_is_expected(
    call_log: Replica, keys: Keys, agent: None
) -> None:
    """E.164 as Meta's WhatsApp Manager shows it is kept as its digits; a value refused says
    what is expected in words, never as the regex it failed."""
    app = bearer(keys.app)
    for given in ("+15550783881", "+1 555-078-3881", "+1 (555) 078.3881"):
        put = await call_log.put(NUMBER, json=body(display_phone_number=given), params=ACME,
                                 headers=app)  # fmt: skip
        assert put.status_code == 200, put.text
        assert put.json()["display_phone_number"] == "15550783881"
    for sent, said in (
        (body(display_phone_number="call me"), "E.164, like +15551234567"),
        (body(display_phone_number="+1 555"), "E.164, like +15551234567"),
        (body(verify_token="short"), "at least 8 characters - at `$.verify_token`"),
        (body(app_secret="has a space"), "printable ASCII with no spaces"),
    ):
        refused = await call_log.put(NUMBER, json=sent, params=ACME, headers=app)
        problem = refused.json()
        assert said in problem["detail"], problem
        assert "regex" not in refused.text, problem
        assert "[0-9]" not in refused.text, problem


async def test_keys_that_may_not_are_refused(call_log: Replica, keys: Keys, agent: None) -> None:
    for key, status in ((keys.production, 403), (keys.service, 403), ("pck_nonsense", 401)):
        put = await call_log.put(NUMBER, json=body(), params=ACME, headers=bearer(key))
        assert (put.status_code, put.headers["content-type"]) == (status, PROBLEM)
    refused = await call_log.post("/v1/whatsapp/verify", json={"verify_token": SECRETS[0]},
                                  headers=bearer(keys.app))  # fmt: skip
    assert refused.status_code == 403
    bad = await call_log.post("/v1/whatsapp/verify", json={"verify_token": 5},
                              headers=bearer(keys.service))  # fmt: skip
    assert bad.status_code == 400


async def test_a_whatsapp_messages_agent_entries_are_written_once_per_message(
    call_log: Replica, keys: Keys
) -> None:
    """Meta delivers a message again for days; two chat replicas may take one at once: each of
    ``message.waiting``, ``message.taken`` and ``message.expired`` is written once per wamid."""
    service, path = bearer(keys.service), "/v1/agents/booking/log"
    params = {"environment": "production"}
    seqs = []
    for kind, data in (
        ("message.waiting", {"message": "wamid.A", "text": "hi"}),
        ("message.waiting", {"message": "wamid.A", "text": "hi"}),
        ("message.waiting", {"message": "wamid.B", "text": "and"}),
        ("message.taken", {"message": "wamid.A", "call": "wa:1:2:1"}),
        ("message.taken", {"message": "wamid.A", "call": "wa:1:2:1"}),
        ("message.expired", {"message": "wamid.B", "why": "window_closed"}),
        ("fleet.full", {"message": "wamid.A"}),  # another kind: not once per message
        ("fleet.full", {"message": "wamid.A"}),
    ):
        said = await call_log.post(path, json={"kind": kind, "data": data}, params=params,
                                   headers=service)  # fmt: skip
        assert said.status_code == 200, said.text
        seqs.append(said.json()["seq"])
    assert seqs[0] == seqs[1]
    assert seqs[3] == seqs[4]
    assert seqs[6] != seqs[7]
    logged = (await call_log.get(path, params=params, headers=bearer(keys.operator))).json()
    logged = logged["entries"]
    assert [e["kind"] for e in logged] == [
        "message.waiting", "message.waiting", "message.taken", "message.expired", "fleet.full",
        "fleet.full",
    ]  # fmt: skip
