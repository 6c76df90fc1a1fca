"""Chats one chat replica holds (issue 17, acceptance 8): N visitors, each writing a message
every 5 s over ``WS /v1/chat``, and the reply start each sees, the model fake's fixed latency
subtracted. Not a test: nothing asserts a time.

Setup (``benchkit.py``): the running Postgres and NATS (or embedded ones), a database and NATS
namespace of the run's own, one call-log replica, the dispatcher (a written call's admission) and
one chat replica as processes (``serve --workers 1`` each), the vendor fakes (``lab vendors``: Anthropic's first text delta after
``--first-s``, 0.35 s, the lab's default; no tools asked), and the agent ``bench`` (a prompt, no
tools) defined with an app key. No app holds the agent: a written call opens and is answered
without one (its tools would go to it; it has none).

For each N of ``--chats`` (50,200,500): N visitors dial the replica (a token each, minted with
the app key, ``POST /v1/chat/tokens``), spread over the first 5 s; each then writes a message
every ``--every-s`` (5) for ``--seconds`` (60), open loop (each at its own time, whether or not
the previous reply came: a reply still coming when the next message is due delays it, as the
replica answers a call's messages in order). Measured per message: the *reply start*, from its
send to the reply's first ``chat.delta``, less ``--first-s`` (what the replica and call-log add:
the visitor's turn written, the call's history, the model's request made and its stream read);
replies not started within 30 s; the CPU of the chat replica, call-log and this process; the
load average. A step whose p95 passes ``--stop-p95-s`` (2 s) or that fails a message ends the
run: that N is where one replica stops holding.

With ``--profile S`` the chat replica is sampled with py-spy (``py-spy record --format raw``)
for S seconds in the middle of each step and its top frames printed (py-spy must be on PATH:
``pip install py-spy`` in a venv of its own; it is not the workspace's).

    .venv/bin/python bench/chat_replica.py [--chats 50,200,500] [--seconds 60] [--profile 20] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import math
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import msgspec
from benchkit import Bench, bench_platform, bounded, log, self_cpu_s, tree_cpu_s
from websockets.asyncio.client import ClientConnection, connect

from pinecall_contracts.base import encode
from pinecall_contracts.chat import ChatDelta, ChatMessage, ChatReady, ChatReply, ChatToken, ToPage
from pinecall_servicekit.platform import ensure_platform, free_port
from pinecall_servicekit.settings import Settings

AGENT = {"name": "bench", "prompt": "You chat. Be brief."}
ORG = "org_bench"
REPLY_WITHIN_S = 30.0


def pct(values: list[float], q: float) -> float:
    """The ``q`` quantile of ``values`` (nearest rank), NaN for none."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


