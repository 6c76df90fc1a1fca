"""A service's ``serve`` and ``migrate`` check its settings first: a SettingsError from loading
them or from the service's ``check`` is exit 78 and ``error [settings]``, before anything listens
or migrates."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from pinecall_servicekit.lifecycle import ExitCode, service_cli
from pinecall_servicekit.settings import Settings, SettingsError


class Example(Settings, frozen=True, kw_only=True):
    service_key: str = ""

    def service_key_or_error(self) -> str:
        if not self.service_key:
            raise SettingsError("no PINECALL_SERVICE_KEY")
        return self.service_key


def example_cli(migrated: list[str]) -> click.Group:
    return service_cli(
        "example",
        about="An example service.",
        app="example.app:create_app",
        settings=Example.from_env,
        check=Example.service_key_or_error,
        serves="Serve nothing.",
        migrate=migrated.append,
    )


@pytest.mark.parametrize("command", ["serve", "migrate"])
def test_a_failed_check_exits_78_naming_it_before_anything_runs(command: str) -> None:
    migrated: list[str] = []
    result = CliRunner().invoke(
        example_cli(migrated), [command], env={"PINECALL_SERVICE_KEY": None}
    )
    assert result.exit_code == ExitCode.CONFIG == 78
    assert result.output == "error [settings]: no PINECALL_SERVICE_KEY\n"
    assert migrated == []


def test_an_unknown_setting_exits_78_before_the_check() -> None:
    result = CliRunner().invoke(example_cli([]), ["serve"], env={"PINECALL_SECRT": "typo"})
    assert result.exit_code == 78
    assert "error [settings]: unknown setting(s): PINECALL_SECRT" in result.output


def test_checked_settings_are_the_ones_migrate_uses() -> None:
    migrated: list[str] = []
    env = {"PINECALL_SERVICE_KEY": "s", "PINECALL_DATABASE_URL": "postgresql://db.test/x"}
    result = CliRunner().invoke(example_cli(migrated), ["migrate"], env=env)
    assert result.exit_code == 0, result.output
    assert migrated == ["postgresql://db.test/x"]
    assert result.output == "example: migrated\n"
