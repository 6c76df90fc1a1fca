"""What ``up`` runs, in the order it starts it, and the environment each process gets.

1. each environment's LiveKit (the load lab's stand-in, ``lab livekit``, its webhooks to
   webhook-ingest with ``?world=<environment>``), the vendor fakes (``lab vendors``) and Meta's
   WhatsApp Cloud API fake (``lab whatsapp``, its webhooks to the first chat replica; the chat
   replicas' ``PINECALL_WHATSAPP_GRAPH_URL``), started while the run's database is migrated
   (:func:`lab`);
2. roster (its fleets rows on each environment's stand-in) and call-log;
3. webhook-ingest, dispatcher and reaper, and the chat service's :data:`CHAT_REPLICAS` replicas
   (written calls: ``WS /v1/chat``, their model the vendor fakes' Anthropic);
4. per environment a worker of ``seats`` seats (lab rooms, the vendors' fakes) and the overflow,
   started with step 3 and ready after it (a worker takes longest to start: its imports, the
   forkserver's preload, LiveKit's registration) (:func:`platform`);
5. per environment two processes of the booking example's app holding the callers' agent, and a
   console holding it (``lab app``, each with its ledger; :func:`apps`), once call-log holds the
   agent's definition;
6. the callers (``lab callers``) and the chat visitors (``lab chats``), started by
   :mod:`pinecall_runtime.up.calls` once every fleet is heard and every app holds its agent
   (:mod:`pinecall_runtime.up.traffic`).

Every HTTP service listens on a free port (``PINECALL_PORT``); a worker's and an overflow's
health port too. Workers drain in ``DRAIN_S`` and seal in ``SEAL_S`` when ``up`` stops (their
callers have hung up by then), so stopping never waits for the seed's ten minutes. The reaper
looks every :data:`REAP_EVERY_S` and ends a chat quiet :data:`CHAT_QUIET_S` (not the seed's
minute and five minutes), so the visitors' chats end ``timeout`` and are sealed within the run.
"""

from __future__ import annotations

import dataclasses
import functools
import secrets
from dataclasses import dataclass
from pathlib import Path

from pinecall_runtime.up.callbacks import FOLLOWUP_ENV
from pinecall_runtime.up.stage import ENVIRONMENTS, Run
from pinecall_runtime.up.supervise import Supervised
from pinecall_servicekit.platform import free_port

DRAIN_S = 20
"""A worker's and an overflow's drain when ``up`` stops (``PINECALL_DRAIN_TIMEOUT_S``)."""
SEAL_S = 10
"""A worker's seal of what its drain left (``PINECALL_SEAL_TIMEOUT_S``)."""
RINGING_S = 6
"""How long an outbound call's phone rings before it is not reached
(``PINECALL_RINGING_TIMEOUT_S``; 30 s elsewhere): the run's unanswered number ends within it."""
CHAT_REPLICAS = 2
"""Replicas of the chat service, behind nothing: each visitor dials one (in turn) and, when its
socket is cut, the next with ``?call=``, so a written call taken up by another replica than the
one that opened it is the ordinary path, as it is in production behind a balancer."""
CHAT_QUIET_S = 10.0
"""``PINECALL_CHAT_QUIET_S`` of ``up``'s reaper: a chat quiet this long ends ``timeout`` (the
seed's five minutes would outlast most runs; a visitor writes again within 1-2 s)."""
REAP_EVERY_S = 2.0
"""``PINECALL_REAP_EVERY_S`` of ``up``'s reaper (a voice call is still reaped only after the
seed's five quiet minutes)."""
TIER = {"lab": 0, "store": 1, "control": 2, "workers": 3, "apps": 4, "callers": 5}
"""Stop order, highest first: callers, the apps (each drains: its calls have ended by then),
workers and overflows, the control plane, roster and call-log, then the stand-ins."""
EXAMPLE = Path(__file__).resolve().parents[4] / "examples" / "booking"
"""The booking example of the checkout ``up`` runs from: its app and its agent's definition."""
APPS_PER_ENVIRONMENT = 2
"""Processes of the example's app in each environment (beside one console)."""
CONSOLE = "pinecall_loadlab.apps.console:app"
"""The console's app (``takes_unclaimed=False``): it holds the agent, and is handed no call."""


