"""Calls handed between app processes while they are killed (issue 16, acceptance 5): ``lab run
handover``.

The whole platform as ``up`` runs it, with the machinery ``up`` has for it, not a second copy:
``pinecall-runtime up --calls N --rate R --tool-share S --app-restarts K --exit-when-done
--report FILE`` in a process of its own, on a state folder of its own. In each environment two
processes of the booking example's app hold the callers' agent (and a console, handed no call);
the model asks a tool on ``S`` of the turns; every ``K`` seconds the app process holding the
most calls is SIGKILLed and started again. Its report (:mod:`pinecall_runtime.up.report`, read
back here as JSON) gives:

- the calls placed, answered by an agent, and the callers left silent (must be 0);
- the tool calls asked (each call's log), answered by the app, timed out, and run twice by the
  apps' own count (each process's ledger: an id whose handler was entered twice; must be 0);
- the kills, the calls handed to another process (``call.attached`` handed or parked), and the
  seconds from each socket's loss (the SIGKILL) to its calls' ``call.attached`` on another
  process, p50 and p99.

``up`` exits 1 when its report names a problem (a silent caller, a tool run twice, a log that
did not verify); so does this.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import msgspec

from pinecall_servicekit.operator import table


class Handover(msgspec.Struct, kw_only=True):
    """The experiment's numbers (JSON with ``--json``)."""

    experiment: str = "handover"
    calls: int
    rate: float
    tool_share: float
    app_restarts_s: float
    answered_by_agent: int
    silent: int
    tools_asked: int
    tools_answered_by_the_app: int
    tools_timed_out: int
    tools_run_twice: int
    kills: int
    held_at_a_kill: int
    """Calls the killed processes held when they were killed."""
    handed: int
    """``call.attached`` handed or parked: calls handed from one app process to another."""
    loss_to_attached_s: dict[str, float | None]
    """p50 and p99, seconds from a kill to its calls attached on another process."""
    problems: list[str]
    up_exit: int
    """``up``'s exit code (1: its report names a problem)."""
    state_dir: str | None = None
    """Where ``up``'s logs and ledgers are, kept when it failed (None: removed)."""


def handover(
    *, calls: int, rate: float, tool_share: float, app_restarts_s: float, every_s: float = 5.0
) -> Handover:
    """Run ``up`` as the module docstring says and read its report; ``RuntimeError`` (with the
    end of its output) when it wrote none."""
    state = Path(tempfile.mkdtemp(prefix="pinecall-handover-"))
    report = state / "report.json"
    args = [
        sys.executable, "-m", "pinecall_runtime", "up", "--calls", str(calls),
        "--rate", f"{rate:g}", "--tool-share", f"{tool_share:g}",
        "--app-restarts", f"{app_restarts_s:g}", "--exit-when-done",
        "--every", f"{every_s:g}", "--report", str(report),
    ]  # fmt: skip
    with (state / "up.log").open("wb") as out:
        done = subprocess.run(
            args,
            env=os.environ | {"PINECALL_STATE_DIR": str(state / "state")},
            stdout=out,
            stderr=subprocess.STDOUT,
            check=False,
        )
    if not report.exists():
        said = (state / "up.log").read_text(errors="replace")[-3000:]
        raise RuntimeError(f"up exited {done.returncode} with no report ({state}):\n{said}")
    numbers = of(
        msgspec.json.decode(report.read_bytes()),
        rate=rate,
        app_restarts_s=app_restarts_s,
        code=done.returncode,
    )
    if done.returncode != 0:  # its logs and ledgers say why
        return msgspec.structs.replace(numbers, state_dir=str(state))
    shutil.rmtree(state, ignore_errors=True)
    return numbers


def of(result: dict[str, Any], *, rate: float, app_restarts_s: float, code: int) -> Handover:
    """The experiment's numbers from ``up``'s report ``result``."""
    calls, tools, apps = result["calls"], result["tools"], result["apps"]
    return Handover(
        calls=calls["placed"],
        rate=rate,
        tool_share=result["tool_share"],
        app_restarts_s=app_restarts_s,
        answered_by_agent=calls["answered_by_agent"],
        silent=calls["silent"],
        tools_asked=tools["asked"],
        tools_answered_by_the_app=tools["answered_by_the_app"],
        tools_timed_out=tools["timed_out"],
        tools_run_twice=tools["run_twice"],
        kills=apps["kills"],
        held_at_a_kill=apps["held_at_a_kill"],
        handed=apps["handed"],
        loss_to_attached_s=apps["loss_to_attached_s"],
        problems=result["problems"],
        up_exit=code,
    )


def handover_table(h: Handover) -> str:
    """The experiment as the terminal shows it."""
    loss = h.loss_to_attached_s
    head = (
        f"handover: {h.calls} calls at {h.rate:g}/s, a tool asked on {h.tool_share:.0%} of the "
        f"turns, an app process SIGKILLed every {h.app_restarts_s:g} s"
    )
    rows = [
        ("calls", h.calls, f"{h.answered_by_agent} answered by an agent, {h.silent} silent"),
        ("tool calls asked", h.tools_asked, ""),
        ("answered by the app", h.tools_answered_by_the_app, ""),
        ("timed out", h.tools_timed_out, ""),
        ("run twice", h.tools_run_twice, "the apps' own count"),
        ("kills", h.kills, f"{h.held_at_a_kill} calls held by the killed processes"),
        ("calls handed", h.handed, "call.attached handed or parked"),
        ("loss → attached p50", _s(loss.get("p50")), "on the other process"),
        ("loss → attached p99", _s(loss.get("p99")), ""),
    ]
    said = [head, table(("", "count", ""), rows)]
    if h.problems:
        said.append("problems:\n  " + "\n  ".join(h.problems[:20]))
    if h.state_dir:
        said.append(f"up's logs and ledgers: {h.state_dir}")
    return "\n".join(said)


def _s(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds:.3f} s"
