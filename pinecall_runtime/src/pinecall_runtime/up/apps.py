"""The tenant's side of ``up`` (issue 16, "In the main job"): what the app processes' ledgers say,
and the kills of ``--app-restarts``.

In each environment two processes of the booking example's app hold the callers' agent and a
console holds it too, handed no call (:func:`pinecall_runtime.up.services.apps`). Each is ``lab
app``: the example's app as ``pinecall start`` runs it, its handlers and hooks unchanged, writing
a ledger of its own (``<state dir>/apps/<instance>.jsonl``, ``lab.app.v1`` lines): each call
attached (new, handed, parked) and detached, each tool handler entered, each time it holds its
agent. From them :func:`tally` counts, by the apps' own count:

- tool calls *run twice*: an id whose handler was entered more than once, by one process or by
  two (must be none: a tool call runs once per id);
- calls *handed* between processes: attached ``handed`` (its socket went while another held the
  agent) or ``parked`` (it waited for a process to register);
- for each kill, the calls the killed process held then, and the seconds from the kill (the
  socket's loss) to each being attached to another process.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
import stamina

from pinecall_contracts.base import decode
from pinecall_contracts.lab import AppEvent
from pinecall_runtime.loaddrive import quantile
from pinecall_runtime.up.supervise import Supervised

RUN_TWICE_SHOWN = 20
"""Tool call ids run twice named in the report, at most (the count is whole)."""


@dataclass(frozen=True, kw_only=True)
class Kill:
    """One SIGKILL of ``--app-restarts``: the process, when, and how many calls it held then (by
    its ledger)."""

    instance: str
    at: dt.datetime
    held: int


class Ledgers:
    """Every app process's ledger in ``folder`` (``<instance>.jsonl``), read as they grow."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.events: list[AppEvent] = []
        self._read: dict[Path, int] = {}

    def read(self) -> None:
        """Take the lines written since the last read (whole lines only)."""
        for path in sorted(self.folder.glob("*.jsonl")):
            with path.open("rb") as f:
                f.seek(self._read.get(path, 0))
                chunk = f.read()
            whole = chunk[: chunk.rfind(b"\n") + 1]
            self._read[path] = self._read.get(path, 0) + len(whole)
            self.events += [decode(line, AppEvent) for line in whole.splitlines() if line.strip()]
        self.events.sort(key=lambda e: e.at)

    def held(self, instance: str) -> bool:
        """Whether ``instance`` has held its agent since it started (a ``held`` line)."""
        return any(e.what == "held" and e.instance == instance for e in self.events)


def holders(
    events: Iterable[AppEvent], kills: Iterable[Kill], until: dt.datetime | None = None
) -> dict[str, str]:
    """Call → the instance serving it at ``until`` (now when None), by the ledgers: the last
    ``attached`` of the call, unless that instance detached it or was killed since."""
    held: dict[str, str] = {}
    timeline: list[tuple[dt.datetime, int, AppEvent | Kill]] = [
        (e.at, 1, e) for e in events if until is None or e.at <= until
    ]
    timeline += [(k.at, 0, k) for k in kills if until is None or k.at < until]
    for _, _, item in sorted(timeline, key=lambda t: (t[0], t[1])):
        if isinstance(item, Kill):
            held = {c: i for c, i in held.items() if i != item.instance}
        elif item.what == "attached" and item.call is not None:
            held[item.call] = item.instance
        elif item.what == "detached" and item.call and held.get(item.call) == item.instance:
            del held[item.call]
    return held


def tally(events: list[AppEvent], kills: list[Kill], consoles: set[str]) -> dict[str, Any]:
    """What the ledgers say (the module docstring): tool runs and ids run twice, calls
    attached by why, the consoles' attaches (must be none), and the loss → attached seconds
    (p50, p99) of the calls each kill took from its process."""
    runs = Counter((e.call, e.id) for e in events if e.what == "tool")
    twice = sorted((n, call, tool) for (call, tool), n in runs.items() if n > 1)
    attached = [e for e in events if e.what == "attached" and e.instance not in consoles]
    why = Counter(e.why for e in attached)
    console = [e for e in events if e.what == "attached" and e.instance in consoles]
    lost, waits = 0, []
    for k, kill in enumerate(kills):
        mine = [c for c, i in holders(events, kills[:k], kill.at).items() if i == kill.instance]
        lost += len(mine)
        for call in mine:
            after = next((e for e in attached if e.call == call and e.at > kill.at), None)
            if after is not None:
                waits.append((after.at - kill.at).total_seconds())
    return {
        "runs": sum(runs.values()),
        "run_twice": len(twice),
        "run_twice_ids": [
            {"call": call, "id": tool, "runs": n} for n, call, tool in twice[:RUN_TWICE_SHOWN]
        ],
        "kills": len(kills),
        "killed": [{"instance": k.instance, "at": k.at.isoformat(), "held": k.held} for k in kills],
        "attached": {w: why[w] for w in ("new", "handed", "parked")},
        "handed": why["handed"] + why["parked"],
        "console_attached": [f"{e.instance}: {e.call}" for e in console],
        "held_at_a_kill": lost,
        "attached_after_a_kill": len(waits),
        "loss_to_attached_s": {
            "p50": round(quantile(waits, 0.5), 3) if waits else None,
            "p99": round(quantile(waits, 0.99), 3) if waits else None,
        },
    }


class NotHeld(Exception):
    """An app process has not held its agent yet."""


async def wait_held(ledgers: Ledgers, processes: list[Supervised], within_s: float = 60) -> None:
    """Return once each of ``processes`` wrote ``held`` in its ledger (its socket open, its
    agent registered); ``click.ClickException`` naming those that did not within ``within_s``
    and their logs."""
    try:
        async for attempt in stamina.retry_context(
            on=NotHeld, attempts=None, timeout=within_s, wait_initial=0.1, wait_max=0.5
        ):
            with attempt:
                ledgers.read()
                if missing := [p.name for p in processes if not ledgers.held(p.name)]:
                    raise NotHeld(missing)
    except NotHeld as exc:
        logs = [str(p.log) for p in processes if p.name in exc.args[0]]
        raise click.ClickException(
            f"{', '.join(exc.args[0])} did not hold the agent within {within_s:g} s: see "
            f"{', '.join(logs)}"
        ) from None


async def killing(
    every_s: float, processes: list[Supervised], ledgers: Ledgers, kills: list[Kill]
) -> None:
    """``--app-restarts``: every ``every_s`` SIGKILL one of ``processes`` (the apps, never a
    console) and add it to ``kills``, until cancelled; the supervisor starts it again. The one
    killed holds the most calls by the ledgers (the kill that hands calls over), the one killed
    longest ago among equals."""
    while True:
        await asyncio.sleep(every_s)  # the option's cadence, not a wait for an event
        ledgers.read()
        alive = [p for p in processes if p.proc.poll() is None]
        if not alive:
            continue
        counts = Counter(holders(ledgers.events, kills).values())
        last = {k.instance: i for i, k in enumerate(kills)}
        victim = max(alive, key=lambda p: (counts[p.name], -last.get(p.name, -1)))
        kills.append(
            Kill(instance=victim.name, at=dt.datetime.now(dt.UTC), held=counts[victim.name])
        )
        victim.kill()
        click.echo(
            f"up: --app-restarts: {victim.name} SIGKILLed, holding {counts[victim.name]} calls",
            err=True,
        )