class Visitor:
    """One chat: its socket, and what it measured."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.starts: list[float] = []
        self.failed: collections.Counter[str] = collections.Counter()
        self.ws: ClientConnection | None = None
        self.sent: dict[str, float] = {}
        self.reader: asyncio.Task[None] | None = None

    async def dial(self, http: httpx.AsyncClient, chat_url: str, app_key: str) -> None:
        answer = await http.post(
            f"{chat_url}/v1/chat/tokens",
            json={"agent": AGENT["name"], "org": ORG, "visitor": f"v{self.n}"},
            headers={"Authorization": f"Bearer {app_key}"},
        )
        answer.raise_for_status()
        token = msgspec.json.decode(answer.content, type=ChatToken).token
        url = f"ws{chat_url.removeprefix('http')}/v1/chat?token={token}"
        self.ws = await connect(url, open_timeout=60, max_size=2**20)
        msgspec.json.decode(await self.ws.recv(), type=ChatReady)
        self.reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        assert self.ws is not None
        with contextlib.suppress(Exception):
            async for raw in self.ws:
                frame = msgspec.json.decode(raw, type=ToPage)
                if isinstance(frame, ChatDelta) and frame.message in self.sent:
                    self.starts.append(time.monotonic() - self.sent.pop(frame.message))
                elif isinstance(frame, ChatReply) and frame.message in self.sent:
                    self.sent.pop(frame.message)  # a reply with no delta (none here)

    async def write(self, until: float, every_s: float, offset_s: float) -> None:
        """A message every ``every_s`` from ``offset_s`` on, until ``until`` (monotonic)."""
        assert self.ws is not None
        due = time.monotonic() + offset_s
        i = 0
        while due < until:
            await asyncio.sleep(max(0.0, due - time.monotonic()))
            message = f"v{self.n}-m{i}"
            self.sent[message] = time.monotonic()
            try:
                await self.ws.send(
                    encode(ChatMessage(id=message, text="a table for two?")).decode()
                )
            except Exception as exc:
                self.failed[type(exc).__name__] += 1
                return
            i += 1
            due += every_s

    async def close(self) -> None:
        if self.ws is not None:
            await self.ws.close()
        if self.reader is not None:
            self.reader.cancel()
            await asyncio.gather(self.reader, return_exceptions=True)


def profile(pid: int, seconds: float, out: Path) -> subprocess.Popen[bytes] | None:
    """py-spy sampling ``pid`` and its children (Granian's worker) for ``seconds``, raw
    collapsed stacks into ``out``; None without py-spy."""
    spy = shutil.which("py-spy")
    if spy is None:
        log("no py-spy on PATH: no profile")
        return None
    return subprocess.Popen(
        [spy, "record", "--pid", str(pid), "--subprocesses", "--duration", str(int(seconds)),
         "--rate", "50", "--format", "raw", "--output", str(out), "--nonblocking"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip


def top_frames(raw: Path, most: int = 12) -> list[tuple[str, float]]:
    """The frames where the samples were (self time), their share of the samples in Python
    code, from py-spy's collapsed stacks (``frame;frame;… count`` lines)."""
    if not raw.exists():
        return []
    own: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        leaf = stack.split(";")[-1]
        if leaf.startswith("process ") or "_spawn_asgi_lifespan_worker" in leaf:
            continue  # a sample of no Python frame, or Granian's server waiting on its worker
        own[leaf] += int(count)
        total += int(count)
    return [(frame, round(n / total, 3)) for frame, n in own.most_common(most)] if total else []


async def step(
    bench: Bench, chat_url: str, chats: int, args: argparse.Namespace, n: int
) -> dict[str, Any]:
    chat_pid = bench.replicas["chat"][1].pid
    log_pid = bench.replicas["call-log"][1].pid
    visitors = [Visitor(v) for v in range(chats)]
    limits = httpx.Limits(max_connections=50)
    async with httpx.AsyncClient(timeout=60, limits=limits) as http:
        dialled = time.monotonic()
        gate = asyncio.Semaphore(25)

        async def dial(v: Visitor) -> None:
            async with gate:
                await v.dial(http, chat_url, bench.app_key)

        await asyncio.gather(*(dial(v) for v in visitors))
        dialled = time.monotonic() - dialled
        log(f"{chats} chats open in {dialled:.1f} s")
        before = {"chat": tree_cpu_s(chat_pid), "call_log": tree_cpu_s(log_pid)}
        mine, began = self_cpu_s(), time.monotonic()
        until = began + args.seconds
        spy = None
        raw = bench.workdir / f"profile-{chats}.txt"
        if args.profile:
            await asyncio.sleep(min(args.seconds / 3, 10))
            spy = profile(chat_pid, args.profile, raw)
        await asyncio.gather(
            *(
                v.write(until, args.every_s, args.every_s * i / chats)
                for i, v in enumerate(visitors)
            )
        )
        await asyncio.sleep(min(REPLY_WITHIN_S, 5.0))  # the last replies start
        wall = time.monotonic() - began
        after = {"chat": tree_cpu_s(chat_pid), "call_log": tree_cpu_s(log_pid)}
        cores = {
            k: round(((after[k] or 0) - (before[k] or 0)) / wall, 2) for k in ("chat", "call_log")
        } | {"bench": round((self_cpu_s() - mine) / wall, 2)}
        if spy is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                spy.wait(args.profile + 30)
            if args.profile_dir is not None and raw.exists():
                args.profile_dir.mkdir(parents=True, exist_ok=True)
                shutil.copy(raw, args.profile_dir / raw.name)
        await asyncio.gather(*(v.close() for v in visitors))
    starts = [s - args.first_s for v in visitors for s in v.starts]
    unanswered = sum(len(v.sent) for v in visitors)
    failed = sum((v.failed for v in visitors), collections.Counter())
    return {
        "chats": chats,
        "messages": len(starts) + unanswered,
        "per_s": round((len(starts) + unanswered) / args.seconds, 1),
        "reply_start_ms": {
            "p50": round(pct(starts, 0.5) * 1000, 1),
            "p95": round(pct(starts, 0.95) * 1000, 1),
            "max": round(max(starts, default=math.nan) * 1000, 1),
        },
        "unanswered": unanswered,
        "failed": dict(failed),
        "dial_s": round(dialled, 1),
        "cores": cores,
        "loadavg": [round(x, 2) for x in os.getloadavg()],
        "profile": top_frames(raw),
    }


def render(report: dict[str, Any]) -> str:
    s = report["settings"]
    lines = [
        f"chats held by one chat replica, a message every {s['every_s']:g} s each for "
        f"{s['seconds']:g} s; reply start less the model fake's {s['first_s']:g} s "
        f"({os.cpu_count()} cores; loadavg before {report['loadavg_before']})",
        "",
        " chats  msgs/s  p50 ms  p95 ms  max ms  unanswered  failed  cores chat log bench  "
        "loadavg after",
    ]
    for r in report["steps"]:
        t, c = r["reply_start_ms"], r["cores"]
        lines.append(
            f"{r['chats']:>6}  {r['per_s']:6.1f}  {t['p50']:6.1f}  {t['p95']:6.1f}  "
            f"{t['max']:6.1f}  {r['unanswered']:>10}  {sum(r['failed'].values()):>6}  "
            f"{c['chat']:.2f} {c['call_log']:.2f} {c['bench']:.2f}   "
            + " ".join(f"{x:.2f}" for x in r["loadavg"])
        )
    if "stopped" in report:
        lines += ["", f"stopped: {report['stopped']}"]
    for r in report["steps"]:
        if r["profile"]:
            lines += ["", f"the chat replica's top frames at {r['chats']} chats (py-spy, self):"]
            lines += [f"  {share:6.1%}  {frame}" for frame, share in r["profile"]]
    return "\n".join(lines)


async def measure(bench: Bench, chat_url: str, args: argparse.Namespace) -> dict[str, Any]:
    report: dict[str, Any] = {"steps": []}
    for n, chats in enumerate(args.chats):
        row = await step(bench, chat_url, chats, args, n)
        report["steps"].append(row)
        log(f"{chats} chats: {row}")
        if row["unanswered"] or row["failed"]:
            report["stopped"] = f"{chats} chats: {row['unanswered']} messages unanswered"
            break
        if row["reply_start_ms"]["p95"] > args.stop_p95_s * 1000:
            report["stopped"] = (
                f"{chats} chats: reply start p95 {row['reply_start_ms']['p95']:.0f} ms, past "
                f"{args.stop_p95_s:g} s"
            )
            break
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chats", type=lambda t: [int(x) for x in t.split(",")],
                        default=[50, 200, 500], help="the steps' chats (50,200,500)")  # fmt: skip
    parser.add_argument(
        "--seconds", type=bounded(float, 1, 3600), default=60.0, help="each step's (60)"
    )
    parser.add_argument(
        "--every-s", type=bounded(float, 0.01, 600), default=5.0, help="a chat's message period (5)"
    )
    parser.add_argument(
        "--first-s", type=bounded(float, 0, 60), default=0.35, help="the model's first delta"
    )
    parser.add_argument(
        "--stop-p95-s", type=bounded(float, 0.001, 600), default=2.0, help="stop past this p95 (2)"
    )
    parser.add_argument(
        "--profile", type=bounded(float, 0, 3600), default=0.0, help="py-spy seconds per step"
    )
    parser.add_argument("--profile-dir", type=Path, help="keep py-spy's raw stacks here")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    loadavg = [round(x, 2) for x in os.getloadavg()]
    settings = Settings.from_env()
    with (
        ensure_platform(settings.database_url, settings.nats_url) as platform,
        bench_platform(platform) as bench,
    ):
        bench.app_key = bench.cli(
            "keys", "create", "--kind", "app", "--name", "bench", "--environment", "production"
        )
        vendors_port = free_port()
        vendors = bench.start(
            "vendors",
            "lab",
            "vendors",
            "--port",
            str(vendors_port),
            "--llm-ttft",
            str(args.first_s),
            port=vendors_port,
            ready="",
        )
        log_url = bench.start_replica("call-log", "call-log")
        put = httpx.put(
            f"{log_url}/v1/agents/{AGENT['name']}", params={"org": ORG}, json=AGENT,
            headers={"authorization": f"Bearer {bench.app_key}"},
        )  # fmt: skip
        put.raise_for_status()
        dispatcher_url = bench.start_dispatcher(log_url)
        chat_url = bench.start(
            "chat", "chat", "serve", "--workers", "1",
            env={
                "PINECALL_CALL_LOG_URL": log_url,
                "PINECALL_DISPATCHER_URL": dispatcher_url,
                "PINECALL_FLEET_KEYS": f"production={bench.fleet_key}",
                "PINECALL_SERVICE_KEY": bench.service_key,
                "PINECALL_CHAT_TOKEN_SECRET": "bench-secret-" + os.urandom(8).hex(),
                "PINECALL_ANTHROPIC_URL": vendors,
                "ANTHROPIC_API_KEY": "bench",
            },
        )  # fmt: skip
        report = asyncio.run(measure(bench, chat_url, args))
    report["settings"] = {
        k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items() if k != "json"
    }
    report["loadavg_before"] = loadavg
    print(json.dumps(report, indent=2) if args.json else render(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
