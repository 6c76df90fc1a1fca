"""The worker's settings: LiveKit's own names stay LiveKit's; the seeds' names stay the seeds'."""

from __future__ import annotations

import importlib
import os
import socket
from collections.abc import Callable
from typing import Any, ClassVar

from pinecall_contracts.ids import WorkerName, WorkerNameError, build_worker_name
from pinecall_servicekit.recordings import RecordingsSettings
from pinecall_servicekit.retries import say_retries
from pinecall_servicekit.settings import HttpUrl, SettingsError
from pinecall_servicekit.telemetry import configure_tracing


class WorkerSettings(RecordingsSettings, frozen=True, kw_only=True):
    """What ``worker start`` needs (seed 000, "Scaling": a worker is a fleet key and LiveKit),
    and where its calls' recordings go (:class:`RecordingsSettings`)."""

    ENV_NAMES: ClassVar = {
        "livekit_url": "LIVEKIT_URL",
        "livekit_api_key": "LIVEKIT_API_KEY",
        "livekit_api_secret": "LIVEKIT_API_SECRET",
        "deepgram_api_key": "DEEPGRAM_API_KEY",
        "anthropic_api_key": "ANTHROPIC_API_KEY",
        "cartesia_api_key": "CARTESIA_API_KEY",
    }

    fleet: str = "pinecall"
    """``PINECALL_FLEET``: ``pinecall`` for production, ``pinecall-sandbox`` for the sandbox."""
    fleet_key: str | None = None
    """``PINECALL_FLEET_KEY``: the environment's fleet key, for the roster and call-log."""
    max_jobs: int | None = None
    """``PINECALL_MAX_JOBS``: seats. Unset leaves the worker on CPU (warned): it then reports its
    share of the machine to LiveKit and vCPU × 4 seats to the roster."""
    worker_host: str = ""
    """``PINECALL_WORKER_HOST``: the worker part of its name (the pod's name); the host name's
    first label when empty. Letters, digits, ``_`` and ``-``, no dot (``pinecall_contracts.ids``):
    :meth:`worker_name` refuses any other."""
    livekit_url: str = "ws://127.0.0.1:7880"
    livekit_api_key: str | None = None
    livekit_api_secret: str | None = None
    roster_url: str = "http://127.0.0.1:8101"
    call_log_url: HttpUrl = "http://127.0.0.1:8102"
    fleets: str = "pinecall=production,pinecall-sandbox=sandbox"
    """``PINECALL_FLEETS``, as the roster reads it: ``<fleet>=<environment>,...``. A job that
    carries no JobOffer opens its call in the environment of :attr:`fleet` (production when the
    fleet is not listed)."""
    host: str = "127.0.0.1"
    """``PINECALL_HOST``: where the health port listens (``0.0.0.0`` in the image)."""
    health_port: int = 8081
    """``PINECALL_HEALTH_PORT``: the startup probe's port (0 picks a free one, for tests)."""
    heartbeat_s: float = 5.0
    """Seconds between heartbeats (seed 000)."""
    drain_timeout_s: float = 600.0
    """Seconds a draining worker waits for its calls (seed 000, "Deploys drain": ten minutes)."""
    seal_timeout_s: float = 60.0
    """Seconds to seal what is left after the drain timeout (seed 000)."""
    lab_rooms: bool = False
    """``PINECALL_LAB_ROOMS``: join rooms over the load lab's transport (under the LiveKit
    stand-in, which has no SFU) instead of ``ctx.connect()``."""
    deepgram_url: str | None = None
    """Deepgram's base URL (the plugin's default when unset; the lab's fake in the lab)."""
    anthropic_url: str | None = None
    cartesia_url: str | None = None
    deepgram_api_key: str | None = None
    anthropic_api_key: str | None = None
    cartesia_api_key: str | None = None
    model: str = "claude-haiku-4-5"
    """``PINECALL_MODEL``: the Anthropic model of a call whose agent names none (seed 000:
    Haiku)."""
    instructions: str = (
        "You are a helpful voice assistant on a phone call. Answer briefly. When the caller "
        "says goodbye or that they are done, say goodbye and end the call."
    )
    """``PINECALL_INSTRUCTIONS``: the prompt of a call whose org defines no agent of its name
    (a call runs its agent's version, kept on the call when it opens)."""
    max_call_seconds: float = 1800.0
    """``PINECALL_MAX_CALL_SECONDS``: the longest a call runs, in seconds (seed 003: 30
    minutes), the same name and number as the reaper's backstop; an agent's own
    ``max_call_seconds`` may only shorten it. At the limit the agent says :attr:`limit_says` and
    the call ends ``timeout``."""
    ringing_timeout_s: float = 30.0
    """``PINECALL_RINGING_TIMEOUT_S``: how long an outbound call's phone rings before it is
    given up ``not_reached`` (LiveKit SIP's ``ringing_timeout``, whose default is 30 s), in
    seconds."""
    limit_says: str = "We have reached the time limit for this call. Thank you for calling."
    """``PINECALL_LIMIT_SAYS``: the last sentence of a call at its limit."""
    overflow_says: str = (
        "We are sorry, we cannot take your call right now. We will call you back shortly."
    )
    """``PINECALL_OVERFLOW_SAYS``: the sentence a ``sentence`` job says into the room of a worker
    that died (seed 000, "A worker that dies"), the overflow's own."""
    measures_socket: str | None = None
    """The measures socket's path; set by the worker for its job processes."""
    relay_socket: str | None = None
    """The relay socket's path (:mod:`pinecall_worker.relay`); set by the worker for its job
    processes, whose batches then go with the worker's other calls'."""

    @classmethod
    def of_job(cls, proc: Any) -> WorkerSettings:
        """The settings the worker handed the job's process (:class:`JobSetup`), else the
        environment's (a job run by an AgentServer that is not a ``Worker``)."""
        handed = proc.userdata.get(HANDED)
        return cls.from_env(handed if isinstance(handed, dict) else None)

    def worker_part(self) -> str:
        """The worker part of the worker's name: :attr:`worker_host`, or the host name."""
        return self.worker_host or socket.gethostname().split(".")[0]

    def worker_name(self, start: int) -> WorkerName:
        """``<fleet>/<worker>.<start>`` (``pinecall_contracts.ids``), the worker's LiveKit agent
        name and its name on the roster. ``SettingsError`` when :attr:`fleet` or
        :meth:`worker_part` cannot make a name the roster takes (``worker start`` exits 78)."""
        try:
            return build_worker_name(self.fleet, self.worker_part(), start)
        except WorkerNameError as exc:
            source = self.env_name("worker_host") if self.worker_host else "the host name (socket)"
            raise SettingsError(
                f"{self.env_name('fleet')}={self.fleet!r} and the worker part from {source} "
                f"make no worker name: {exc}"
            ) from None

    def environment(self) -> str:
        """The environment :attr:`fleet` serves, from :attr:`fleets` (production if unlisted)."""
        for item in self.fleets.split(","):
            name, _, environment = item.strip().partition("=")
            if name == self.fleet and environment:
                return environment
        return "production"

    def cpus(self) -> int:
        return (
            len(os.sched_getaffinity(0))
            if hasattr(os, "sched_getaffinity")
            else (os.cpu_count() or 1)
        )


