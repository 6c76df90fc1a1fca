"""The calls phase of ``pinecall-runtime up`` (:mod:`pinecall_runtime.up.command`): once every
process is ready, the callers' agent (:data:`AGENT` of :data:`ORG`) is defined
(:func:`define_agent`); then :func:`watch_calls` waits for every fleet to be heard and every app to
hold the agent, starts the callers, the chat visitors and the outbound calls, prints the live table
every ``--every`` s, starts a process that died again, and at the end (Ctrl-C, ``--duration``,
``--exit-when-done``) hangs the callers up, waits for the calls' seals and reads the report.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from pathlib import Path
from typing import Any

import click
import msgspec
import stamina

from pinecall_clients.calllog import CallLogClient
from pinecall_clients.dispatcher import DispatcherClient
from pinecall_clients.roster import RosterClient
from pinecall_contracts.agents import AgentVersion
from pinecall_runtime.agents import read_definition
from pinecall_runtime.up import recordings, services, supervise, traffic, written
from pinecall_runtime.up import report as reporting
from pinecall_runtime.up.apps import Ledgers, killing, wait_held
from pinecall_runtime.up.callbacks import CallBacks
from pinecall_runtime.up.outbound import Outbound
from pinecall_runtime.up.services import EXAMPLE, Urls
from pinecall_runtime.up.stage import ENVIRONMENTS, Run
from pinecall_runtime.up.supervise import Processes, Supervised
from pinecall_runtime.up.watch import Watch
from pinecall_servicekit.bus import Bus

AGENT = "booking"
"""The agent every simulated caller rings for (its log holds the call backs): the booking
example's, defined by ``examples/booking/booking.yaml`` (its prompt, greeting and two tools),
the file the example's app sends again as each call's setup, so the two never differ."""
ORG = "org_up"
"""The org whose agent it is: :func:`define_agent` puts it in every environment before any
caller rings (the dispatcher refuses a ring for an agent call-log does not hold)."""
OUTBOUND = 5
"""Outbound calls a run with callers places when ``--outbound`` is not given: one of each
number of :data:`pinecall_runtime.up.outbound.PLAN`."""
SEALED_WITHIN_S = 90.0
"""How long the end waits for every opened call's seal (a worker seals within seconds)."""


class NotHeard(Exception):
    """A fleet has no accepting worker on the roster yet."""


async def _every_fleet_heard(watch: Watch, within_s: float = 90) -> None:
    """Return once the roster lists, in every environment's fleet, an accepting worker whose
    heartbeat named its LiveKit agent name: the dispatcher offers a call to no other
    (``pinecall_dispatcher.domain.candidates``), and a worker says it only in the heartbeat
    after LiveKit registered it, up to 5 s after its probe said ready."""
    async for attempt in stamina.retry_context(
        on=NotHeard, attempts=None, timeout=within_s, wait_initial=0.2, wait_max=1.0
    ):
        with attempt:
            await watch.refresh()
            accepting = {
                view.fleet
                for view in (watch.roster.fleets if watch.roster else [])
                if any(w.state == "accepting" and w.agent_name for w in view.workers)
            }
            if not set(ENVIRONMENTS.values()) <= accepting:
                raise NotHeard(sorted(set(ENVIRONMENTS.values()) - accepting))


async def define_agent(run: Run, at: Urls) -> list[AgentVersion]:
    """Put :data:`AGENT` of :data:`ORG` (``examples/booking/booking.yaml``) in every
    environment, with each environment's app key (as its org would); the versions that stand (a
    run's database is new: version 1). ``CallLogRefused`` or ``CallLogUnavailable`` (after
    30 s) when call-log does not take it."""
    # every call recorded (issue 19): up's own choice, not the example's (its org's consent)
    definition = msgspec.structs.replace(read_definition(EXAMPLE / "booking.yaml"), record=True)
    stored = []
    for key in run.app_keys.values():
        async with CallLogClient(at.call_log, key) as log:
            stored.append(await log.put_agent(definition, org=ORG))
    return stored


def _back(process: Supervised, seconds: float) -> None:
    again = "is ready again" if process.url is not None else "was started again"
    click.echo(f"up: {process.name} {again}, {seconds:.1f} s after it exited", err=True)


