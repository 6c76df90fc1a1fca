"""Call backs listed for the dispatcher's follow-ups (issue 18, "Call backs, dialled"):
``GET /v1/callbacks?since=`` with a service or operator key, every environment, oldest first,
each with its org (its call's, or the one org defining its agent); bad input is a problem and
changes nothing."""

from __future__ import annotations

import datetime as dt

from pinecall_testkit.call_log import Keys, Replica, bearer, opening

PROBLEM = "application/problem+json"
SINCE = "2020-01-01T00:00:00+00:00"


async def test_call_backs_are_listed_oldest_first_with_their_org(
    call_log: Replica, keys: Keys
) -> None:
    opened = await call_log.post(
        "/v1/calls", json=opening("call_over", org="org_acme"), headers=bearer(keys.production)
    )
    assert opened.status_code == 200, opened.text
    put = await call_log.put(
        "/v1/agents/support-bot",
        params={"org": "org_page"},
        json={"name": "support-bot", "prompt": "You answer."},
        headers=bearer(keys.app_sandbox),
    )
    assert put.status_code == 200, put.text
    asked = [
        (bearer(keys.production), {"number": "+15550100", "call": "call_over", "reason": "full"}),
        (bearer(keys.app_sandbox), {"number": "+15550101", "reason": "a page asked"}),
        (bearer(keys.app), {"contact": "ada@example.com", "reason": "a page asked"}),
    ]
    for headers, body in asked:
        r = await call_log.post(
            "/v1/callbacks", json={"agent": "support-bot"} | body, headers=headers
        )
        assert r.status_code == 200, r.text
    page = await call_log.get(
        "/v1/callbacks", params={"since": SINCE}, headers=bearer(keys.service)
    )
    assert page.status_code == 200, page.text
    listed = page.json()["callbacks"]
    assert [(c["environment"], c.get("number"), c["org"]) for c in listed] == [
        ("production", "+15550100", "org_acme"),  # its call's org
        ("sandbox", "+15550101", "org_page"),  # the one org defining the agent in sandbox
        ("production", None, ""),  # no call, and no org defines it in production
    ]
    assert page.json()["next"] is None
    ids = [c["id"] for c in listed]
    assert ids == sorted(ids)
    # paged: the next page starts at the last one's time (a call back may be listed twice)
    first = (
        await call_log.get(
            "/v1/callbacks", params={"since": SINCE, "limit": 1}, headers=bearer(keys.operator)
        )
    ).json()
    assert [c["id"] for c in first["callbacks"]] == ids[:1]
    assert first["next"] == listed[0]["requested_at"]
    later = dt.datetime.fromisoformat(listed[-1]["requested_at"]) + dt.timedelta(microseconds=1)
    none = await call_log.get(
        "/v1/callbacks", params={"since": later.isoformat()}, headers=bearer(keys.service)
    )
    assert none.json() == {"type": "calls.callback_page.v1", "callbacks": [], "next": None}


async def test_bad_input_and_other_keys_get_a_problem(call_log: Replica, keys: Keys) -> None:
    for key, status in ((keys.production, 403), (keys.app, 403), ("", 401)):
        r = await call_log.get("/v1/callbacks", params={"since": SINCE}, headers=bearer(key))
        assert (r.status_code, r.headers["content-type"]) == (status, PROBLEM), r.text
    for params in (
        {},
        {"since": "yesterday"},
        {"since": "2026-12-03T12:00:00"},  # no offset
        {"since": SINCE, "limit": 0},
        {"since": SINCE, "limit": 1001},
    ):
        r = await call_log.get("/v1/callbacks", params=params, headers=bearer(keys.service))
        assert r.status_code in (400, 422), (params, r.text)
        assert r.headers["content-type"] == PROBLEM
