"""WhatsApp webhooks one chat replica takes (issue 17, acceptance 8): the WhatsApp Cloud API fake
delivering signed webhooks at a rising rate, every message written once and answered once. Not a
test: nothing asserts a time.

Setup (``benchkit.py``): the running Postgres and NATS (or embedded ones), a database and NATS
namespace of the run's own; as processes (``serve --workers 1`` each): one call-log replica, the
dispatcher (a written call's admission: the org's quota, set to ``--quota``), one chat replica,
and the vendor fakes (``lab vendors``: Anthropic's first text delta after ``--first-s``, 0.35 s);
the agent ``bench`` held by an app (``tool_app.py`` under ``pinecall start``, dialled to call-log:
the replica answers, it does not wait); in this process the WhatsApp fake
(:class:`~pinecall_loadlab.whatsapp.WhatsAppFake`: signed webhooks, ``--in-flight`` POSTs at once,
retried until a 2xx; its Graph messages endpoint takes the replies and sends each one's statuses,
sent, delivered and read, as three more webhooks), its business number put for ``bench``.

For each rate R of ``--rates`` (messages a second), ``--seconds`` long: ``--contacts`` contacts
write in turn, a message every 1/R s, open loop (each at its time, whatever the replica did with
the ones before); a contact's first message opens its thread (admission, a call opened), the next
ones go to it. Measured per step, by the fake: webhooks a second offered (messages and the
replies' statuses) and acknowledged (200), the POST's round trip to its 200 (ack p50/p99/max),
how long webhooks queued in the fake (past ``--in-flight``, the fake and not the replica is
behind), replies a second (the Graph endpoint's sends), the backlog at the step's end (messages
not yet answered), the WhatsApp stream's items not yet processed and its consumer's redeliveries;
the CPU of each process and the machine; the load average. A step that does
not keep up (more than a second's webhooks not yet acknowledged at its end, ack p99 past ``--stop-ack-p99-ms``, or a backlog
of more than ``--stop-backlog-s`` seconds of messages) ends the ramp: that rate is where one
replica stops keeping up; with ``--profile S`` py-spy samples the replica for S seconds in each
step and its top frames say why.

At the end (once every message is answered, or ``--drain-s`` passed) every thread's log is read
back from call-log: each message must have one ``turn.user`` and one ``turn.agent`` (its
``reply_to``), the fake one reply per message, and each reply its statuses once; a double or a
loss fails the run (exit 1).

    .venv/bin/python bench/whatsapp_webhooks.py [--rates 5,10,20,40] [--seconds 20] [--profile 8]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import nats
from benchkit import Bench, bench_platform, bounded, log, machine_busy_s, self_cpu_s, tree_cpu_s
from chat_replica import pct, profile, top_frames

from pinecall_contracts.agents import AgentDefinition, AgentTool
from pinecall_contracts.appsocket import Holding
from pinecall_contracts.base import decode, encode
from pinecall_contracts.subjects import Subjects
from pinecall_loadlab.whatsapp import WhatsAppConfig, WhatsAppFake
from pinecall_servicekit.platform import ensure_platform, free_port
from pinecall_servicekit.settings import Settings

HERE = Path(__file__).resolve().parent
ORG = "org_bench"
AGENT = AgentDefinition(
    name="bench",
    prompt="You answer WhatsApp messages. Be brief.",
    tools=[AgentTool(name="echo", description="Say the arguments back.", timeout_s=10)],
)
"""The app (``tool_app.py``) holds it; the model fake asks no tool."""
STATUSES = ("sent", "delivered", "read")


@dataclass
class Sent:
    """What this run sent: each message's wamid → (contact, step, delivery id)."""

    messages: dict[str, tuple[str, int]] = field(default_factory=dict)
    by_contact: collections.Counter[str] = field(default_factory=collections.Counter)


def contact_id(n: int) -> str:
    return f"3460{n:07d}"


