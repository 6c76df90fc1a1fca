"""Every number option of the platform's CLIs refuses NaN and the infinities with a usage error.

click's ``FloatRange`` lets them through its bounds (NaN compares false to each, an infinity passes
an open one): ``up --rate nan`` reached the callers as a rate. The platform's CLIs take
:class:`pinecall_servicekit.operator.Number` instead; the app SDK, which does not install
servicekit, checks its one number itself.
"""

from __future__ import annotations

from collections.abc import Iterator

import click
import pytest
from click.testing import CliRunner

from pinecall.cli import main as sdk
from pinecall_runtime.cli import main as runtime


def _walk(
    command: click.Command, path: str, ctx: click.Context
) -> Iterator[tuple[str, click.Command]]:
    yield path, command
    if isinstance(command, click.Group):
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            assert sub is not None, f"{path} {name} is listed and cannot be loaded"
            yield from _walk(sub, f"{path} {name}", click.Context(sub, info_name=name, parent=ctx))


def _number_options() -> list[tuple[str, click.Parameter]]:
    root = click.Context(runtime, info_name="pinecall-runtime")
    return [
        (f"{path} {param.opts[0] if param.opts else param.name}", param)
        for path, command in _walk(runtime, "pinecall-runtime", root)
        for param in command.params
        if isinstance(param.type, click.FloatRange)
    ]


def test_every_number_option_of_the_runtimes_cli_refuses_nan_and_infinity() -> None:
    options = _number_options()
    assert len(options) >= 30, [name for name, _ in options]  # the walk reached the commands
    accepted = []
    for name, param in options:
        for bad in ("nan", "inf", "-inf"):
            try:
                param.type.convert(bad, param, None)
            except click.BadParameter:
                continue
            accepted.append(f"{name} {bad}")
    assert accepted == []


@pytest.mark.parametrize(
    ("cli", "args", "named"),
    [
        (runtime, ["up", "--rate", "nan"], "'--rate': nan is not a number in the range x>0."),
        (runtime, ["load", "--duration", "inf"], "'--duration'"),
        (sdk, ["start", "app:app", "--drain-timeout", "nan"], "nan is not a number of seconds"),
    ],
)
def test_a_number_that_is_none_is_a_usage_error_naming_its_option(
    cli: click.Command, args: list[str], named: str
) -> None:
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2, result.output
    assert named in result.output
