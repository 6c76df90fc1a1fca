"""The dispatcher SIGKILLed while callers ring, every webhook duplicated (issue 14, item 6 (b)).
Not a test: a script that runs ``pinecall-runtime up`` from this checkout, breaks it, and prints
what its callers lived through::

    .venv/bin/python bench/dispatcher_restart.py [--calls 60] [--rate 0.5] [--seats 2]
                                                 [--kill-at 30,70] [--json] [--report FILE]

What it does: starts ``up --calls N --rate R --seats S --exit-when-done --report FILE`` (its own
``.state/``: run it from a clone, never beside another ``up``); once up says it is ready, tells
each environment's LiveKit stand-in to send every webhook twice (``POST
/lab/control/webhooks/faults {"duplicate_next": ...}``, signed with the stand-in's keys, read from
the dispatcher's environment as an operator on the machine could); at each ``--kill-at`` second
after ready, SIGKILLs the dispatcher's process group (Granian's server and its worker: nothing of
it is left to close a thing), which ``up`` notices and starts again. Then waits for ``up`` to end.

What it reports, from up's own report: callers placed, answered by an agent, by the overflow,
silent (no agent's voice within 12 s of arrival), web visitors whose token request found the
dispatcher down (``up`` runs one replica; the chart runs two behind one Service), logs verified (no entry lost or doubled: one
``call.started`` per call), the most offers any call took, and the worst arrival → first audio of
an agent's voice (the caller's own line comes first: about 4.9 s of it on a quiet run); and the
seconds the dispatcher was gone each time (the kill to its ``/readyz``).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
from benchkit import bounded, listener, up_livekit_keys
from livekit import api

ROOT = Path(__file__).resolve().parent.parent


def _duplicate_webhooks(urls: dict[str, str]) -> None:
    """Every environment's stand-in sends each webhook twice from now on."""
    keys = up_livekit_keys(urls["dispatcher"])
    for name, url in urls.items():
        if not name.startswith("livekit-"):
            continue
        key, secret = keys[name.removeprefix("livekit-")]
        token = api.AccessToken(key, secret).with_identity("bench").to_jwt()
        r = httpx.post(
            f"{url}/lab/control/webhooks/faults",
            json={"duplicate_next": 1_000_000},
            headers={"Authorization": f"Bearer {token}"},
        )
        r.raise_for_status()


def _ready(url: str, deadline_s: float = 60.0) -> float:
    """Seconds until ``url``'s ``/readyz`` answers 200 (polled every 0.1 s)."""
    began = time.monotonic()
    while time.monotonic() - began < deadline_s:
        try:
            if httpx.get(f"{url}/readyz", timeout=1.0).status_code == 200:
                return time.monotonic() - began
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise TimeoutError(f"{url} was not ready within {deadline_s} s")


def run(calls: int, rate: float, seats: int, kill_at: list[float], report: Path) -> dict[str, Any]:
    up = subprocess.Popen(
        [str(ROOT / ".venv/bin/pinecall-runtime"), "up", "--calls", str(calls), "--rate",
         str(rate), "--seats", str(seats), "--exit-when-done", "--every", "30",
         "--report", str(report)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True,
    )  # fmt: skip
    assert up.stdout is not None
    ready = threading.Event()
    tail: list[str] = []

    def read() -> None:  # up's output: the ready line, then kept for a failure's message
        assert up.stdout is not None
        for line in up.stdout:
            tail[:] = [*tail[-40:], line]
            if line.startswith("up: ready"):
                ready.set()

    threading.Thread(target=read, daemon=True).start()
    gone: list[float] = []
    try:
        while not ready.wait(1.0):
            if up.poll() is not None:
                raise RuntimeError("up ended before it was ready:\n" + "".join(tail))
        began = time.monotonic()
        urls = json.loads((ROOT / ".state/up.json").read_text())["urls"]
        port = int(urls["dispatcher"].rsplit(":", 1)[1])
        _duplicate_webhooks(urls)
        for at in kill_at:
            time.sleep(max(0.0, began + at - time.monotonic()))
            os.killpg(os.getpgid(listener(port).pid), signal.SIGKILL)
            gone.append(round(_ready(urls["dispatcher"]), 2))
        code = up.wait()
    finally:
        if up.poll() is None:
            os.killpg(up.pid, signal.SIGINT)
            up.wait(120)
    result: dict[str, Any] = json.loads(report.read_text())
    agent = [
        c for c in result["callers"] if c["answered_by"] and "overflow" not in c["answered_by"]
    ]
    heard = [c["first_heard_s"] for c in agent if c["first_heard_s"] is not None]
    unreached = [p for p in result["problems"] if "ConnectError" in p]
    return {
        "exit": code,
        "visitors_who_found_the_token_endpoint_down": len(unreached),
        "calls": result["calls"],
        "logs_verified": f"{result['entries']['logs_verified']} of {result['entries']['logs']}",
        "offers_most": result["offers_per_call"]["most"],
        "worst_arrival_to_agent_audio_s": max(heard, default=None),
        "first_audio_heard": result["first_audio_s"]["heard_by_the_caller"],
        "dispatcher_gone_s": gone,
        "restarts": result["restarts"].get("dispatcher"),
        "problems": result["problems"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=60)
    parser.add_argument("--rate", type=bounded(float, 0.01, 5000), default=0.5)
    parser.add_argument("--seats", type=int, default=2)
    parser.add_argument("--kill-at", default="30,70", help="seconds after ready, comma-separated")
    parser.add_argument("--report", type=Path, help="keep up's report here")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    kill_at = [float(s) for s in args.kill_at.split(",") if s]
    with tempfile.TemporaryDirectory() as tmp:
        report = args.report or Path(tmp) / "up.json"
        out = run(args.calls, args.rate, args.seats, kill_at, report)
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        c = out["calls"]
        print(
            f"dispatcher SIGKILLed at {args.kill_at} s, every webhook twice: up exit {out['exit']}; "
            f"{c['placed']} callers, {c['answered_by_agent']} by an agent, "
            f"{c['answered_by_overflow']} by the overflow, {c['silent']} silent, "
            f"{out['visitors_who_found_the_token_endpoint_down']} visitors found the token "
            f"endpoint down; logs verified "
            f"{out['logs_verified']}; most offers {out['offers_most']}; worst arrival to the "
            f"agent's first audio {out['worst_arrival_to_agent_audio_s']} s; the dispatcher gone "
            f"{out['dispatcher_gone_s']} s"
        )
        for p in out["problems"][:20]:
            print(f"  problem: {p}")
    sys.exit(0 if out["exit"] == 0 else 1)


if __name__ == "__main__":
    main()