async def held(nats_url: str, namespace: str, within_s: float = 60.0) -> None:
    """Once call-log says (``apps.holding``) that the app holds ``bench``, and two announcements
    more, so the chat replica heard it too."""
    client = await nats.connect(nats_url)
    heard = asyncio.Event()

    async def on(msg: Any) -> None:
        if ("production", ORG, AGENT.name) in decode(msg.data, Holding).agents:
            heard.set()

    try:
        await client.subscribe(Subjects(namespace).apps_holding, cb=on)
        await asyncio.wait_for(heard.wait(), within_s)
    finally:
        await client.close()
    await asyncio.sleep(2.0)  # two announce periods (1 s): the chat replica has heard it


async def delete_streams(nats_url: str, namespace: str) -> None:
    """Delete the run's own JetStream streams (``<namespace>_…``: the WhatsApp work queue among
    them), best effort, once its services are stopped."""
    client = await nats.connect(nats_url, connect_timeout=2, allow_reconnect=False)
    try:
        js = client.jetstream()
        for info in await js.streams_info():
            if info.config.name and info.config.name.startswith(f"{namespace}_"):
                await js.delete_stream(info.config.name)
                log(f"NATS stream {info.config.name} deleted")
    finally:
        await client.close()


async def stream_state(js: Any, namespace: str) -> dict[str, int]:
    """The WhatsApp stream's items not yet processed (``held``: a work queue keeps an item until
    it is acknowledged) and its consumer's: fetched and not acknowledged (``in_hand``), given
    again (``redelivered``: an item behind its thread's first, or a nak), not yet fetched."""
    subjects = Subjects(namespace)
    stream = await js.stream_info(subjects.whatsapp_stream)
    consumer = await js.consumer_info(subjects.whatsapp_stream, subjects.whatsapp_consumer)
    return {
        "held": int(stream.state.messages),
        "in_hand": int(consumer.num_ack_pending or 0),
        "redelivered": int(consumer.num_redelivered or 0),
        "not_fetched": int(consumer.num_pending or 0),
    }


def cores(pids: dict[str, int]) -> dict[str, float | None]:
    return {name: tree_cpu_s(pid) for name, pid in pids.items()}


