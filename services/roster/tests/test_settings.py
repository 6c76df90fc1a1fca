"""The fleets rows the roster makes at start: each on its environment's LiveKit."""

from __future__ import annotations

import pytest

from pinecall_roster.settings import RosterSettings
from pinecall_servicekit.settings import SettingsError


def test_each_environment_on_the_livekit_the_urls_name_else_livekit_url() -> None:
    settings = RosterSettings.from_env(
        {
            "LIVEKIT_URL": "ws://lk-default:7880",
            "PINECALL_LIVEKIT_URLS": "sandbox=ws://lk-sandbox:7880",
        }
    )
    rows = {r.name: (r.environment, r.livekit_url) for r in settings.fleet_records()}
    assert rows == {
        "pinecall": ("production", "ws://lk-default:7880"),
        "pinecall-sandbox": ("sandbox", "ws://lk-sandbox:7880"),
    }


def test_malformed_urls_are_a_settings_error_naming_the_variable() -> None:
    settings = RosterSettings.from_env({"PINECALL_LIVEKIT_URLS": "sandbox"})
    with pytest.raises(SettingsError, match="PINECALL_LIVEKIT_URLS"):
        settings.fleet_records()


@pytest.mark.parametrize("port", ["99999", "-1"])
def test_a_port_outside_tcps_range_is_a_settings_error(port: str) -> None:
    """Granian raised an OverflowError from its own code for these (a traceback, exit 1)."""
    with pytest.raises(SettingsError, match="port"):
        RosterSettings.from_env({"PINECALL_PORT": port})