@dataclass(frozen=True, kw_only=True)
class Urls:
    """Where each part of the run answers."""

    livekit: dict[str, str]
    """Environment → its stand-in's URL."""
    vendors: str
    roster: list[str]
    """Every roster replica's; workers beat to the first."""
    call_log: str
    webhook_ingest: str
    dispatcher: str
    reaper: str
    chat: list[str] = dataclasses.field(default_factory=list)
    """Every chat replica's (``chat``, ``chat-1``)."""
    page: str = ""
    """``examples/page`` served on loopback (:mod:`pinecall_runtime.up.page`)."""
    whatsapp: str = ""
    """The WhatsApp Cloud API fake's (``lab whatsapp``): the chat replicas' Graph URL."""
    s3: str = ""
    """The recordings' bucket's (``lab s3``, :mod:`pinecall_runtime.up.recordings`)."""

    def named(self) -> dict[str, str]:
        """Every part's URL by its process's name (``livekit-production``, ``roster``…)."""
        return (
            {f"livekit-{e}": u for e, u in self.livekit.items()}
            | {"vendors": self.vendors}
            | {("roster" if i == 0 else f"roster-{i}"): u for i, u in enumerate(self.roster)}
            | {
                "call-log": self.call_log,
                "webhook-ingest": self.webhook_ingest,
                "dispatcher": self.dispatcher,
                "reaper": self.reaper,
            }
            | {("chat" if i == 0 else f"chat-{i}"): u for i, u in enumerate(self.chat)}
            | ({"page": self.page} if self.page else {})
            | ({"whatsapp": self.whatsapp} if self.whatsapp else {})
            | ({"s3": self.s3} if self.s3 else {})
        )


def urls(roster_replicas: int = 1) -> Urls:
    """A free port for each part (picked now; each process binds its own)."""

    def url() -> str:
        return f"http://127.0.0.1:{free_port()}"

    return Urls(
        livekit={e: url() for e in ENVIRONMENTS},
        vendors=url(),
        roster=[url() for _ in range(roster_replicas)],
        call_log=url(),
        webhook_ingest=url(),
        dispatcher=url(),
        reaper=url(),
        chat=[url() for _ in range(CHAT_REPLICAS)],
        page=url(),
        whatsapp=url(),
        s3=url(),
    )


def _port(url: str) -> str:
    return url.rsplit(":", 1)[1]


def _process(
    run: Run, name: str, args: list[str], env: dict[str, str], url: str, ready: str, tier: str
) -> Supervised:
    return Supervised(
        name=name,
        args=args,
        env=run.env() | {"PINECALL_LOG_LEVEL": "INFO"} | env,
        log=run.logs / f"{name}.log",
        url=url,
        ready=ready,
        tier=TIER[tier],
        grace_s=DRAIN_S + SEAL_S + 15 if tier == "workers" else 30,
    )


def evals_env(vendors: str) -> dict[str, str]:
    """The dispatcher's simulated caller (``POST /v1/evals/voice``): the workers' voice and ears
    (the vendor fakes) and their rooms (the lab transport)."""
    return {
        "PINECALL_LAB_ROOMS": "true",
        "PINECALL_CARTESIA_URL": vendors,
        "CARTESIA_API_KEY": "lab",
        "PINECALL_DEEPGRAM_URL": f"{vendors}/v1/listen",
        "DEEPGRAM_API_KEY": "lab",
    }


def lab(run: Run, at: Urls, *, tool_share: float) -> list[Supervised]:
    """Step 1: each environment's stand-in (its webhooks to webhook-ingest) and the vendor
    fakes, whose model asks a tool on ``tool_share`` of the turns; they need no database, so
    they start while the migrations run."""
    process = functools.partial(_process, run)
    lab = []
    for e, (key, secret) in run.livekit_keys.items():
        webhook = f"{at.webhook_ingest}/v1/livekit/webhook?world={e}"
        args = ["lab", "livekit", "--port", _port(at.livekit[e]), "--keys", f"{key}:{secret}"]
        lab.append(
            process(f"livekit-{e}", [*args, "--webhook", webhook], {}, at.livekit[e], "", "lab")
        )
    vendors = ["lab", "vendors", "--port", _port(at.vendors), "--tool-share", str(tool_share)]
    lab.append(process("vendors", vendors, {}, at.vendors, "", "lab"))
    if at.whatsapp and at.chat:  # Meta's side of the written calls: its webhooks to a replica
        hook = f"{at.chat[0]}/v1/whatsapp/webhook"
        args = ["lab", "whatsapp", "--port", _port(at.whatsapp), "--webhook", hook]
        lab.append(process("whatsapp", args, {}, at.whatsapp, "", "lab"))
    page = process("page", ["--port", _port(at.page)], {}, at.page, "/", "lab")
    lab.append(dataclasses.replace(page, module="pinecall_runtime.up.page"))
    return lab


