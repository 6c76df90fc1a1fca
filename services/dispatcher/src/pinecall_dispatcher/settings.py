"""The dispatcher's settings, read once from the environment in ``main.py``.

Its numbers are the seed's (seed 000, "Who takes a call"; seed 003): a test shortens them and
asserts the same rules. LiveKit's keys per environment are read as webhook-ingest reads them
(``PINECALL_LIVEKIT_KEYS``, or ``LIVEKIT_API_KEY``/``LIVEKIT_API_SECRET`` for production).
"""

from __future__ import annotations

from typing import ClassVar

from pinecall_dispatcher.domain import Rules
from pinecall_dispatcher.followups.rules import FollowupRules
from pinecall_servicekit.livekit_keys import LiveKitSettings
from pinecall_servicekit.settings import HttpUrl, Port


class DispatcherSettings(LiveKitSettings, frozen=True, kw_only=True):
    """Where the dispatcher listens, what it reaches, and the rules' numbers."""

    ENV_NAMES: ClassVar = {
        **LiveKitSettings.ENV_NAMES,
        "cartesia_api_key": "CARTESIA_API_KEY",
        "deepgram_api_key": "DEEPGRAM_API_KEY",
    }

    host: str = "127.0.0.1"
    port: Port = 8103
    service_key: str | None = None
    """``PINECALL_SERVICE_KEY``: the dispatcher's own key (``keys create --kind service``, never
    a person's operator key) for the roster's rows and fleets rows, and for call-log: the
    agents rung for, ``fleet.full``, and a dead worker's calls read, ended drained and called
    back (the death handler)."""
    call_log_url: HttpUrl = "http://127.0.0.1:8102"
    key_cache_s: float = 5.0
    """Seconds a verified key is remembered (seed 000, "Three planes")."""
    agent_cache_s: float = 5.0
    """Seconds call-log's answer about an agent (defined or not) is remembered, as a key is: a
    ring usually costs no round trip, and a definition put is seen within this
    (:mod:`pinecall_dispatcher.agents`)."""
    db_pool_size: int = 8
    heard_s: float = 12.0
    """A worker heard within this many seconds may be offered a call (seed 000)."""
    reoffer_s: float = 12.0
    """A room not opened this many seconds after its offer is offered to another (seed 000)."""
    most_offers: int = 3
    """Offers a room gets before it goes to the overflow (seed 000)."""
    fleet_wait_s: float = 12.0
    """How long a room of a fleet nobody heard waits, from the caller's arrival (seed 000)."""
    sweep_s: float = 3.0
    """Seconds between sweeps of the rooms kept in offers (seed 000)."""
    not_ready_s: float = 90.0
    """A fleet none of whose workers was heard for this long is refused at the token endpoint,
    ``not_ready``, before any row exists (seed 003)."""
    roster_max_age_s: float = 1.0
    """The oldest the fleet's rows may be when an offer is made (seed 000: "at most a second")."""
    admit_s: float = 120.0
    """Seconds a visitor's token is good for joining; its call counts against the org's quota
    until it joins or this passes."""
    written_held_s: float = 86_400.0
    """The longest a written call (a chat, a WhatsApp thread: no 30-minute ceiling) counts
    against its org's quota after it opened, when its ``call.ended`` never reached the dispatcher
    (core NATS may lose one); the reaper ends a quiet one long before (5 min, 2 h)."""
    max_call_seconds: float = 1800.0
    """The longest a call runs (seed 003, MAX_CALL_SECONDS): a call opened longer ago than this
    no longer holds a seat in the dispatcher's count, nor the org's quota."""
    kept_s: float = 60.0
    """A room kept in offers past this is named by ``doctor`` (seed 000: "past a minute")."""

    lab_rooms: bool = False
    """``PINECALL_LAB_ROOMS``: the simulated caller (``POST /v1/evals/voice``) joins its room over
    the load lab's transport, as the worker's job does under the stand-in (no SFU); else over
    LiveKit's WebRTC (``livekit.rtc``)."""
    cartesia_url: str | None = None
    """The simulated caller's voice: Cartesia's base URL, the workers' own (the plugin's default
    when unset; the lab's fake in the lab)."""
    cartesia_api_key: str | None = None
    deepgram_url: str | None = None
    """The simulated caller's ears: Deepgram's base URL, the workers' own."""
    deepgram_api_key: str | None = None
    eval_answer_within_s: float = 30.0
    """How long the simulated caller rings for an agent to join before it gives up
    (``unanswered``), in seconds."""
    eval_speak_within_s: float = 20.0
    """How long it waits for the agent's first audio after each of its lines (``silent``)."""
    eval_quiet_s: float = 1.5
    """The agent quiet this long after it spoke has finished its turn (seconds)."""

    outbound_trunk: str = "pinecall-outbound"
    """``PINECALL_OUTBOUND_TRUNK``: the LiveKit SIP outbound trunk an outbound call is dialled
    through, on each environment's LiveKit, by its name or its id (``ST_…``): the operator makes
    it with its SIP provider's address, numbers and credentials (``lk sip outbound create``);
    ``up`` makes it on the stand-in (:mod:`pinecall_dispatcher.outbound`)."""

    followup_every_s: float = 5.0
    """Seconds between the dialler's rounds: call backs taken, follow-ups due dialled
    (:mod:`pinecall_dispatcher.followups.dialler`)."""
    followup_tries: int = 3
    """Tries of a follow-up not reached (or failed) before it is given up (issue 18)."""
    followup_retry_s: float = 1800.0
    """Seconds after a try not reached before the next (issue 18: "tried again later")."""
    followup_not_ready_s: float = 3600.0
    """Seconds a follow-up waits when its line is not ready: not burnt (seed 003: "retried in
    an hour instead of being burnt")."""

    def followup_rules(self) -> FollowupRules:
        return FollowupRules(
            most_tries=self.followup_tries,
            retry_s=self.followup_retry_s,
            not_ready_s=self.followup_not_ready_s,
        )

    def rules(self) -> Rules:
        return Rules(
            heard_s=self.heard_s,
            reoffer_s=self.reoffer_s,
            most_offers=self.most_offers,
            fleet_wait_s=self.fleet_wait_s,
            not_ready_s=self.not_ready_s,
        )