async def step(
    bench: Bench, fake: WhatsAppFake, js: Any, sent: Sent, rate: float, n: int,
    args: argparse.Namespace,
) -> dict[str, Any]:  # fmt: skip
    pids = {name: proc.pid for name, (_, proc) in bench.replicas.items()}
    hooks = fake.webhooks
    made0, attempts0, sent0 = len(hooks.made), len(hooks.attempts), len(fake.sent)
    before, busy, mine = cores(pids), machine_busy_s(), self_cpu_s()
    loop = asyncio.get_running_loop()
    began = loop.time() + 0.05
    count = int(rate * args.seconds)
    raw = bench.workdir / f"profile-{n}.txt"
    spy = None
    late: list[float] = []
    for i in range(count):
        due = began + i / rate
        if args.profile and spy is None and due - began >= args.seconds / 4:
            spy = profile(bench.replicas["chat"][1].pid, args.profile, raw)
        await asyncio.sleep(max(0.0, due - loop.time()))
        late.append(loop.time() - due)
        who = contact_id(len(sent.messages) % args.contacts)
        delivery = fake.contact(who, name=f"Contact {who}").send(f"table for two? ({i})")
        value = delivery.payload["entry"][0]["changes"][0]["value"]
        sent.messages[value["messages"][0]["id"]] = (who, n)
        sent.by_contact[who] += 1
    await asyncio.sleep(max(0.0, began + args.seconds - loop.time()))
    wall = loop.time() - began
    after, busy_after, mine_after = cores(pids), machine_busy_s(), self_cpu_s()
    attempts = hooks.attempts[attempts0:]
    acked = [a for a in attempts if a.status is not None and 200 <= a.status < 300]
    took = [a.took_s for a in acked]
    queued = [a.queued_s for a in attempts]
    pending = len(hooks.made) - len(set(hooks.delivered))
    stream = await stream_state(js, bench.namespace)
    answered = len(fake.sent) - sent0
    backlog = len(sent.messages) - len(fake.sent)
    cpu = {
        k: round(((after[k] or 0.0) - (before[k] or 0.0)) / wall, 2) for k in pids
    } | {
        "bench": round((mine_after - mine) / wall, 2),
        "machine": round(((busy_after or 0.0) - (busy or 0.0)) / wall, 2),
    }  # fmt: skip
    if spy is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            await asyncio.to_thread(spy.wait, args.profile + 30)
        if args.profile_dir is not None and raw.exists():
            args.profile_dir.mkdir(parents=True, exist_ok=True)
            shutil.copy(raw, args.profile_dir / f"whatsapp-{raw.name}")
    refused = collections.Counter(
        str(a.status) for a in attempts if a.status is None or not 200 <= a.status < 300
    )
    return {
        "rate": rate,
        "messages": count,
        "webhooks_offered_per_s": round((len(hooks.made) - made0) / wall, 1),
        "webhooks_acked_per_s": round(len(acked) / wall, 1),
        "not_acked": dict(refused),
        "webhooks_pending": pending,
        "ack_ms": {
            "p50": round(pct(took, 0.5) * 1000, 1),
            "p99": round(pct(took, 0.99) * 1000, 1),
            "max": round(max(took, default=float("nan")) * 1000, 1),
        },
        "queued_in_fake_ms_p99": round(pct(queued, 0.99) * 1000, 1),
        "answered_per_s": round(answered / wall, 1),
        "backlog": backlog,
        "stream": stream,
        "driver_late_ms_p99": round(pct(late, 0.99) * 1000, 1),
        "cores": cpu,
        "loadavg": [round(x, 2) for x in os.getloadavg()],
        "profile": top_frames(raw),
    }


def kept_up(row: dict[str, Any], args: argparse.Namespace) -> str | None:
    """Why the step did not keep up, or None when it did."""
    if row["webhooks_pending"] > max(10.0, row["webhooks_offered_per_s"]):
        return (
            f"{row['rate']:g} messages/s: {row['webhooks_pending']} webhooks not acknowledged "
            f"at the step's end ({row['webhooks_acked_per_s']:g}/s acknowledged of "
            f"{row['webhooks_offered_per_s']:g} offered)"
        )
    if row["ack_ms"]["p99"] > args.stop_ack_p99_ms:
        return f"{row['rate']:g} messages/s: ack p99 {row['ack_ms']['p99']:.0f} ms"
    if row["backlog"] > args.stop_backlog_s * row["rate"]:
        return (
            f"{row['rate']:g} messages/s: {row['backlog']} messages unanswered at the step's "
            f"end (answered {row['answered_per_s']:g}/s)"
        )
    return None


async def drain(
    fake: WhatsAppFake, js: Any, namespace: str, sent: Sent, args: argparse.Namespace
) -> float:
    """Seconds until every message was answered, every webhook made was acknowledged (the
    replies' statuses too) and the WhatsApp stream holds nothing (each item processed), or
    ``--drain-s``."""
    began = time.monotonic()
    want_statuses = 0 if args.no_statuses else len(STATUSES)
    hooks = fake.webhooks
    while time.monotonic() - began < args.drain_s:
        if (
            len(fake.sent) >= len(sent.messages)
            and len(hooks.made) >= len(sent.messages) + want_statuses * len(fake.sent)
            and len(set(hooks.delivered)) >= len(hooks.made)
            and not (await stream_state(js, namespace))["held"]
        ):
            break
        await asyncio.sleep(0.5)  # progress polled: the fake says nothing when all is done
    return time.monotonic() - began


