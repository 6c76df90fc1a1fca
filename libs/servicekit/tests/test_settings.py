"""Settings are read once from the environment; a typo is an error, never a silent default."""

from __future__ import annotations

from typing import ClassVar

import pytest

from pinecall_servicekit.settings import Settings, SettingsError


class Example(Settings, frozen=True, kw_only=True):
    ENV_NAMES: ClassVar = {"livekit_url": "LIVEKIT_URL"}

    port: int = 8101
    silent_s: float = 30.0
    livekit_url: str = "ws://127.0.0.1:7880"


def test_values_convert_from_strings_and_livekit_keeps_its_own_name() -> None:
    s = Example.from_env(
        {
            "PINECALL_PORT": "9000",
            "PINECALL_SILENT_S": "12.5",
            "LIVEKIT_URL": "wss://lk.example.test",
            "HOME": "/root",
        }
    )
    assert (s.port, s.silent_s, s.livekit_url) == (9000, 12.5, "wss://lk.example.test")
    assert s.nats_url == "nats://127.0.0.1:4222"


def test_an_unknown_pinecall_variable_is_an_error() -> None:
    with pytest.raises(SettingsError, match="PINECALL_FLET"):
        Example.from_env({"PINECALL_FLET": "pinecall"})


def test_a_value_of_the_wrong_type_names_its_field() -> None:
    with pytest.raises(SettingsError, match="port"):
        Example.from_env({"PINECALL_PORT": "eighty"})


@pytest.mark.parametrize("value", ["nan", "NaN", "inf", "-inf", "Infinity"])
def test_a_number_that_is_nan_or_infinite_is_an_error_naming_its_variable(value: str) -> None:
    """msgspec converts them to floats; a limit of NaN seconds would end every call at once."""
    with pytest.raises(SettingsError, match=r"^PINECALL_SILENT_S: .* is not a number$"):
        Example.from_env({"PINECALL_SILENT_S": value})
    with pytest.raises(SettingsError, match="PINECALL_SILENT_S"):
        Example.from_env({}, silent_s=float(value))


def test_a_setting_must_read_a_registered_name() -> None:
    class Unregistered(Settings, frozen=True, kw_only=True):
        made_up_thing: int = 1

    with pytest.raises(SettingsError, match="PINECALL_MADE_UP_THING"):
        Unregistered.from_env({})


def test_overrides_win_over_the_environment() -> None:
    assert Example.from_env({"PINECALL_PORT": "9000"}, port=9100).port == 9100
