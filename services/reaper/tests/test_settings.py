"""The reaper's settings and where each environment's LiveKit is: keys as webhook-ingest reads
them; the URL from PINECALL_LIVEKIT_URLS, else the roster's fleets row, else LIVEKIT_URL."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from pinecall_reaper.fleets import Fleets
from pinecall_reaper.settings import LiveKit, ReaperSettings
from pinecall_servicekit.settings import SettingsError
from pinecall_testkit.roster import Keys, Replica, make_keys, replica_on

BOTH = {
    "PINECALL_LIVEKIT_KEYS": "sandbox=SK:SS",
    "LIVEKIT_API_KEY": "PK",
    "LIVEKIT_API_SECRET": "PS",
    "LIVEKIT_URL": "wss://lk.example.test",
    "PINECALL_OPERATOR_KEY": "pck_op",
}


@pytest.fixture
async def roster_keys(database_url: str) -> Keys:
    return await make_keys(database_url)


@pytest.fixture
async def roster(database_url: str, nats_url: str, nats_namespace: str) -> AsyncIterator[Replica]:
    rows = {"livekit_url": "wss://lk-of-the-rows.example.test"}
    async with replica_on(database_url, nats_url, nats_namespace, **rows) as client:
        yield client


async def test_the_url_is_the_settings_then_the_fleets_row_then_livekit_url(
    roster: Replica, roster_keys: Keys
) -> None:
    settings = ReaperSettings.from_env(BOTH | {"PINECALL_OPERATOR_KEY": roster_keys.operator})
    assert settings.check() is settings
    assert (settings.port, settings.reap_every_s, settings.quiet_s, settings.max_call_seconds) == (
        8105,
        60.0,
        300.0,
        1800.0,
    )
    rows = "wss://lk-of-the-rows.example.test"
    assert await Fleets(settings, roster).livekits() == {
        "production": LiveKit(url=rows, api_key="PK", api_secret="PS"),
        "sandbox": LiveKit(url=rows, api_key="SK", api_secret="SS"),
    }
    named = ReaperSettings.from_env(
        BOTH
        | {
            "PINECALL_OPERATOR_KEY": roster_keys.operator,
            "PINECALL_LIVEKIT_URLS": "sandbox=wss://lk-sandbox.example.test",
        }
    )
    fleets = Fleets(named, roster)
    assert {env: lk.url for env, lk in (await fleets.livekits()).items()} == {
        "production": rows,
        "sandbox": "wss://lk-sandbox.example.test",
    }
    # a roster that stops answering: the rows last read stand
    fleets.roster = httpx.AsyncClient(base_url="http://127.0.0.1:9")
    assert (await fleets.livekits())["production"].url == rows
    await fleets.roster.aclose()
    # no roster ever read: LIVEKIT_URL
    alone = Fleets(settings, httpx.AsyncClient(base_url="http://127.0.0.1:9"))
    assert (await alone.livekits())["production"].url == "wss://lk.example.test"
    assert alone.roster is not None
    await alone.roster.aclose()


@pytest.mark.parametrize(
    ("environ", "says"),
    [
        ({"PINECALL_OPERATOR_KEY": "k"}, "no LiveKit keys"),
        (
            {"PINECALL_OPERATOR_KEY": "k", "PINECALL_LIVEKIT_KEYS": "production"},
            "not <environment>=",
        ),
        (
            {"PINECALL_OPERATOR_KEY": "k", "PINECALL_LIVEKIT_KEYS": "production=K"},
            "not <env>=<key>:<secret>",
        ),
        (
            {
                "PINECALL_OPERATOR_KEY": "k",
                "PINECALL_LIVEKIT_KEYS": "sandbox=K:S",
                "PINECALL_LIVEKIT_URLS": "x",
            },
            "PINECALL_LIVEKIT_URLS",
        ),
        ({"PINECALL_LIVEKIT_KEYS": "production=K:S"}, "PINECALL_OPERATOR_KEY"),
        ({"PINECALL_REAP_EVERY": "5"}, "unknown setting"),
        ({"PINECALL_MAX_CALL_SECONDS": "half an hour"}, "ReaperSettings"),
    ],
)
def test_what_it_cannot_run_with_is_a_settings_error(environ: dict[str, str], says: str) -> None:
    with pytest.raises(SettingsError, match=says):
        ReaperSettings.from_env(environ).check()