async def watch_calls(
    run: Run, at: Urls, processes: Processes, state_dir: Path, options: dict[str, Any]
) -> dict[str, Any] | None:
    """The calls phase: callers ring, the table is printed, until the end; the report then
    (None when none was asked)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    started = loop.time()
    calls, every, chats = options["calls"], options["every"], options["chats"]
    dialling = Outbound(run, at.livekit, at.dispatcher, agent=AGENT, org=ORG,
                        count=_outbound_count(options), rate=options["rate"])  # fmt: skip
    backs = CallBacks(run, at.call_log, AGENT, dialling)
    placing: asyncio.Task[None] | None = None
    bus = await Bus.connect(run.nats_url, run.namespace, name="up")
    app_processes = [p for p in processes if p.tier == services.TIER["apps"]]
    consoles = {p.name for p in app_processes if p.name.startswith("console-")}
    watch = Watch(
        state_dir / "callers.jsonl",
        RosterClient(run.operator_key, bus=bus),
        DispatcherClient(at.dispatcher, run.operator_key, timeout_s=2.0),
        Ledgers(state_dir / "apps"),
        consoles,
    )
    visitors = written.Chats(state_dir / "chats.jsonl")
    # a process that dies is started again at once, not at the table's cadence
    supervising = asyncio.create_task(supervise.keep_running(list(processes), _back))
    kills: asyncio.Task[None] | None = None
    chat_kills: list[str] = []
    chat_killing: asyncio.Task[None] | None = None
    try:
        await watch.listen(bus)
        callers = chatting = None
        if calls != 0 or chats or dialling.count:
            click.echo("up: waiting for each fleet's worker to be heard and each app to hold "
                       f"{AGENT}")  # fmt: skip
            if calls != 0 or dialling.count:
                await _every_fleet_heard(watch)
            await wait_held(watch.ledgers, app_processes)
        if chats:
            chatting = traffic.chats(
                run, at, state_dir, options["rate"], chats, agent=AGENT, org=ORG
            )
            processes.start(chatting)
            click.echo(f"up: {chats} chat visitors writing at {options['rate']:g} a second; "
                       f"log {chatting.log}")  # fmt: skip
            if options["chat_restarts"] is not None:
                replicas = [p for p in processes if p.url in at.chat]
                chat_killing = asyncio.create_task(
                    written.restarting(options["chat_restarts"], replicas, visitors, chat_kills)
                )
        if calls != 0:
            greeted = bool(read_definition(EXAMPLE / "booking.yaml").greeting)
            callers = traffic.callers(
                run, at, state_dir, options["rate"], calls, agent=AGENT, org=ORG, greeted=greeted
            )
            processes.start(callers)
            click.echo(f"up: callers ringing at {options['rate']:g} a second; log {callers.log}")
            await dialling.prepare()  # the trunk and callees of outbound calls and call backs
            if dialling.count:
                placing = asyncio.create_task(dialling.place())
                click.echo(f"up: {dialling.count} outbound calls placed at {options['rate']:g} "
                           "a second, each request sent twice")  # fmt: skip
            if options["app_restarts"] is not None:
                apps = [p for p in app_processes if p.name not in consoles]
                kills = asyncio.create_task(
                    killing(options["app_restarts"], apps, watch.ledgers, watch.kills)
                )
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(every):  # the table's cadence
                    await stop.wait()
            watch.read_callers()
            await watch.refresh()
            click.echo(f"\n{_table(watch, visitors, options, dialling)}")
            if supervising.done():  # a process started again never became ready: raised here
                supervising.result()
            drivers = [d for d in (callers, chatting) if d is not None]
            finished = [d.proc.poll() is not None for d in drivers]
            if placing is not None:  # every outbound call placed, and each ended
                ended = watch.ended()
                finished.append(
                    placing.done()
                    and all(p.call is None or p.call in ended for p in dialling.placed)
                )
            done = bool(finished) and all(finished)
            if callers is not None and callers.proc.poll() is not None and kills is not None:
                # no call left to hand over
                kills.cancel()
            if chatting is not None and chatting.proc.poll() is not None and chat_killing:
                chat_killing.cancel()  # no chat left to take up
            if options["duration"] is not None and loop.time() - started >= options["duration"]:
                break
            if done and options["exit_when_done"]:
                break
        hurry = asyncio.Event()  # Ctrl-C again: the stop waits for no seal
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, hurry.set)
        if kills is not None:
            kills.cancel()
        if chat_killing is not None:
            chat_killing.cancel()
        if callers is not None and callers.proc.poll() is None:
            click.echo("up: stopping: the callers hang up", err=True)
            callers.terminate()
            await asyncio.to_thread(callers.wait_stopped)
        if chatting is not None and chatting.proc.poll() is None:
            click.echo("up: stopping: the chat visitors close their sockets", err=True)
            chatting.terminate()
            await asyncio.to_thread(chatting.wait_stopped)
        watch.read_callers()
        visitors.read()
        if options["report"] is None and not options["exit_when_done"]:
            return None
        if threads := watch.threads_open():
            click.echo(f"up: {len(threads)} WhatsApp threads left open (the reaper ends a "
                       "thread quiet 2 h; the run's database goes with it)", err=True)  # fmt: skip
        if waiting := watch.unsealed():
            click.echo(
                f"up: waiting up to {SEALED_WITHIN_S:.0f} s for the logs of {len(waiting)} "
                f"calls to be sealed (rooms {', '.join(waiting[:5])}"
                f"{', …' if len(waiting) > 5 else ''}); Ctrl-C again stops waiting",
                err=True,
            )
        called_back = await backs.settle(watch, hurry) if calls != 0 else None
        unsealed, cut = await _sealed(watch, hurry)
        result = await reporting.build(
            watch,
            operator_key=run.operator_key,
            call_log=at.call_log,
            dispatcher=at.dispatcher,
            agent=AGENT,
        )
        never = "was not sealed when up was stopped again" if cut else "was never sealed"
        result["problems"] += [f"room {room}: its call {never}" for room in unsealed]
        result["fleets"] = msgspec.to_builtins(watch.roster.fleets) if watch.roster else []
        if called_back is not None:
            result["callbacks"] |= called_back
            result["problems"] += reporting.call_backs_problems(called_back)
        result["written"], chat_problems = await written.build(
            visitors, watch.ended(), operator_key=run.operator_key, call_log=at.call_log,
            planned=chats, kills=chat_kills,
        )  # fmt: skip
        result["problems"] += chat_problems
        result["recordings"], recorded = await recordings.build(
            watch.reports, result["callers"], operator_key=run.operator_key, call_log=at.call_log
        )
        result["problems"] += recorded
        result["written"]["threads_open"] = threads
        if placing is not None:
            if not placing.done():
                placing.cancel()
            await asyncio.gather(placing, return_exceptions=True)
            outcomes = {c: e.outcome for c, e in watch.ended().items()}
            result["outbound"] = dialling.counts(await dialling.legs(), outcomes)
            result["problems"] += dialling.problems(result["outbound"])
        click.echo(f"\n{_table(watch, visitors, options, dialling)}")
        return result
    finally:
        supervising.cancel()  # the stop is next: nothing is started again from here
        tasks = [t for t in (kills, chat_killing, placing) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(supervising, *tasks, return_exceptions=True)
        await watch.aclose()
        await bus.close()


async def _sealed(watch: Watch, hurry: asyncio.Event) -> tuple[list[str], bool]:
    """The rooms whose call is still not sealed after :data:`SEALED_WITHIN_S` at most, or once
    ``hurry`` is set (Ctrl-C again); and whether it was."""
    sealing = asyncio.ensure_future(watch.wait_sealed(SEALED_WITHIN_S))
    hurried = asyncio.ensure_future(hurry.wait())
    await asyncio.wait((sealing, hurried), return_when=asyncio.FIRST_COMPLETED)
    cut = not sealing.done()
    for task in (sealing, hurried):
        task.cancel()
    await asyncio.gather(sealing, hurried, return_exceptions=True)
    return watch.unsealed(), cut


def _outbound_count(options: dict[str, Any]) -> int:
    """``--outbound``, or :data:`OUTBOUND` when callers ring and it is not given."""
    if options["outbound"] is not None:
        return int(options["outbound"])
    return OUTBOUND if options["calls"] != 0 else 0


def _table(
    watch: Watch, visitors: written.Chats, options: dict[str, Any], dialling: Outbound
) -> str:
    """The live table, its outbound line, and its chats line under ``--chats``."""
    table = watch.table(options["calls"], options["rate"])
    if dialling.count:
        table += "\n" + dialling.line({c: e.outcome for c, e in watch.ended().items()})
    if not options["chats"]:
        return table
    visitors.read()
    return f"{table}\n{visitors.line(options['chats'], watch.ended())}"