def platform(
    run: Run, at: Urls, *, seats: int
) -> tuple[list[Supervised], list[Supervised], list[Supervised], list[Supervised]]:
    """Steps 2 to 4 (the run's keys made): roster and call-log; webhook-ingest, dispatcher and
    reaper; each environment's worker and overflow; the chat replicas (started once the workers
    are ready: their imports would compete with the workers' job processes warming up)."""
    process = functools.partial(_process, run)
    keys = run.livekit_keys_setting()
    urls = ",".join(f"{e}={u}" for e, u in at.livekit.items())

    def http(name: str, service: str, url: str, env: dict[str, str], tier: str) -> Supervised:
        served = process(
            name, [service, "serve"], env | {"PINECALL_PORT": _port(url)}, url, "/readyz", tier
        )
        served.group = True  # Granian: the server and its worker processes
        return served

    store = [
        http("roster" if i == 0 else f"roster-{i}", "roster", url,
             {"LIVEKIT_URL": at.livekit["production"], "PINECALL_LIVEKIT_URLS": urls}, "store")
        for i, url in enumerate(at.roster)
    ]  # fmt: skip
    store.append(http("call-log", "call-log", at.call_log,
                      {"PINECALL_LOG_TOKEN_SECRET": secrets.token_urlsafe(32)}, "store"))  # fmt: skip
    # the services' own key, never the operator's: they read the roster (over NATS) and
    # call-log with it
    service = {"PINECALL_SERVICE_KEY": run.service_key, "PINECALL_CALL_LOG_URL": at.call_log}
    control = [
        http("webhook-ingest", "webhook-ingest", at.webhook_ingest,
             {"PINECALL_LIVEKIT_KEYS": keys}, "control"),
        http("dispatcher", "dispatcher", at.dispatcher,
             service | {"PINECALL_LIVEKIT_KEYS": keys} | evals_env(at.vendors) | FOLLOWUP_ENV,
             "control"),
        http("reaper", "reaper", at.reaper,
             service | {"PINECALL_LIVEKIT_KEYS": keys, "PINECALL_LIVEKIT_URLS": urls,
                        "PINECALL_REAP_EVERY_S": str(REAP_EVERY_S),
                        "PINECALL_CHAT_QUIET_S": str(CHAT_QUIET_S)}, "control"),
    ]  # fmt: skip
    # written calls: opened, written and their tools run with each environment's fleet key (as
    # that environment's worker does); one token secret, so any replica takes up any chat
    chat = (
        service
        | {
            "PINECALL_DISPATCHER_URL": at.dispatcher,
            "PINECALL_FLEET_KEYS": ",".join(f"{e}={k}" for e, k in run.fleet_keys.items()),
            "PINECALL_CHAT_TOKEN_SECRET": secrets.token_urlsafe(32),
            "PINECALL_ANTHROPIC_URL": at.vendors,
            "ANTHROPIC_API_KEY": "lab",
        }
        | ({"PINECALL_WHATSAPP_GRAPH_URL": at.whatsapp} if at.whatsapp else {})
    )
    chats = [
        http("chat" if i == 0 else f"chat-{i}", "chat", url, chat, "control")
        for i, url in enumerate(at.chat)
    ]
    workers = []
    for e, fleet in ENVIRONMENTS.items():
        key, secret = run.livekit_keys[e]
        livekit = {
            "PINECALL_FLEET": fleet,
            "PINECALL_FLEET_KEY": run.fleet_keys[e],
            "PINECALL_CALL_LOG_URL": at.call_log,
            "PINECALL_LAB_ROOMS": "true",
            "PINECALL_DRAIN_TIMEOUT_S": str(DRAIN_S),
            "PINECALL_RINGING_TIMEOUT_S": str(RINGING_S),
            "PINECALL_CARTESIA_URL": at.vendors,
            "CARTESIA_API_KEY": "lab",
            "LIVEKIT_URL": at.livekit[e],
            "LIVEKIT_API_KEY": key,
            "LIVEKIT_API_SECRET": secret,
        }
        health = f"http://127.0.0.1:{free_port()}"
        workers.append(
            process(
                f"worker-{e}",
                ["worker", "start"],
                livekit
                | {
                    "PINECALL_MAX_JOBS": str(seats),
                    "PINECALL_WORKER_HOST": "up",
                    "PINECALL_ROSTER_URL": at.roster[0],
                    "PINECALL_HEALTH_PORT": _port(health),
                    "PINECALL_MEASURES_SOCKET": str(run.sockets / f"{e}.sock"),
                    "PINECALL_RELAY_SOCKET": str(run.sockets / f"{e}-relay.sock"),
                    "PINECALL_SEAL_TIMEOUT_S": str(SEAL_S),
                    "PINECALL_DEEPGRAM_URL": f"{at.vendors}/v1/listen",
                    "PINECALL_ANTHROPIC_URL": at.vendors,
                    "DEEPGRAM_API_KEY": "lab",
                    "ANTHROPIC_API_KEY": "lab",
                },
                health,
                "/readyz",
                "workers",
            )
        )
        health = f"http://127.0.0.1:{free_port()}"
        workers.append(
            process(
                f"overflow-{e}",
                ["overflow", "start"],
                livekit | {"PINECALL_HEALTH_PORT": _port(health)},
                health,
                "/healthz",
                "workers",
            )
        )
    return store, control, workers, chats


