"""``pinecall-runtime up``: the whole platform on one machine, and callers who speak to it.

In order (issue 8, "The whole platform on one machine"): Postgres and NATS (the running ones, or
embedded ones), a database and a namespace of the run's own with every migration and its keys
(:mod:`~pinecall_runtime.up.stage`), then every process of :mod:`~pinecall_runtime.up.services`
(the stand-ins and the vendor fakes, roster and call-log, webhook-ingest, dispatcher and reaper, a
worker and the overflow per environment), each ready before the next group starts and each logging
to ``<state dir>/logs/<name>.log``; once call-log is ready, the callers' agent is defined in every
environment (:func:`~pinecall_runtime.up.calls.define_agent`: the booking example's agent, with its
tools) and the example's app holds it there: two processes and a console per environment
(:func:`pinecall_runtime.up.services.apps`). Once every fleet is heard and every app holds its
agent, the callers (``lab callers``) ring at ``--rate`` until ``--calls`` were placed; the model
fake asks a tool on ``--tool-share`` of the turns, so the calls' tools go worker → call-log → app
socket → app → back, and the model says the answer. With ``--chats N``, N visitors chat with the
same agent over the chat service's ``WS /v1/chat`` (``lab chats``,
:mod:`~pinecall_runtime.up.written`), dialling its replicas again with ``?call=`` when cut; the
reaper ends each chat ``timeout`` once quiet, and its log is read back and verified as a voice
call's.

While it runs (:mod:`~pinecall_runtime.up.calls`): a live table every ``--every`` s
(:class:`~pinecall_runtime.up.watch.Watch`), a process that dies started again,
``<state dir>/up.json`` and ``keys.json`` for the CLI; with ``--app-restarts N`` an app process SIGKILLed
every N s (:func:`pinecall_runtime.up.apps.killing`) and started again. Ctrl-C or SIGTERM (or
``--duration``, or ``--exit-when-done`` once the last call ended): the callers hang up, the calls'
logs are sealed, the report is read (``--report``), every process stops, tier by tier (workers
drain), the state files are removed, and the run's database and namespace go. Exit 1 when the
report names a problem (a silent caller, a log that did not verify, a tool call run twice, a chat
message never answered).

``--traces FILE``: every process appends its spans to FILE (``PINECALL_TRACES_FILE``, the SDK's
console exporter, one JSON object a line; no collector), one trace per call (issue 22).
``--plot FILE.png`` with ``--report``: the report drawn (:func:`pinecall_runtime.plots.draw_up`).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import secrets
import shutil
import signal
import time
from collections.abc import Iterator
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import click
import msgspec
import stamina

from pinecall_runtime.monitoring.prometheus import PROMETHEUS, fired, job_of
from pinecall_runtime.up import loops, recordings, secretscan, services, written
from pinecall_runtime.up import report as reporting
from pinecall_runtime.up.calls import AGENT, ORG, OUTBOUND, define_agent, watch_calls
from pinecall_runtime.up.outbound import summary as outbound_summary
from pinecall_runtime.up.services import EXAMPLE, Urls, urls
from pinecall_runtime.up.stage import Run, nats_users, own_platform
from pinecall_runtime.up.supervise import Processes, Supervised
from pinecall_servicekit.dburl import where
from pinecall_servicekit.lifecycle import ExitCode, settings_or_exit
from pinecall_servicekit.operator import Number, OperatorSettings, UpState
from pinecall_servicekit.platform import Endpoints, ensure_platform


@contextlib.contextmanager
def holding(state_dir: Path) -> Iterator[None]:
    """Hold ``state_dir`` for this run (``up.lock``, an advisory lock the kernel lets go of when
    the process ends, however it ends); a ``ClickException`` naming the other run when one holds
    it: two runs in one state dir would write each other's logs, callers and ``up.json``."""
    lock = (state_dir / "up.lock").open("a+")
    try:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.seek(0)
            other = lock.read().strip() or "?"
            raise click.ClickException(
                f"another up (pid {other}) runs with the state dir {state_dir}/: stop it, or "
                "give this one a state dir of its own (PINECALL_STATE_DIR=.state-2 ./dev up)"
            ) from None
        lock.truncate(0)
        lock.write(f"{os.getpid()}\n")
        lock.flush()
        yield
    finally:
        lock.close()


