"""What the operator's CLI needs to reach a platform: NATS, Postgres, call-log and an operator key.

From the environment first (``PINECALL_NATS_URL``, ``PINECALL_DATABASE_URL``,
``PINECALL_CALL_LOG_URL``, ``PINECALL_OPERATOR_KEY``); where a variable is not set, from the state file ``up`` writes
(``<PINECALL_STATE_DIR>/up.json``, default ``.state/``), so ``pinecall-runtime fleet list`` works
against ``./dev up`` with nothing exported. A failure of the runtime is a named error
(:class:`CommandError`: ``error [unauthorized]: …``) with the exit code of its kind.
"""

from __future__ import annotations

import asyncio
import functools
import math
import os
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any, TypeVar

import click
import msgspec

from pinecall_servicekit.dburl import without_password
from pinecall_servicekit.errors import (
    BusUnavailable,
    PinecallError,
    StoreUnavailable,
    Unavailable,
)
from pinecall_servicekit.lifecycle import ExitCode
from pinecall_servicekit.natsauth import redact
from pinecall_servicekit.settings import HttpUrl, Settings, SettingsError

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
    call_log_url: HttpUrl = "http://127.0.0.1:8102"
    """Where call-log answers HTTP (``agents``; ``up.json`` names the one ``up`` runs)."""
    dispatcher_url: HttpUrl = "http://127.0.0.1:8103"
    """Where the dispatcher answers HTTP (``numbers phone``; ``up.json`` names the one ``up``
    runs)."""
    state_dir: str = ".state"
    """Where ``up`` writes ``up.json``."""

    @classmethod
    def load(cls) -> OperatorSettings:
        """Settings from the environment, filled in from ``up.json`` where unset: an exported
        variable wins, each setting on its own (:meth:`sources` says which came from where).

        Raises ``SettingsError`` for a ``up.json`` that is no state file of ``up``."""
        env = dict(os.environ)
        settings = cls.from_env(env)
        up = _read_state(Path(settings.state_dir) / "up.json")
        if up is None:
            return settings
        overrides = {f: v for f, v in _filled(up).items() if cls.env_name(f) not in env}
        return cls.from_env(env, **overrides)

    @classmethod
    def sources(cls, *fields: str) -> list[Source]:
        """Where :meth:`load` takes each of ``fields`` (``nats_url``, ``database_url``, …) from,
        read again from the environment and ``up.json`` now; never raises."""
        env = dict(os.environ)
        state_file = Path(env.get(cls.env_name("state_dir"), ".state")) / "up.json"
        try:
            up = _read_state(state_file)
        except SettingsError:
            up = None
        said = _filled(up) if up is not None else {}
        defaults = cls.from_env({})
        found = []
        for field in fields:
            variable = cls.env_name(field)
            value, origin = getattr(defaults, field), "default"
            if variable in env:
                value, origin = env[variable], "environment"
            elif field in said:
                value, origin = said[field], "up.json"
            found.append(
                Source(
                    field=field,
                    variable=variable,
                    origin=origin,
                    value=str(value),
                    state_file=str(state_file),
                    state_says=said.get(field),
                )
            )
        return found


class Source(msgspec.Struct, frozen=True, kw_only=True):
    """Where the CLI took one setting from: ``origin`` is ``environment`` (``variable`` was
    exported), ``up.json`` (``state_file``, written by a running ``up``) or ``default``;
    ``state_says`` is what ``up.json`` holds for it (None: no such file, or it names none)."""

    field: str
    variable: str
    origin: str
    value: str
    state_file: str
    state_says: str | None = None

    def __str__(self) -> str:
        """``PINECALL_NATS_URL from the environment (nats://…); .state/up.json says nats://…:
        unset PINECALL_NATS_URL to use it``, and the like for ``up.json`` and the default (a
        key's value is never said)."""
        secret = self.field.endswith("_key")
        value = "set" if secret else self._printable(self.value)
        if self.origin == "environment":
            said = f"{self.variable} from the environment ({value})"
            if self.state_says is None:
                return f"{said}; no {self.state_file}"
            if self.state_says == self.value:
                return f"{said}, as {self.state_file} says"
            other = "another key" if secret else self._printable(self.state_says)
            return f"{said}; {self.state_file} says {other}: unset {self.variable} to use it"
        if self.origin == "up.json":
            return (
                f"{self.variable} unset: {value} from {self.state_file} (`up` writes it while it "
                f"runs and removes it when it stops: one killed leaves it behind, stale)"
            )
        return (
            f"{self.variable} unset and no {self.state_file}: the default {value}; export "
            f"{self.variable}, or run `./dev up` in this folder"
        )

    def _printable(self, value: str) -> str:
        if self.field == "database_url":
            return without_password(value)
        return redact(value) if self.field == "nats_url" else value


