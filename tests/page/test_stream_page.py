"""A call's log followed in a real browser (``examples/page``, ``EventSource`` on the log token)
misses and repeats nothing across call-log replicas SIGKILLed under it (issue 17, acceptance 6).

Three replicas as processes behind a relay (a load balancer: it answers 503 while its upstream
refuses). The first dies once the balancer has moved on: the browser reconnects on its own with
``Last-Event-ID``. The second dies with the balancer still on it: the browser's reconnection gets
a 503 and gives up, and the page rebuilds its ``EventSource`` with ``?last_event_id=``. The page
records every seq its ``EventSource`` handed it, repeats included, so the test reads what the
browser got, not what the page chose to show.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlencode

import httpx
import pytest
from playwright.async_api import Page

from pinecall_testkit.call_log import Keys, batch, bearer, opening, replica_env, served
from pinecall_testkit.relay import Relay

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]

CALL = "call_page_stream"


async def seen_through(page: Page, seq: int) -> None:
    """Return once the page's EventSource has handed it ``seq``."""
    await page.wait_for_function(f"window.pinecall.seen.includes({seq})", timeout=30_000)


async def test_a_stream_followed_in_the_browser_misses_and_repeats_nothing_across_kills(
    page: Page,
    page_url: str,
    keys: Keys,
    module_database_url: str,
    nats_url: str,
    module_nats_namespace: str,
    artifacts: Path,
) -> None:
    env = replica_env(module_database_url, nats_url, module_nats_namespace)
    auth = bearer(keys.production)
    entries = f"/v1/calls/{CALL}/entries"
    async with (
        served(env, count=3) as (a, b, c),
        Relay.before(a.url) as balancer,
        httpx.AsyncClient(timeout=30) as http,
    ):
        opened = await http.post(f"{a.url}/v1/calls", json=opening(CALL), headers=auth)
        assert opened.status_code == 200, opened.text
        await http.post(f"{a.url}{entries}", json=batch(0, 3), headers=auth)  # seqs 2-4
        minted = await http.post(f"{a.url}/v1/calls/{CALL}/log-token", headers=bearer(keys.app))
        address = {"call_log": balancer.http_url, "call": CALL, "log_token": minted.json()["token"]}
        await page.goto(f"{page_url}?{urlencode(address)}")
        await seen_through(page, 4)

        # a dies; the balancer already sends new connections to b
        balancer.point(b.url)
        a.kill()
        await a.proc.wait()
        await http.post(f"{b.url}{entries}", json=batch(3, 3), headers=auth)  # seqs 5-7
        await seen_through(page, 7)
        states = await page.evaluate("window.pinecall.states")
        assert "reconnecting" in states
        assert "rebuilding" not in states  # the browser's own reconnection, Last-Event-ID

        # b dies with the balancer still on it: 503, the EventSource closes, the page rebuilds
        b.kill()
        await b.proc.wait()
        await page.wait_for_function("window.pinecall.states.includes('rebuilding')")
        await http.post(f"{c.url}{entries}", json=batch(6, 2), headers=auth)  # seqs 8-9
        balancer.point(c.url)
        await http.post(
            f"{c.url}/v1/calls/{CALL}/seal", json={"outcome": "completed"}, headers=auth
        )
        await page.wait_for_function("window.pinecall.states.at(-1) === 'sealed'", timeout=30_000)
        await page.screenshot(path=artifacts / "stream-across-kills.png", full_page=True)

        seen = await page.evaluate("window.pinecall.seen")
        assert seen == list(range(1, 12))  # opened, 7 entries, ended, sealed: each once
        shown = await page.locator("#log-entries li").count()
        assert shown == 11