async def read_back(
    log_url: str, operator_key: str, number: str, fake: WhatsAppFake, sent: Sent, statuses: bool
) -> dict[str, Any]:
    """Every thread's log, from call-log: each message written once and answered once."""
    users: collections.Counter[str] = collections.Counter()
    agents: collections.Counter[str] = collections.Counter()
    status_seen: collections.Counter[tuple[str, str]] = collections.Counter()
    threads: collections.Counter[str] = collections.Counter()
    gate = asyncio.Semaphore(16)
    headers = {"authorization": f"Bearer {operator_key}"}
    async with httpx.AsyncClient(base_url=log_url, headers=headers, timeout=60) as http:

        async def thread(contact: str) -> None:
            ordinal = 1
            while True:
                call = f"wa:{number}:{contact}:{ordinal}"
                async with gate:
                    got = await http.get(f"/v1/calls/{call}/entries")
                if got.status_code == 404:
                    return
                got.raise_for_status()
                threads[contact] += 1
                for e in got.json()["entries"]:
                    data: dict[str, str] = e.get("data") or {}
                    if e["kind"] == "turn.user":
                        users[data.get("message", "")] += 1
                    elif e["kind"] == "turn.agent":
                        agents[data.get("reply_to", "")] += 1
                    elif e["kind"] == "message.status":
                        status_seen[(data.get("message", ""), data.get("status", ""))] += 1
                ordinal += 1

        await asyncio.gather(*(thread(c) for c in sent.by_contact))
    replies = collections.Counter(m.to for m in fake.sent)
    ours = set(sent.messages)
    return {
        "messages": len(ours),
        "threads": sum(threads.values()),
        "written_twice": sum(1 for m in ours if users[m] > 1),
        "not_written": sum(1 for m in ours if users[m] == 0),
        "answered_twice": sum(1 for m in ours if agents[m] > 1),
        "not_answered": sum(1 for m in ours if agents[m] == 0),
        "written_not_ours": sum(1 for m in users if m not in ours),
        "replies_sent": len(fake.sent),
        "contacts_replied_more_than_written": sum(
            1 for c, k in replies.items() if k > sent.by_contact[c]
        ),
        "statuses_twice": sum(1 for k in status_seen.values() if k > 1),
        "statuses_missing": (
            sum(1 for m in fake.sent for s in STATUSES if status_seen[(m.id, s)] == 0)
            if statuses
            else 0
        ),
    }


def failures(check: dict[str, Any]) -> int:
    return sum(v for k, v in check.items() if k not in ("messages", "threads", "replies_sent"))


async def measure(
    bench: Bench, fake: WhatsAppFake, log_url: str, args: argparse.Namespace
) -> dict[str, Any]:
    await held(bench.platform.nats_url, bench.namespace)
    sent = Sent()
    report: dict[str, Any] = {"steps": []}
    client = await nats.connect(bench.platform.nats_url)
    try:
        js = client.jetstream()
        for n, rate in enumerate(args.rates):
            row = await step(bench, fake, js, sent, rate, n, args)
            report["steps"].append(row)
            log(f"{rate:g} messages/s: {row}")
            why = kept_up(row, args)
            if why is not None:
                report["stopped"] = why
                break
        report["drain_s"] = round(await drain(fake, js, bench.namespace, sent, args), 1)
    finally:
        await client.close()
    report["given_up"] = len(fake.webhooks.given_up)
    report["check"] = await read_back(
        log_url, bench.operator_key, fake.number, fake, sent, not args.no_statuses
    )
    report["failures"] = failures(report["check"])
    return report