def where_from(*fields: str, settings: OperatorSettings | None = None) -> str:
    """Each of ``fields``' :class:`Source`, as one sentence for an error: ``PINECALL_NATS_URL
    from the environment (…); … ; PINECALL_NATS_NAMESPACE …``. With ``settings``, only the
    fields whose value :meth:`OperatorSettings.load` would have given them (settings made
    otherwise, as in a test, came from nowhere it can say)."""
    return "; ".join(
        str(s)
        for s in OperatorSettings.sources(*fields)
        if settings is None or str(getattr(settings, s.field)) == s.value
    )


def _read_state(state_file: Path) -> UpState | None:
    """``up.json`` (None where there is none); ``SettingsError`` naming it where it does not
    decode."""
    try:
        raw = state_file.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise SettingsError(f"{state_file}: not readable: {exc}") from exc
    try:
        return msgspec.json.decode(raw, type=UpState)
    except msgspec.MsgspecError as exc:
        raise SettingsError(f"{state_file}: not the state file `up` writes: {exc}") from exc


def _filled(up: UpState) -> dict[str, str]:
    """What ``up.json`` fills in, by field (a missing operator key left out)."""
    fill = {
        "database_url": up.database_url,
        "nats_url": up.nats_url,
        "nats_namespace": up.nats_namespace,
        "operator_key": up.operator_key,
        "call_log_url": up.urls.get("call-log"),
        "dispatcher_url": up.urls.get("dispatcher"),
    }
    return {f: v for f, v in fill.items() if v is not None}


class Number(click.FloatRange):
    """click's ``FloatRange`` (same arguments) that refuses NaN and the infinities too: NaN
    compares false to every bound and an infinity passes an open one, so ``--rate nan`` would
    reach the code as a rate. Usage error 2: ``'--rate': nan is not a number in the range
    x>0.``"""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value} is not a number in the range {self._describe_range()}.", param, ctx)
        return number


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
    5 for ``not_found``, 69 for a dependency that did not answer, 78 for settings). NATS or
    Postgres unanswered also says where the CLI took their settings from (:func:`where_from`)."""

    @functools.wraps(coro_fn)
    def wrapper(*args: Any, **kwargs: Any) -> T:
        try:
            return asyncio.run(coro_fn(*args, **kwargs))
        except Unavailable as exc:
            looked = _where_it_looked(exc)
            said = f"{exc.detail} ({looked})" if looked else exc.detail
            raise CommandError(exc.code, said, ExitCode.UNAVAILABLE) from exc
        except PinecallError as exc:
            found = exc.code != "not_found"  # what the command names, nobody knows: exit 5
            raise CommandError(
                exc.code, exc.detail, ExitCode.FAILED if found else ExitCode.NOT_FOUND
            ) from exc
        except SettingsError as exc:
            raise CommandError("settings", str(exc), ExitCode.CONFIG) from exc

    return wrapper


def _where_it_looked(exc: Unavailable) -> str:
    """For NATS unanswered, where its URL came from (and its namespace, where the environment
    and ``up.json`` disagree on it); for Postgres, the database URL's; else ``""``."""
    if isinstance(exc, BusUnavailable):
        said = [str(s) for s in OperatorSettings.sources("nats_url")]
        said += [
            str(s)
            for s in OperatorSettings.sources("nats_namespace")
            if s.origin == "environment" and s.state_says not in (None, s.value)
        ]
        return "; ".join(said)
    if isinstance(exc, StoreUnavailable):
        return where_from("database_url")
    return ""


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Rows as a plain, aligned text table (``-`` for None)."""
    cells = [[("-" if v is None else str(v)) for v in row] for row in rows]
    widths = [
        max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(headers)
    ]
    lines = ["  ".join(h.upper().ljust(w) for h, w in zip(headers, widths, strict=True))]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in cells]
    return "\n".join(line.rstrip() for line in lines)
