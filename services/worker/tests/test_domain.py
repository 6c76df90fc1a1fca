"""The worker's rules: LiveKit's load threshold read from the installed framework, the two loads,
the minute."""

from __future__ import annotations

import datetime as dt
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from livekit.agents import worker as agents_worker

from pinecall_contracts.agents import CONFIG_AGENT, AgentDefinition, AgentTool, AgentVersion
from pinecall_contracts.base import encode, to_builtins
from pinecall_contracts.calls import CallRecord
from pinecall_contracts.dispatch import JobOffer
from pinecall_worker import domain
from pinecall_worker.call.agent import CallAgent, call_agent
from pinecall_worker.measures import MeasuresSocket
from pinecall_worker.offer import derived_call_id, offer_of_job
from pinecall_worker.settings import WorkerSettings


def test_the_load_threshold_is_the_installed_frameworks_own() -> None:
    # read straight from the framework's source of truth, so an upgrade that moves it fails here
    assert domain.load_threshold() == agents_worker._default_load_threshold.prod_default


@given(st.integers(1, 256))
def test_livekit_reads_full_exactly_at_the_last_seat(seats: int) -> None:
    threshold = domain.load_threshold()
    assert domain.livekit_load(seats, seats, threshold) == pytest.approx(threshold)
    assert domain.livekit_load(seats - 1, seats, threshold) < threshold
    assert domain.roster_load(seats, seats) == 1.0


@given(st.integers(1, 256), st.integers(0, 256), st.integers(0, 64))
def test_an_offer_waiting_for_its_process_weighs_one_seat(
    seats: int, active: int, reserved: int
) -> None:
    """livekit-agents takes an offer while its effective load is under its load
    threshold: a counting worker takes exactly its seats less its calls and the offers it reserved."""
    threshold = domain.load_threshold()
    takes = domain.effective_load(active, reserved, seats, threshold) < threshold
    assert takes == (active + reserved < seats)
    assert domain.livekit_load(active, seats, threshold) < threshold or active >= seats


def test_the_framework_still_has_what_the_counting_server_mends() -> None:
    """``pinecall_worker.counting`` overrides and calls livekit-agents' private members: an
    upgrade that renames them fails here, not in a call."""
    import inspect

    from livekit.agents import AgentServer

    for name in ("_get_effective_load", "_refresh_worker_load", "_update_worker_status"):
        assert callable(getattr(AgentServer, name, None)), name
    assert "self._get_effective_load()" in inspect.getsource(AgentServer._is_available)
    assert "self._get_effective_load()" in inspect.getsource(AgentServer._update_worker_status)
    assert "self._reserved_slots += 1" in inspect.getsource(AgentServer._answer_availability)


def test_a_worker_of_8_reporting_calls_over_seats_would_stop_at_6() -> None:
    # the seed's bug: calls ÷ seats crosses 0.7 after the 6th call of 8
    limit = domain.load_threshold()
    assert [k for k in range(9) if domain.roster_load(k, 8) < limit] == list(range(6))
    assert [k for k in range(9) if domain.livekit_load(k, 8, limit) < limit] == list(range(8))


def test_seats_and_names() -> None:
    assert domain.default_seats(8) == 32
    assert [domain.idle_processes(32, c) for c in (1, 2, 8)] == [2, 2, 8]
    assert domain.idle_processes(1, 8) == 1  # never more warm processes than seats
    with pytest.raises(ValueError, match="seats"):
        domain.roster_load(1, 0)


def test_the_minute_counts_the_last_sixty_seconds() -> None:
    minute = domain.Minute()
    minute.ended(0.0, failed=True)
    for i in range(4):
        minute.turn(10.0 + i, 1.0 + i)
    assert minute.read(30.0).first_audio_p95_s is None  # four turns: no p95 yet
    minute.turn(20.0, 9.0)
    minute.error(21.0)
    read = minute.read(30.0)
    assert (read.ended, read.failed, read.errors, read.turns) == (1, 1, 1, 5)
    assert read.first_audio_p95_s == 9.0
    later = minute.read(75.0)  # the end at 0 s and the turns at 10–13 s are out of the window
    assert (later.ended, later.turns, later.errors) == (0, 1, 1)


@given(st.lists(st.floats(0, 30, allow_nan=False), min_size=1, max_size=200))
def test_p95_is_a_value_with_95_percent_at_or_below(values: list[float]) -> None:
    p = domain.p95(values)
    assert p in values
    assert sum(v <= p for v in values) >= 0.95 * len(values)


