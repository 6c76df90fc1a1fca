"""What the operator's CLI needs to reach a platform: NATS, Postgres and an operator key.

From the environment first (``PINECALL_NATS_URL``, ``PINECALL_DATABASE_URL``,
``PINECALL_OPERATOR_KEY``); where a variable is not set, from the state file ``up`` writes
(``<PINECALL_STATE_DIR>/up.json``, default ``.state/``), so ``pinecall-runtime fleet list`` works
against ``./dev up`` with nothing exported. A failure of the runtime is a named error
(:class:`CommandError`: ``error [unauthorized]: …``) with the exit code of its kind.
"""

from __future__ import annotations

import asyncio
import functools
import os
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any, TypeVar

import click
import msgspec

from pinecall_servicekit.errors import PinecallError, Unavailable
from pinecall_servicekit.lifecycle import ExitCode
from pinecall_servicekit.settings import Settings, SettingsError

T = TypeVar("T")


class UpState(msgspec.Struct, frozen=True, kw_only=True):
    """What ``up`` writes for the CLI: where its platform answers and its operator key."""

    database_url: str
    nats_url: str
    nats_namespace: str = "pinecall"
    operator_key: str | None = None
    roster_url: str | None = None
    urls: dict[str, str] = {}
    """Where each process of ``up`` answers, by name (``call-log``, ``dispatcher``,
    ``livekit-production``…)."""


class OperatorSettings(Settings, frozen=True, kw_only=True):
    operator_key: str | None = None
    """An operator key (``pck_…``) for the ops verbs."""
    state_dir: str = ".state"
    """Where ``up`` writes ``up.json``."""

    @classmethod
    def load(cls) -> OperatorSettings:
        """Settings from the environment, filled in from ``up.json`` where unset."""
        env = dict(os.environ)
        settings = cls.from_env(env)
        state_file = Path(settings.state_dir) / "up.json"
        if not state_file.exists():
            return settings
        up = msgspec.json.decode(state_file.read_bytes(), type=UpState)
        fill = {
            "database_url": up.database_url,
            "nats_url": up.nats_url,
            "nats_namespace": up.nats_namespace,
            "operator_key": up.operator_key,
        }
        overrides = {f: v for f, v in fill.items() if cls.env_name(f) not in env and v is not None}
        return cls.from_env(env, **overrides)


class CommandError(click.ClickException):
    """A runtime error as the CLI says it: ``error [code]: detail``, with its kind's exit code."""

    def __init__(self, code: str, detail: str, exit_code: int = ExitCode.FAILED) -> None:
        super().__init__(detail)
        self.code = code
        self.exit_code = exit_code  # type: ignore[misc]  # click reads it per instance

    def format_message(self) -> str:
        return f"[{self.code}] {self.message}"


def run(coro_fn: Callable[..., Coroutine[Any, Any, T]]) -> Callable[..., T]:
    """Run an async command; runtime and settings errors become :class:`CommandError` (exit 1;
    5 for ``not_found``, 69 for a dependency that did not answer, 78 for settings)."""

    @functools.wraps(coro_fn)
    def wrapper(*args: Any, **kwargs: Any) -> T:
        try:
            return asyncio.run(coro_fn(*args, **kwargs))
        except Unavailable as exc:
            raise CommandError(exc.code, exc.detail, ExitCode.UNAVAILABLE) from exc
        except PinecallError as exc:
            found = exc.code != "not_found"  # what the command names, nobody knows: exit 5
            raise CommandError(
                exc.code, exc.detail, ExitCode.FAILED if found else ExitCode.NOT_FOUND
            ) from exc
        except SettingsError as exc:
            raise CommandError("settings", str(exc), ExitCode.CONFIG) from exc

    return wrapper


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Rows as a plain, aligned text table (``-`` for None)."""
    cells = [[("-" if v is None else str(v)) for v in row] for row in rows]
    widths = [
        max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(headers)
    ]
    lines = ["  ".join(h.upper().ljust(w) for h, w in zip(headers, widths, strict=True))]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in cells]
    return "\n".join(line.rstrip() for line in lines)