def apps(run: Run, at: Urls, ledgers: Path, *, agent: str, org: str) -> list[Supervised]:
    """Step 5: per environment :data:`APPS_PER_ENVIRONMENT` processes of the booking example's
    app (``booking-<environment>-<n>``) and a console (``console-<environment>``), each ``lab
    app`` with the environment's app key, its ledger ``ledgers/<instance>.jsonl``, its log
    ``<instance>.log``. No probe: :func:`pinecall_runtime.up.apps.wait_held` reads the
    ledgers. Each runs as ``python -m pinecall_loadlab.apps`` (``lab app`` without the CLI's
    other commands: started again after a kill, it imports only the SDK, in a fraction of the
    CLI's time)."""
    made = []
    for e in ENVIRONMENTS:
        key = run.app_keys[e]
        example = {"BOOKING_URL": at.call_log, "BOOKING_KEY": key, "BOOKING_ORG": org}
        console = {
            "CONSOLE_URL": at.call_log, "CONSOLE_KEY": key, "CONSOLE_ORG": org,
            "CONSOLE_AGENT": agent, "CONSOLE_INSTANCE": f"console-{e}",
        }  # fmt: skip
        started = [
            (f"booking-{e}-{n}", ["app:app", "--app-dir", str(EXAMPLE)],
             example | {"BOOKING_INSTANCE": f"booking-{e}-{n}"})
            for n in range(1, APPS_PER_ENVIRONMENT + 1)
        ]  # fmt: skip
        started.append((f"console-{e}", [CONSOLE], console))
        for name, target, env in started:
            made.append(
                Supervised(
                    name=name,
                    module="pinecall_loadlab.apps",
                    args=[*target, "--ledger", str(ledgers / f"{name}.jsonl")],
                    env=run.env() | env,
                    log=run.logs / f"{name}.log",
                    tier=TIER["apps"],
                )
            )
    return made


def prometheus(run: Run, targets: list[Supervised], folder: Path) -> Supervised:
    """``up --prometheus``: Debian's Prometheus scraping ``targets`` (the processes that serve
    ``/metrics``) every second with the alert rules loaded
    (:mod:`pinecall_runtime.monitoring.prometheus`), its data in ``folder``; stopped with the
    stand-ins, after everything it scrapes."""
    from pinecall_runtime.monitoring import prometheus as p

    url = f"http://127.0.0.1:{free_port()}"
    config = p.prepare(folder, [(t.name, t.url) for t in targets if t.url])
    served = _process(
        run, "prometheus", p.args(config, url.split("://")[1]), {}, url, "/-/ready", "lab"
    )
    return dataclasses.replace(served, module=p.__name__)
