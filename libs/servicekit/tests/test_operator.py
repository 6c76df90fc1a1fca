"""Where the CLI takes each setting from: an exported variable, ``up.json``, or the default;
and an error of NATS or Postgres unanswered says which, and what to unset."""

from __future__ import annotations

import os
from pathlib import Path

import msgspec
import pytest

from pinecall_servicekit.errors import BusUnavailable, StoreUnavailable
from pinecall_servicekit.lifecycle import ExitCode
from pinecall_servicekit.operator import (
    CommandError,
    OperatorSettings,
    SettingsError,
    UpState,
    run,
    where_from,
)

UP = UpState(
    database_url="postgresql://postgres:s3cret@/pcup_ab?host=/tmp/pg-x",
    nats_url="nats://127.0.0.1:40001",
    nats_namespace="upab",
    operator_key="pck_up",
)


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder with ``up``'s state file, and an environment naming it and nothing else."""
    for name in list(os.environ):
        if name.startswith("PINECALL_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("PINECALL_STATE_DIR", str(tmp_path))
    (tmp_path / "up.json").write_bytes(msgspec.json.encode(UP))
    return tmp_path / "up.json"


def test_unset_settings_are_up_jsons_and_an_exported_one_wins(
    state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert OperatorSettings.load().nats_url == UP.nats_url
    assert where_from("nats_url").startswith(f"PINECALL_NATS_URL unset: {UP.nats_url} from {state}")
    monkeypatch.setenv("PINECALL_NATS_URL", "nats://127.0.0.1:1")
    settings = OperatorSettings.load()
    assert (settings.nats_url, settings.nats_namespace) == ("nats://127.0.0.1:1", "upab")
    assert where_from("nats_url") == (
        f"PINECALL_NATS_URL from the environment (nats://127.0.0.1:1); {state} says "
        f"{UP.nats_url}: unset PINECALL_NATS_URL to use it"
    )
    monkeypatch.setenv("PINECALL_NATS_URL", UP.nats_url)
    assert where_from("nats_url").endswith(f", as {state} says")


def test_with_no_state_file_the_default_is_named_and_how_to_change_it(
    state: Path,
) -> None:
    state.unlink()
    assert where_from("nats_url") == (
        f"PINECALL_NATS_URL unset and no {state}: the default nats://127.0.0.1:4222; export "
        "PINECALL_NATS_URL, or run `./dev up` in this folder"
    )


def test_a_password_or_key_is_never_said(state: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PINECALL_DATABASE_URL", "postgresql://u:hunter2@127.0.0.1:1/test")
    monkeypatch.setenv("PINECALL_OPERATOR_KEY", "pck_mine")
    said = where_from("database_url", "operator_key")
    assert "hunter2" not in said
    assert "s3cret" not in said
    assert "pck_" not in said
    assert "postgresql://u:***@127.0.0.1:1/test" in said
    assert "postgresql://postgres:***@/pcup_ab?host=/tmp/pg-x" in said
    assert "PINECALL_OPERATOR_KEY from the environment (set)" in said
    assert "says another key: unset PINECALL_OPERATOR_KEY" in said


def test_settings_made_otherwise_are_not_said_to_come_from_here(state: Path) -> None:
    made = OperatorSettings.from_env({}, nats_url="nats://elsewhere:4222")
    assert where_from("nats_url", settings=made) == ""


def test_a_state_file_that_is_not_ups_is_a_settings_error(state: Path) -> None:
    state.write_text("{not json")
    with pytest.raises(SettingsError, match="not the state file `up` writes"):
        OperatorSettings.load()
    assert where_from("nats_url").startswith("PINECALL_NATS_URL unset")  # never raises


@pytest.mark.parametrize(
    ("raised", "field"),
    [
        (BusUnavailable("NATS at nats://127.0.0.1:1 did not answer in 5 s"), "PINECALL_NATS_URL"),
        (StoreUnavailable("listing keys: the database did not answer"), "PINECALL_DATABASE_URL"),
    ],
)
def test_a_dependency_unanswered_says_where_its_setting_came_from(
    state: Path, monkeypatch: pytest.MonkeyPatch, raised: Exception, field: str
) -> None:
    monkeypatch.setenv("PINECALL_NATS_NAMESPACE", "mine")

    @run
    async def command() -> None:
        raise raised

    with pytest.raises(CommandError) as failed:
        command()
    assert failed.value.exit_code == ExitCode.UNAVAILABLE
    said = failed.value.format_message()
    assert f"({field} unset: " in said
    if field == "PINECALL_NATS_URL":  # the namespace too, where the two disagree
        assert f"PINECALL_NATS_NAMESPACE from the environment (mine); {state} says upab" in said