def render(report: dict[str, Any]) -> str:
    s = report["settings"]
    lines = [
        f"WhatsApp webhooks one chat replica takes: {s['contacts']} contacts, {s['seconds']:g} s "
        f"a step, the model fake's first delta {s['first_s']:g} s, statuses "
        f"{'off' if s['no_statuses'] else 'on'}, {s['in_flight']} POSTs in flight "
        f"({os.cpu_count()} cores; loadavg before {report['loadavg_before']})",
        "",
        " msgs/s  hooks/s offered  acked  pending  ack p50 ms  p99 ms  max ms  queued p99 ms  "
        "answered/s  backlog  stream held/redelivered  cores chat log disp model app bench machine  loadavg after",
    ]
    for r in report["steps"]:
        t, c = r["ack_ms"], r["cores"]
        lines.append(
            f"{r['rate']:>7g}  {r['webhooks_offered_per_s']:>15.1f}  {r['webhooks_acked_per_s']:>5.1f}"
            f"  {r['webhooks_pending']:>7}  {t['p50']:>10.1f}  {t['p99']:>6.1f}  {t['max']:>6.1f}  "
            f"{r['queued_in_fake_ms_p99']:>13.1f}  {r['answered_per_s']:>10.1f}  "
            f"{r['backlog']:>7}  {r['stream']['held']:>10}/{r['stream']['redelivered']:<11}  "
            + " ".join(
                f"{c.get(k, 0.0):.2f}"
                for k in ("chat", "call-log", "dispatcher", "vendors", "app", "bench", "machine")
            )
            + "   "
            + " ".join(f"{x:.2f}" for x in r["loadavg"])
        )
    lines += ["", f"stopped: {report.get('stopped', 'no: every step kept up')}"]
    c = report["check"]
    lines += [
        f"read back after {report['drain_s']} s of drain: {c['messages']} messages in "
        f"{c['threads']} threads; written twice {c['written_twice']}, not written "
        f"{c['not_written']}, answered twice {c['answered_twice']}, not answered "
        f"{c['not_answered']}; replies sent {c['replies_sent']}; statuses twice "
        f"{c['statuses_twice']}, missing {c['statuses_missing']}; webhooks given up "
        f"{report['given_up']} -> {'FAILED' if report['failures'] else 'every message once'}"
    ]
    for r in report["steps"]:
        if r["profile"]:
            lines += [
                "",
                f"the chat replica's top frames at {r['rate']:g} messages/s (py-spy, self):",
            ]
            lines += [f"  {share:6.1%}  {frame}" for frame, share in r["profile"]]
    return "\n".join(lines)


