"""The chat service's settings: what it cannot run without is a settings error."""

from __future__ import annotations

import pytest

from pinecall_chat.settings import ChatSettings
from pinecall_servicekit.settings import SettingsError

GOOD = {"PINECALL_FLEET_KEYS": "production=pck_a,sandbox=pck_b", "PINECALL_CHAT_TOKEN_SECRET": "s"}


def test_the_defaults_and_the_keys() -> None:
    settings = ChatSettings.from_env(GOOD).check()
    assert (settings.port, settings.chat_token_ttl_s, settings.chat_max_message_chars) == (
        8106,
        900.0,
        4000,
    )
    assert settings.keys() == {"production": "pck_a", "sandbox": "pck_b"}


@pytest.mark.parametrize(
    ("environ", "says"),
    [
        ({"PINECALL_CHAT_TOKEN_SECRET": "s"}, "PINECALL_FLEET_KEYS"),
        (GOOD | {"PINECALL_FLEET_KEYS": "mars=pck_a"}, "no environment mars"),
        (GOOD | {"PINECALL_FLEET_KEYS": "production"}, "not <environment>="),
        ({"PINECALL_FLEET_KEYS": "production=pck_a"}, "PINECALL_CHAT_TOKEN_SECRET"),
        (GOOD | {"PINECALL_CHAT_MAX_MESSAGE_CHARS": "0"}, "ChatSettings"),
        (GOOD | {"PINECALL_CHAT": "1"}, "unknown setting"),
    ],
)
def test_what_it_cannot_run_with_is_a_settings_error(environ: dict[str, str], says: str) -> None:
    with pytest.raises(SettingsError, match=says):
        ChatSettings.from_env(environ).check()