NOW = dt.datetime(2026, 12, 1, 6, 0, tzinfo=dt.UTC)


def test_a_job_offer_in_the_metadata_is_the_jobs_offer() -> None:
    offer = JobOffer(
        call="call_7Qm2x",
        fleet="pinecall",
        environment="production",
        room="call-7Qm2x",
        attempt=2,
        job="sentence",
        agent="support-bot",
        written=17,
        arrived_at=NOW,
    )
    read = offer_of_job(
        encode(offer).decode(),
        job_id="AJ_1",
        room="call-7Qm2x",
        fleet="pinecall",
        environment="production",
        now=NOW,
    )
    assert (read.offer, read.derived, read.why) == (offer, False, None)


@pytest.mark.parametrize(
    "metadata", ["", "  ", '{"type": "dispatch.ring.v1", "agent": "support-bot"}', "not json"]
)
def test_a_job_without_a_job_offer_gets_one_derived_from_the_job(metadata: str) -> None:
    read = offer_of_job(
        metadata,
        job_id="AJ_x9",
        room="call-1",
        fleet="pinecall-sandbox",
        environment="sandbox",
        now=NOW,
    )
    assert read.derived
    assert (read.why is None) == (not metadata.strip())
    o = read.offer
    assert (o.call, o.room, o.fleet, o.environment, o.agent, o.job, o.written) == (
        "AJ_x9",
        "call-1",
        "pinecall-sandbox",
        "sandbox",
        "pinecall-sandbox",
        "answer",
        None,
    )


@given(st.text(min_size=1, max_size=200))
def test_a_derived_call_id_always_fits_the_call_ids_pattern(job_id: str) -> None:
    assert re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}", derived_call_id(job_id))


def test_the_startup_probe_waits_for_livekit_and_every_plugin_and_refuses_once_draining() -> None:
    everything = set(domain.PLUGINS) | {"livekit.agents"}
    assert (
        domain.not_ready(registered=True, loaded=everything, needed=domain.PLUGINS, draining=False)
        == []
    )
    assert domain.not_ready(
        registered=False, loaded={"livekit.plugins.silero"}, needed=domain.PLUGINS, draining=True
    ) == [
        "not registered with LiveKit",
        "plugins not loaded: livekit.plugins.anthropic, livekit.plugins.cartesia, "
        "livekit.plugins.deepgram",
        "draining",
    ]


def test_the_environment_of_a_fleet_is_read_as_the_roster_reads_it() -> None:
    fleets = "pinecall=production, pinecall-sandbox=sandbox"
    assert (
        WorkerSettings.from_env({}, fleet="pinecall-sandbox", fleets=fleets).environment()
        == "sandbox"
    )
    assert WorkerSettings.from_env({}, fleet="other", fleets=fleets).environment() == "production"


def test_a_calls_end_counts_once_whoever_says_it(tmp_path: Path) -> None:
    clock = [100.0]
    measures = MeasuresSocket(tmp_path / "m.sock", clock=lambda: clock[0])
    assert measures.call_ended("call_1", failed=True)  # the main process, for a dead job
    assert not measures.call_ended("call_1", failed=False)  # the job's own word, later
    assert measures.call_ended("call_2", failed=False)
    read = measures.minute.read(clock[0])
    assert (read.ended, read.failed) == (2, 1)
    clock[0] += 61  # a minute on, call_1 is forgotten with the minute it was counted in
    assert not measures.heard_ended("call_1")
    assert measures.call_ended("call_3", failed=False)
    assert not measures.heard_ended("call_1")


def test_the_forkserver_preloads_the_calls_own_modules_beside_the_plugins() -> None:
    from pinecall_worker.call import entrypoint, prewarm
    from pinecall_worker.server import modules_of

    # livekit-agents preloads the plugins it knows of; the call's own modules (its SDKs, the
    # clients, the contracts: ~1.5 s a process, measured) only when named
    assert modules_of(entrypoint, prewarm, None) == [
        "pinecall_worker.call",
        "pinecall_worker.call.session",
    ]


def test_a_job_close_to_its_reoffer_opens_first() -> None:
    reoffer_at = 1_000.0
    assert not domain.opens_first(reoffer_at, reoffer_at - domain.OPEN_FIRST_S - 0.1)
    assert domain.opens_first(reoffer_at, reoffer_at - domain.OPEN_FIRST_S)
    assert domain.opens_first(reoffer_at, reoffer_at + 3.0)  # past it: the room may be another's
    assert not domain.opens_first(None, reoffer_at + 3.0)  # the overflow's offer: nothing after


