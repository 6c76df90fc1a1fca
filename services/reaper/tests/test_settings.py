"""The reaper's settings: LiveKit per environment as webhook-ingest reads its keys, and what it
cannot run without."""

from __future__ import annotations

import pytest

from pinecall_reaper.settings import LiveKit, ReaperSettings
from pinecall_servicekit.settings import SettingsError


def test_each_environment_gets_its_keys_and_its_url_or_livekit_url() -> None:
    settings = ReaperSettings.from_env(
        {
            "PINECALL_LIVEKIT_KEYS": "sandbox=SK:SS",
            "LIVEKIT_API_KEY": "PK",
            "LIVEKIT_API_SECRET": "PS",
            "LIVEKIT_URL": "wss://lk.example.test",
            "PINECALL_LIVEKIT_URLS": "sandbox=wss://lk-sandbox.example.test",
            "PINECALL_OPERATOR_KEY": "pck_op",
        }
    )
    assert settings.check().livekits() == {
        "production": LiveKit(url="wss://lk.example.test", api_key="PK", api_secret="PS"),
        "sandbox": LiveKit(url="wss://lk-sandbox.example.test", api_key="SK", api_secret="SS"),
    }
    assert (settings.port, settings.reap_every_s, settings.quiet_s, settings.max_call_seconds) == (
        8105,
        60.0,
        300.0,
        1800.0,
    )


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