async def run(bench: Bench, args: argparse.Namespace, log_url: str) -> dict[str, Any]:
    config = WhatsAppConfig(
        port=0, in_flight=args.in_flight, pair_interval_s=args.pair_interval_s,
        retry_min_s=0.5, retry_max_s=5.0,
    )  # fmt: skip
    async with WhatsAppFake(config) as fake:
        if args.no_statuses:
            fake.statuses = ()
        body = {
            "agent": AGENT.name, "verify_token": "bench-verify-token",
            "app_secret": config.app_secret, "access_token": config.access_token,
        }  # fmt: skip
        async with httpx.AsyncClient(timeout=30) as http:
            put = await http.put(
                f"{log_url}/v1/whatsapp/numbers/{fake.number}", json=body, params={"org": ORG},
                headers={"authorization": f"Bearer {bench.app_key}"},
            )  # fmt: skip
            put.raise_for_status()

        def start_chat() -> str:
            return bench.start(
                "chat", "chat", "serve", "--workers", "1",
                env={
                    "PINECALL_CALL_LOG_URL": log_url,
                    "PINECALL_DISPATCHER_URL": bench.replicas["dispatcher"][0],
                    "PINECALL_FLEET_KEYS": f"production={bench.fleet_key}",
                    "PINECALL_SERVICE_KEY": bench.service_key,
                    "PINECALL_CHAT_TOKEN_SECRET": "bench-secret-" + os.urandom(8).hex(),
                    "PINECALL_ANTHROPIC_URL": bench.replicas["vendors"][0],
                    "ANTHROPIC_API_KEY": "bench",
                    "PINECALL_WHATSAPP_GRAPH_URL": fake.url,
                    "PINECALL_WHATSAPP_PAIR_INTERVAL_S": str(args.pair_interval_s),
                },
            )  # fmt: skip

        chat_url = await asyncio.to_thread(start_chat)
        fake.set_webhook_url(f"{chat_url}/v1/whatsapp/webhook")
        return await measure(bench, fake, log_url, args)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rates", type=lambda t: [float(x) for x in t.split(",")],
                        default=[5.0, 10.0, 20.0, 40.0],
                        help="the steps' messages a second (5,10,20,40)")  # fmt: skip
    parser.add_argument(
        "--seconds", type=bounded(float, 0.1, 3600), default=20.0, help="each step's (20)"
    )
    parser.add_argument("--contacts", type=int, default=300, help="contacts writing in turn (300)")
    parser.add_argument("--in-flight", type=int, default=64, help="the fake's POSTs at once (64)")
    parser.add_argument(
        "--first-s", type=bounded(float, 0, 60), default=0.35, help="the model's first delta"
    )
    parser.add_argument("--pair-interval-s", type=bounded(float, 0, 3600), default=0.0,
                        help="Meta's pair rate, the fake's and the replica's (0: none)")  # fmt: skip
    parser.add_argument("--no-statuses", action="store_true", help="replies get no statuses")
    parser.add_argument("--quota", type=int, default=100_000, help="the org's concurrent calls")
    parser.add_argument("--stop-ack-p99-ms", type=bounded(float, 0.001, 3_600_000), default=1000.0)
    parser.add_argument("--stop-backlog-s", type=bounded(float, 0, 3600), default=5.0,
                        help="stop past this many seconds of messages unanswered (5)")  # fmt: skip
    parser.add_argument(
        "--drain-s", type=bounded(float, 0, 3600), default=60.0, help="at most, at the end (60)"
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
        try:
            report = serve_and_measure(bench, args)
        finally:
            bench.stop_replicas()
            try:
                asyncio.run(delete_streams(platform.nats_url, bench.namespace))
            except Exception as exc:  # nats-py raises a handful of unrelated types here
                log(f"NATS: the run's streams were not deleted: {exc}")
    report["settings"] = {
        k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items() if k != "json"
    }
    report["loadavg_before"] = loadavg
    print(json.dumps(report, indent=2) if args.json else render(report))
    return 1 if report["failures"] else 0


def serve_and_measure(bench: Bench, args: argparse.Namespace) -> dict[str, Any]:
    """The services, each a process, and the measurement in this process's loop."""
    bench.app_key = bench.cli(
        "keys", "create", "--kind", "app", "--name", "bench", "--environment", "production"
    )
    bench.cli("dispatcher", "quota", "set", ORG, "--concurrent-calls", str(args.quota))
    vendors_port = free_port()
    bench.start(
        "vendors", "lab", "vendors", "--port", str(vendors_port),
        "--llm-ttft", str(args.first_s), port=vendors_port, ready="",
    )  # fmt: skip
    log_url = bench.start_replica("call-log", "call-log")
    put = httpx.put(
        f"{log_url}/v1/agents/{AGENT.name}", params={"org": ORG}, content=encode(AGENT),
        headers={"authorization": f"Bearer {bench.app_key}",
                 "content-type": "application/json"},
    )  # fmt: skip
    put.raise_for_status()
    bench.start_dispatcher(log_url)
    env = bench.env | {
        "TOOL_APP_URL": log_url, "TOOL_APP_KEY": bench.app_key, "TOOL_APP_ORG": ORG,
        "TOOL_APP_AGENT": encode(AGENT).decode(),
    }  # fmt: skip
    with (bench.workdir / "app.log").open("wb") as out:
        app = subprocess.Popen(
            [sys.executable, "-m", "pinecall", "start", "tool_app:app", "--app-dir",
             str(HERE)], env=env, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    bench.replicas["app"] = ("", app)  # its CPU counted; stopped with the replicas
    return asyncio.run(run(bench, args, log_url))


if __name__ == "__main__":
    sys.exit(main())
