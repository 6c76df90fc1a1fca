"""How soon a hang-up's seat is free again (issue 14, item 5): on the roster (what ``fleet list``
shows) and at the token endpoint (admission), through the whole platform of ``up``.

It starts ``pinecall-runtime up --seats 1 --calls 0`` in a state folder of its own (every service,
the stand-in, a real worker of one seat per environment), then, ``--trials`` times: a web visitor
takes production's token, joins its room, waits for the agent, and hangs up; from the hang-up it
reads the roster's row of the worker and asks a token again, each every ``--every-ms`` (25),
until the row counts no call and a token is given. It prints both waits' p50/p99/max (seconds)
and stops ``up``. Not a test: nothing asserts a time.

``--made-first`` (issue 14, item 4): each visitor's room is made through livekit-api before the
visitor joins it, as a page's server may do, so LiveKit applies none of the token's ring; it
also prints how many of those visitors an agent answered, and the seconds from the join to it.

    .venv/bin/python bench/seat_free.py [--trials 20] [--made-first] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from benchkit import bounded, up_livekit_keys
from livekit import api

from pinecall_labroom import LabRoom

ROOT = Path(__file__).resolve().parent.parent


def log(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


async def until(check: Any, every_s: float, within_s: float = 60.0) -> float:
    """Seconds until ``await check()`` is true, asking every ``every_s``."""
    start = time.monotonic()
    while not await check():
        if time.monotonic() - start > within_s:
            raise TimeoutError(f"not within {within_s:.0f} s")
        await asyncio.sleep(every_s)  # a poll's pace: the bench reads what an operator reads
    return time.monotonic() - start


async def trial(
    dispatcher: httpx.AsyncClient,
    roster: httpx.AsyncClient,
    app: str,
    op: str,
    every_s: float,
    livekit: api.LiveKitAPI | None = None,
) -> tuple[float, float, float]:
    """One visitor answered and hung up: (join → agent, hang-up → free on the roster, hang-up →
    admitted again), in seconds; the room made first through ``livekit`` when given.
    ``TimeoutError`` if no agent came within 60 s."""

    async def token() -> httpx.Response:
        return await dispatcher.post(
            "/v1/tokens",
            json={"agent": "support-bot", "org": "org_up"},  # up's agent (up.command.AGENT, ORG)
            headers={"authorization": f"Bearer {app}"},
        )

    r = await token()
    r.raise_for_status()
    visitor = r.json()
    if livekit is not None:
        await livekit.room.create_room(api.CreateRoomRequest(name=visitor["room"]))
    room = await LabRoom.connect(visitor["url"], visitor["token"])
    joined = time.monotonic()
    try:
        await asyncio.wait_for(room.wait_for_participant(kind="AGENT"), 60)
    except TimeoutError:
        await room.leave()
        raise
    answered_s = time.monotonic() - joined

    async def row_free() -> bool:
        fleet = await roster.get(
            "/v1/ops/fleet", params={"fleet": "pinecall"}, headers={"authorization": f"Bearer {op}"}
        )
        rows = [w for f in fleet.json()["fleets"] for w in f["workers"]]
        return bool(rows) and all(w["active"] == 0 for w in rows)

    given: list[str] = []

    async def admitted() -> bool:
        r = await token()
        if r.status_code == 200:
            given.append(r.json()["room"])
        return r.status_code == 200

    await room.leave()
    roster_s, admission_s = await asyncio.gather(until(row_free, every_s), until(admitted, every_s))
    return answered_s, roster_s, admission_s


async def measure(state: Path, trials: int, every_s: float, made_first: bool) -> dict[str, Any]:
    up = json.loads((state / "up.json").read_text())
    keys = json.loads((state / "keys.json").read_text())
    async with contextlib.AsyncExitStack() as stack:
        dispatcher = await stack.enter_async_context(
            httpx.AsyncClient(base_url=up["urls"]["dispatcher"], timeout=10)
        )
        roster = await stack.enter_async_context(
            httpx.AsyncClient(base_url=up["urls"]["roster"], timeout=10)
        )
        livekit = None
        if made_first:
            key, secret = up_livekit_keys(up["urls"]["dispatcher"])["production"]
            livekit = api.LiveKitAPI(up["urls"]["livekit-production"], key, secret)
            stack.push_async_callback(livekit.aclose)
        answered_s, roster_s, admission_s, unanswered = [], [], [], 0
        for n in range(trials):
            try:
                j, r, a = await trial(
                    dispatcher, roster, keys["app-production"], keys["operator"], every_s, livekit
                )
            except TimeoutError:
                unanswered += 1
                log(f"trial {n + 1}: no agent came within 60 s")
                continue
            answered_s.append(j)
            roster_s.append(r)
            admission_s.append(a)
            log(f"trial {n + 1}: answered {j:.3f} s, roster {r:.3f} s, admission {a:.3f} s")
            await asyncio.sleep(3)  # the admitted token's visitor never joins: let its seat go
    result: dict[str, Any] = {
        what: {"p50": pct(v, 0.5), "p99": pct(v, 0.99), "max": max(v), "n": len(v)}
        for what, v in (
            ("answered_s", answered_s), ("roster_s", roster_s), ("admission_s", admission_s)
        )
        if v
    }  # fmt: skip
    result["answered"] = f"{trials - unanswered} of {trials}"
    result["rooms_made_first"] = made_first
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--every-ms", type=bounded(float, 1, 60_000), default=25.0)
    parser.add_argument(
        "--made-first", action="store_true", help="make each room before its visitor joins"
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    state = Path(tempfile.mkdtemp(prefix="pcbench-seat-"))
    env = os.environ | {"PINECALL_STATE_DIR": str(state)}
    cmd = [str(ROOT / ".venv/bin/pinecall-runtime"), "up", "--seats", "1", "--calls", "0"]
    log(f"starting {' '.join(cmd[1:])} in {state}")
    up = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 240
        while not (state / "up.json").exists():
            if up.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"up did not start: see {state}/logs")
            time.sleep(0.5)
        result = asyncio.run(measure(state, args.trials, args.every_ms / 1000, args.made_first))
    finally:
        up.send_signal(signal.SIGTERM)
        up.wait(timeout=120)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"answered by an agent: {result['answered']} (rooms made first: {args.made_first})")
        for what, v in result.items():
            if not isinstance(v, dict):
                continue
            print(
                f"{what:12} p50 {v['p50']:.3f}  p99 {v['p99']:.3f}  max {v['max']:.3f}  (n={v['n']})"
            )


if __name__ == "__main__":
    main()