def _write_state(state_dir: Path, run: Run, at: Urls) -> None:
    state = UpState(
        database_url=run.database_url,
        nats_url=run.nats_url,
        nats_namespace=run.namespace,
        operator_key=run.operator_key,
        roster_url=at.roster[0],
        urls=at.named(),
    )
    keys = {"operator": run.operator_key, "service": run.service_key}
    keys |= {f"fleet-{e}": k for e, k in run.fleet_keys.items()}
    keys |= {f"app-{e}": k for e, k in run.app_keys.items()}
    (state_dir / "up.json").write_bytes(msgspec.json.format(msgspec.json.encode(state)))
    (state_dir / "keys.json").write_text(json.dumps(keys, indent=2))


@click.command()
@click.option(
    "--calls",
    type=click.IntRange(min=0),
    default=None,
    help="Callers in all (0: none) [default: until stopped].",
)
@click.option(
    "--chats",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Chat visitors in all, writing to the agent over WS /v1/chat (at --rate).",
)
@click.option(
    "--outbound",
    type=click.IntRange(min=0),
    default=None,
    help=f"Outbound calls placed (POST /v1/calls/outbound, each request sent twice) "
    f"[default: {OUTBOUND} when callers ring, else 0].",
)
@click.option(
    "--rate",
    type=Number(min=0, min_open=True),
    default=1.0,
    show_default=True,
    help="Callers a second.",
)
@click.option(
    "--seats",
    type=click.IntRange(1, 64),
    default=8,
    show_default=True,
    help="Seats of each environment's worker (PINECALL_MAX_JOBS).",
)
@click.option(
    "--exit-when-done",
    is_flag=True,
    help="Stop once the last of --calls ended and every log was read back.",
)
@click.option(
    "--report",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write a JSON report here at the end.",
)
@click.option("--duration", type=Number(min=0), default=None, help="Stop after this many seconds.")
@click.option(
    "--every",
    type=Number(min=0.2),
    default=5.0,
    show_default=True,
    help="Seconds between live tables.",
)
@click.option(
    "--tool-share",
    type=Number(0, 1),
    default=0.5,
    show_default=True,
    help="The share of turns on which the model asks one of the agent's tools.",
)
@click.option(
    "--app-restarts",
    type=Number(min=1),
    default=None,
    metavar="N",
    help="SIGKILL an app process every N seconds while callers ring (it is started again).",
)
@click.option(
    "--chat-restarts",
    type=Number(min=1),
    default=None,
    metavar="N",
    help="SIGKILL a chat replica every N seconds while visitors chat (it is started again).",
)
@click.option(
    "--roster-replicas",
    type=click.IntRange(1, 8),
    default=1,
    show_default=True,
    help="Roster replicas (workers beat to the first; the others hear them over NATS).",
)
@click.option(
    "--prometheus",
    "with_prometheus",
    is_flag=True,
    help="Run Debian's Prometheus scraping every process, the alert rules loaded; the report "
    "says which alerts fired.",
)
@click.option(
    "--traces",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write every process's spans here, one JSON object a line (one trace per call).",
)
@click.option(
    "--plot",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="With --report: draw the run's calls and first audio over time as a PNG here.",
)
def up(**options: Any) -> None:  # fmt: skip
    """The whole platform on this machine, with callers who speak, until Ctrl-C.

    Postgres and NATS, the LiveKit stand-in (one per environment), the vendor fakes, roster,
    call-log, webhook-ingest, dispatcher, reaper, a worker and the overflow per environment
    (production `pinecall`, sandbox `pinecall-sandbox`), the chat service (two replicas), the
    booking example's agent with two processes of its app and a console per environment, then
    phone callers and web visitors at --rate, and with --chats visitors who write to it. Logs: .state/logs/. The CLI reads .state/up.json meanwhile.
    """
    if options["exit_when_done"] and not options["calls"] and not options["chats"]:
        raise click.UsageError("--exit-when-done needs --calls N or --chats N (N > 0)")
    if options["plot"] is not None and options["report"] is None:
        raise click.UsageError("--plot draws the report: it needs --report FILE")
    for name in ("report", "traces", "plot"):
        if options[name] is not None and not options[name].resolve().parent.is_dir():
            raise click.BadParameter(
                f"{options[name].resolve().parent} is not a folder", param_hint=f"'--{name}'"
            )
    if not entry_points(group="pinecall_runtime.commands", name="lab"):
        raise click.ClickException(
            "up runs the load lab's LiveKit stand-in, vendor fakes and callers: install "
            "pinecall-loadlab (./dev sync does)"
        )
    if options["with_prometheus"] and not Path(PROMETHEUS).is_file():
        raise click.ClickException(
            f"--prometheus runs Debian's Prometheus: {PROMETHEUS} is missing (./dev sync installs "
            "it: apt-get install prometheus)"
        )
    if not (EXAMPLE / "booking.yaml").is_file():
        raise click.ClickException(
            f"up runs the booking example's app and agent: {EXAMPLE} is not there (up runs "
            "from a checkout of the repository)"
        )
    # waiting for a process to listen is polling, not a failure worth a log line per try
    stamina.instrumentation.set_on_retry_hooks([])
    settings = settings_or_exit(OperatorSettings.from_env)
    state_dir = Path(settings.state_dir)
    state_dir.mkdir(parents=True, exist_ok=True)
    with holding(state_dir):
        _up(options, settings, state_dir)


