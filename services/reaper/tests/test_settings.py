"""The reaper's settings and where each environment's LiveKit is: keys as webhook-ingest reads
them; the URL from PINECALL_LIVEKIT_URLS, else the roster's fleets row, else LIVEKIT_URL."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from pinecall_clients.livekit import LiveKitAccess
from pinecall_clients.roster import RosterClient
from pinecall_reaper.fleets import Fleets
from pinecall_reaper.settings import ReaperSettings
from pinecall_servicekit.bus import Bus
from pinecall_servicekit.settings import SettingsError
from pinecall_testkit.roster import Keys, Replica, make_keys, replica_on

BOTH = {
    "PINECALL_LIVEKIT_KEYS": "sandbox=SK:SS",
    "LIVEKIT_API_KEY": "PK",
    "LIVEKIT_API_SECRET": "PS",
    "LIVEKIT_URL": "wss://lk.example.test",
    "PINECALL_SERVICE_KEY": "pck_service",
}


@pytest.fixture
async def roster_keys(database_url: str) -> Keys:
    return await make_keys(database_url)


@pytest.fixture
async def roster(database_url: str, nats_url: str, nats_namespace: str) -> AsyncIterator[Replica]:
    rows = {"livekit_url": "wss://lk-of-the-rows.example.test"}
    async with replica_on(database_url, nats_url, nats_namespace, **rows) as client:
        yield client


@pytest.fixture
async def bus(nats_url: str, nats_namespace: str) -> AsyncIterator[Bus]:
    bus = await Bus.connect(nats_url, nats_namespace, name="reaper-test")
    yield bus
    await bus.close()


@pytest.fixture
async def nobodys_bus(nats_url: str, nats_namespace: str) -> AsyncIterator[Bus]:
    """A bus of a namespace no roster serves: nothing answers there."""
    bus = await Bus.connect(nats_url, f"{nats_namespace}x", name="reaper-test")
    yield bus
    await bus.close()


async def test_the_url_is_the_settings_then_the_fleets_row_then_livekit_url(
    roster: Replica, roster_keys: Keys, bus: Bus, nobodys_bus: Bus
) -> None:
    """The fleets rows read over NATS with the reaper's service key."""
    settings = ReaperSettings.from_env(BOTH | {"PINECALL_SERVICE_KEY": roster_keys.service})
    assert settings.check() is settings
    assert (settings.port, settings.reap_every_s, settings.quiet_s, settings.max_call_seconds) == (
        8105,
        60.0,
        300.0,
        1800.0,
    )
    rows = "wss://lk-of-the-rows.example.test"
    service = RosterClient(settings.service_key, bus=bus)
    assert await Fleets(settings, service).livekits() == {
        "production": LiveKitAccess(url=rows, api_key="PK", api_secret="PS"),
        "sandbox": LiveKitAccess(url=rows, api_key="SK", api_secret="SS"),
    }
    named = ReaperSettings.from_env(
        BOTH
        | {
            "PINECALL_SERVICE_KEY": roster_keys.service,
            "PINECALL_LIVEKIT_URLS": "sandbox=wss://lk-sandbox.example.test",
        }
    )
    fleets = Fleets(named, service)
    assert {env: lk.url for env, lk in (await fleets.livekits()).items()} == {
        "production": rows,
        "sandbox": "wss://lk-sandbox.example.test",
    }
    # a roster that stops answering, or refuses the key: the rows last read stand
    fleets.roster = RosterClient(roster_keys.service, bus=nobodys_bus)
    assert (await fleets.livekits())["production"].url == rows
    fleets.roster = RosterClient(roster_keys.app, bus=bus)
    assert (await fleets.livekits())["production"].url == rows
    # no roster ever read: LIVEKIT_URL
    alone = Fleets(settings, RosterClient(roster_keys.service, bus=nobodys_bus))
    assert (await alone.livekits())["production"].url == "wss://lk.example.test"
    refused = Fleets(settings, RosterClient(roster_keys.app, bus=bus))
    assert (await refused.livekits())["production"].url == "wss://lk.example.test"


@pytest.mark.parametrize(
    ("environ", "says"),
    [
        ({"PINECALL_SERVICE_KEY": "k"}, "no LiveKit keys"),
        (
            {"PINECALL_SERVICE_KEY": "k", "PINECALL_LIVEKIT_KEYS": "production"},
            "not <environment>=",
        ),
        (
            {"PINECALL_SERVICE_KEY": "k", "PINECALL_LIVEKIT_KEYS": "production=K"},
            "not <env>=<key>:<secret>",
        ),
        (
            {
                "PINECALL_SERVICE_KEY": "k",
                "PINECALL_LIVEKIT_KEYS": "sandbox=K:S",
                "PINECALL_LIVEKIT_URLS": "x",
            },
            "PINECALL_LIVEKIT_URLS",
        ),
        ({"PINECALL_LIVEKIT_KEYS": "production=K:S"}, "PINECALL_SERVICE_KEY"),
        # an operator's key is a person's: the reaper does not run on one
        (
            {"PINECALL_OPERATOR_KEY": "k", "PINECALL_LIVEKIT_KEYS": "production=K:S"},
            "needs PINECALL_SERVICE_KEY",
        ),
        ({"PINECALL_REAP_EVERY": "5"}, "unknown setting"),
        ({"PINECALL_MAX_CALL_SECONDS": "half an hour"}, "ReaperSettings"),
    ],
)
def test_what_it_cannot_run_with_is_a_settings_error(environ: dict[str, str], says: str) -> None:
    with pytest.raises(SettingsError, match=says):
        ReaperSettings.from_env(environ).check()