HANDED = "pinecall.settings"
"""The key of a job process's ``userdata`` that holds the environment its worker handed it."""


class JobSetup:
    """The job processes' setup (AgentServer's ``setup_fnc``): it turns ``faulthandler`` on, so a
    job process that dies of a native crash prints every thread's stack into its worker's log
    (``pinecall_jobs.native.dump_on_crash``), makes the loop monitor's stack sample safe on
    CPython 3.11 (``pinecall_jobs.loops.make_sampling_safe``), carries the worker's settings
    into each process as the environment :meth:`WorkerSettings.from_env` reads back, makes its
    stamina retries say what they retry (``say_retries``), sends its spans where the worker's go
    (``configure_tracing``), then runs ``prewarm``. Picklable, so
    it travels with each process's start arguments: the forkserver's own environment is the one
    it was started with, which a second worker in the same Python process (a test) would not
    change.
    """

    def __init__(self, env: dict[str, str], prewarm: Callable[[Any], None] | None = None) -> None:
        self.env, self.prewarm = env, prewarm

    def __call__(self, proc: Any) -> None:
        from pinecall_jobs.loops import make_sampling_safe, say_loop_cpu  # loaded already
        from pinecall_jobs.native import dump_on_crash  # livekit-rtc's: loaded in a job already

        dump_on_crash()  # first: whatever crashes from here on says where
        make_sampling_safe()  # livekit-agents' monitor of this job process's loop (.loops)
        say_loop_cpu()
        proc.userdata[HANDED] = self.env
        say_retries()  # the job's call-log retries say what they retry, as the worker's do
        if self.env.get(WorkerSettings.env_name("lab_rooms")) == "true":
            # the lab room's modules, which a production worker never imports, here rather than
            # on the call's loop (0.4 s there, 2 s on a loaded machine, as livekit-agents warned)
            importlib.import_module("pinecall_labroom.agents")
            importlib.import_module("pinecall_labroom.jobs")
        # the job's spans go where the worker's do (once per process: a thread job shares it)
        configure_tracing("worker", traces_file=self.env.get("PINECALL_TRACES_FILE"))
        if self.prewarm is not None:
            self.prewarm(proc)