def where_it_runs(platform: Endpoints, database_url: str, namespace: str) -> list[str]:
    """The banner's first lines: Postgres's server (host and port, or socket folder: never the
    URL, whose query a socket's folder is in) and the run's database by name alone; NATS and the
    run's namespace."""
    pg = where(database_url)
    return [
        f"postgres: {pg.server}{' (embedded)' * platform.embedded_postgres}"
        f", database {pg.database} for this run",
        f"nats:     {platform.nats_url}{' (embedded)' * platform.embedded_nats}"
        f"{', authorization on' * platform.nats_authorization}, namespace {namespace}",
    ]


def _up(options: dict[str, Any], settings: OperatorSettings, state_dir: Path) -> None:
    """The run, its state dir held (:func:`up`)."""
    (state_dir / "callers.jsonl").unlink(missing_ok=True)  # a previous run's callers
    (state_dir / "chats.jsonl").unlink(missing_ok=True)  # and its chat visitors
    shutil.rmtree(state_dir / "apps", ignore_errors=True)  # and its apps' ledgers
    (state_dir / "apps").mkdir()
    # SIGTERM as Ctrl-C while the platform starts: every process started so far is stopped
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    began = time.monotonic()
    result: dict[str, Any] | None = None
    token = secrets.token_hex(4)  # the run's name: its NATS users are made before its NATS
    users = nats_users(token)
    with (
        ensure_platform(settings.database_url, settings.nats_url, nats_users=users) as platform,
        own_platform(platform, state_dir, token, users) as run,
    ):
        for line in where_it_runs(platform, run.database_url, run.namespace):
            click.echo(line)
        click.echo(f"logs:     {run.logs}/<name>.log")
        if options["traces"] is not None:
            run.traces_file = str(options["traces"].resolve())
            options["traces"].write_text("")  # this run's spans only
            click.echo(f"traces:   {run.traces_file} (one JSON span a line)")
        at = urls(options["roster_replicas"])
        processes = Processes()
        codes: dict[str, int | None] = {}
        watcher: Supervised | None = None
        watched_from = 0.0

        def ready(*group: Supervised) -> None:
            processes.wait(*group)
            for process in group:
                click.echo(f"{process.name + ':':<21}{process.url or ''} ready")

        try:
            stand_ins = services.lab(run, at, tool_share=options["tool_share"])
            stand_ins.append(recordings.bucket(run, at.s3, services.TIER["lab"]))
            processes.launch(*stand_ins)  # they need no database: up while it is migrated
            click.echo("up: starting the stand-ins and the vendor fakes; migrating, making keys")
            run.prepare()  # StepFailed says which verb failed and what it printed
            click.echo("migrations and keys: done")
            ready(*stand_ins)
            store, control, workers, chat = services.platform(run, at, seats=options["seats"])
            recordings.equip([*store, *workers], at.s3)  # they record, and sign the URLs
            processes.launch(*store)
            ready(*store)
            for agent in asyncio.run(define_agent(run, at)):
                click.echo(f"agent:               {AGENT} of {ORG} in {agent.environment}, "
                           f"version {agent.version}, tools "
                           f"{', '.join(t.name for t in agent.definition.tools)}")  # fmt: skip
            apps = services.apps(run, at, state_dir / "apps", agent=AGENT, org=ORG)
            processes.launch(*apps)  # they hold the agent while the rest starts
            click.echo(f"apps:                {', '.join(p.name for p in apps)} "
                       f"(ledgers in {state_dir / 'apps'})")  # fmt: skip
            processes.launch(*control)
            # a worker's start (its imports, the forkserver's preload, LiveKit's registration)
            # is the longest: it goes on while the control plane gets ready
            processes.launch(*workers)
            click.echo("up: starting the control plane, the workers and the overflows")
            ready(*control)
            ready(*workers)
            processes.launch(*chat)  # written calls: after the workers' start, not during it
            ready(*chat)
            if options["with_prometheus"]:
                scraped = [p for p in processes if job_of(p.name) is not None]
                watcher = services.prometheus(run, scraped, state_dir / "prometheus")
                processes.launch(watcher)
                ready(watcher)
                watched_from = time.monotonic()
            _write_state(state_dir, run, at)
            click.echo(f"up: ready; from another shell the CLI reads {state_dir / 'up.json'} "
                       f"(keys in {state_dir / 'keys.json'})")  # fmt: skip
            result = asyncio.run(watch_calls(run, at, processes, state_dir, options))
            if watcher is not None and watcher.url is not None:  # asked before anything stops
                alerts = fired(watcher.url, time.monotonic() - watched_from)
                click.echo(
                    "up: alerts fired: "
                    + (", ".join(f"{a['title']} ({a['alert']})" for a in alerts) or "none")
                )
                if result is not None:
                    result["alerts_fired"] = alerts
        except KeyboardInterrupt:
            click.echo("up: stopping", err=True)
        finally:
            try:
                codes = processes.stop()
            except KeyboardInterrupt:  # Ctrl-C again while they drain: no more waiting
                click.echo("up: killing every process", err=True)
                codes = processes.kill()
            for name in ("up.json", "keys.json"):  # the platform is gone: nothing points at it
                (state_dir / name).unlink(missing_ok=True)
            click.echo(f"up: stopped {', '.join(f'{n}={c}' for n, c in codes.items())}")
            traces = [Path(run.traces_file)] if run.traces_file else []
            looked = secretscan.scan(
                [*sorted(run.logs.glob("*.log")), *traces], secretscan.minted(run, processes)
            )
            click.echo(looked.line())
            late = loops.count(sorted(run.logs.glob("*.log")))
            click.echo(loops.summary(late))
            if result is not None:
                result["loops"] = late
                result["secrets"] = {"looked_for": looked.looked_for, "files": looked.files,
                                     "leaks": looked.leaks}  # fmt: skip
                result["problems"] += [f"a secret in a log: {leak}" for leak in looked.leaks]
    if options["report"] is not None and result is not None:
        result |= {
            "seconds": round(time.monotonic() - began, 1),
            "seats": options["seats"],
            "rate": options["rate"],
            "tool_share": options["tool_share"],
            "chats": options["chats"],
            "chat_restarts": options["chat_restarts"],
            "app_restarts": options["app_restarts"],
            "restarts": {p.name: p.restarts for p in processes},
            "exit_codes": codes,
        }
        options["report"].write_text(json.dumps(result, indent=2))
        click.echo(f"up: report in {options['report']}")
        if options["plot"] is not None:
            from pinecall_runtime.plots import draw_up  # matplotlib: only when asked

            draw_up(result, options["plot"])
            click.echo(f"up: plot in {options['plot']}")
    if result is not None:
        click.echo(reporting.summary(result))
        if result["written"]["visitors"]:
            click.echo(written.summary(result["written"]))
        if "outbound" in result:
            click.echo(outbound_summary(result["outbound"]))
        click.echo(recordings.summary(result["recordings"]))
        if reporting.failed(result):
            click.echo("up: problems:\n  " + "\n  ".join(result["problems"][:20]), err=True)
            raise SystemExit(ExitCode.FAILED)