def test_a_job_reads_its_handed_settings_without_importing_sqlalchemy() -> None:
    """What a job process does before its call (preloaded modules, then its settings) imports no
    SQLAlchemy: the URL check's import cost each job 0.57 s before it joined its room (stop 13's
    ``lab run death``: the sentence 1.2 s after the webhook, 0.3–0.4 s without it)."""
    script = """
import sys, types
import pinecall_worker.call, pinecall_worker.call.session  # what the forkserver preloads
from pinecall_worker.settings import HANDED, WorkerSettings
handed = {"PINECALL_FLEET": "pinecall", "PINECALL_MAX_JOBS": "4"}  # as JobSetup hands them
settings = WorkerSettings.of_job(types.SimpleNamespace(userdata={HANDED: handed}))
assert settings.fleet == "pinecall", settings
print("sqlalchemy" in sys.modules)
"""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PINECALL_")}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, check=False
    )
    assert (done.returncode, done.stdout.strip()) == (0, "False"), done.stderr


def test_a_job_shut_down_from_outside_says_why_its_call_ended_drained() -> None:
    # livekit-agents' reasons (job_proc_lazy_main): its room disconnected; any other shutdown
    # request (the worker closing its jobs, LiveKit's JobTermination) says the same default
    assert domain.shutdown_cause("room disconnected") == "room_gone"
    assert domain.shutdown_cause("the room went") == "room_gone"  # the stand-in's watch
    assert domain.shutdown_cause("parent process shutdown") == "shutdown"
    assert domain.shutdown_cause("session closed: user_initiated") == "shutdown"


def test_a_call_runs_its_agents_version_over_the_workers_defaults() -> None:
    settings = WorkerSettings.from_env({}, max_call_seconds=600.0)
    opened = dt.datetime(2026, 12, 2, tzinfo=dt.UTC)
    version = AgentVersion(
        org="org_acme",
        environment="production",
        version=3,
        updated_at=opened,
        prompt_hash="0" * 64,
        definition=AgentDefinition(
            name="booking",
            prompt="You book tables.",
            greeting="Booking desk.",
            voice="voice-booking",
            tools=[AgentTool(name="book_table")],
            max_call_seconds=900,  # past the worker's ceiling: the ceiling holds
        ),
    )

    def record(config: dict[str, object]) -> CallRecord:
        return CallRecord(
            call="call_1", agent="booking", org="org_acme", environment="production",
            room="room-1", worker="pinecall/worker-a.1", state="open", written=0, last_seq=1,
            opened_at=opened, config=config,
        )  # fmt: skip

    runs = call_agent(settings, record({CONFIG_AGENT: to_builtins(version)}))
    assert (runs.instructions, runs.greeting, runs.voice, runs.version) == (
        "You book tables.", "Booking desk.", "voice-booking", 3,
    )  # fmt: skip
    assert (runs.model, runs.language, runs.max_call_seconds) == (settings.model, "en", 600.0)
    assert [t.name for t in runs.tools] == ["book_table"]
    defaults = CallAgent(
        instructions=settings.instructions, model=settings.model, max_call_seconds=600.0
    )
    # no agent kept (the org defines none), no record (the log did not open it in time), or
    # one that is not an agent's version: the worker's own
    assert call_agent(settings, record({"voice": "alloy"})) == defaults
    assert call_agent(settings, None) == defaults
    assert call_agent(settings, record({CONFIG_AGENT: {"version": "x"}})) == defaults


def test_a_job_process_setup_turns_faulthandler_on_first() -> None:
    """JobSetup, run in each job process, makes a native crash there print every thread's stack
    into the worker's log (issue 19: CI saw a job die of SIGSEGV with nothing but its exit code)."""
    script = """
import faulthandler, sys, types
from pinecall_worker.settings import JobSetup

assert not faulthandler.is_enabled()
JobSetup({"PINECALL_FLEET": "pinecall"})(types.SimpleNamespace(userdata={}))
print(faulthandler.is_enabled())
"""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PINECALL_", "PYTHONFAULT"))}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, check=False
    )
    assert (done.returncode, done.stdout.strip()) == (0, "True"), done.stderr
