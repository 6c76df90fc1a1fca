"""The one registry of NATS subjects, streams and buckets (``shared/CONVENTIONS.md`` habit 2).

Every subject starts with a namespace (``pinecall`` in a deployment; one per test, so tests never
see each other), then the publisher's area, then the variable tokens last so ``*`` and ``>`` work
(NATS ADR-6). A worker's name holds ``/`` and ``.``: it becomes a token only through
:func:`escape_token`, and the payload carries the real name.

==========================  =========  ===========================================================
subject / name              delivery   what
==========================  =========  ===========================================================
``<ns>.fleet.heartbeat.<f>.<w>``  core   a heartbeat of fleet ``f``'s worker ``w`` a roster replica
                                       received, told to the others (the fleet its own token,
                                       so a fleet's NATS user is allowed ``<ns>.fleet.heartbeat.<f>.*``
                                       and nothing of another fleet: :mod:`pinecall_servicekit.natsauth`)
``<ns>.keys.revoked``        core       a key revoked at an endpoint: forget it now
``<ns>.persons.changed``     core       a person changed at an endpoint: forget their keys now
``<ns>.ops.fleet.*``         service    the roster's ops verbs (``nats.micro``, ``$SRV`` discovery)
``<ns>.ops.people.*``        service    the roster's verbs of orgs, persons and keys
``<ns>.ops.dispatch.*``      service    the dispatcher's ops verbs: offers, a call's journal
``<ns>.ops.calls.*``         service    call-log's ops verbs: a call and its entries
``$SRV.PING.<service>``      service    ``nats.micro`` discovery: does a replica of it answer
``<ns>_cordons``             KV         cordons by worker key; history kept, newest revision wins
``<ns>.livekit.event.<env>.<event>.<room>``  stream  LiveKit's webhooks, once each (``<ns>_livekit``);
                                       the dispatcher reads it with the durable consumer ``dispatcher``;
                                       made as :attr:`Subjects.livekit_stream_settings` says
``<ns>.webhooks.dropped.<env>.<reason>``  stream  a webhook webhook-ingest did not pass on
                                       (``<ns>_webhook_drops``, kept ten minutes; ``doctor``)
``<ns>.calls.<what>.<c>``    core       call.opened / call.ended / call.sealed (CallEvent)
``<ns>.calls.appended.<c>``  core       entries written to call ``c`` up to a seq (Appended)
``<ns>.calls.command.<c>``   core       an app's command written to call ``c`` at a seq (Appended)
``<ns>.calls.tool.asked.<e>.<a>``  core  a tool call for the app holding agent ``a`` (ToolAsked)
``<ns>.calls.tool.result.<c>``  core    a tool call's one result, to replicas waiting (ToolResult)
``<ns>.apps.holding.<r>``    core       the agents call-log replica ``r``'s app sockets take (Holding)
``<ns>.apps.hand.<r>``       core       request/reply: hand a call to a socket on replica ``r``
``<ns>.whatsapp.thread.<n>.<c>``  stream  a verified WhatsApp message or status of contact ``c``'s
                                       thread with number ``n`` (``<ns>_whatsapp``, work queue,
                                       once per Meta id); the chat replicas share the durable
                                       consumer ``chat-whatsapp``
==========================  =========  ===========================================================
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

Delivery = Literal["core", "stream", "kv", "service"]

NAMESPACE_PATTERN = re.compile(r"^[a-z][a-z0-9_-]{0,30}$")
_SAFE = re.compile(r"[A-Za-z0-9_-]")


LIVEKIT_STREAM_DUPLICATE_WINDOW_S = 120.0
"""How long the LiveKit stream remembers a webhook's id, in seconds: past LiveKit's 30 s of
retries, so a webhook delivered again is stored once."""
LIVEKIT_STREAM_MAX_AGE_S = 86_400.0
"""How long the LiveKit stream keeps an event for a consumer that was down, in seconds (a day)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamSettings:
    """How a JetStream stream is made. Whichever of its services starts first makes it, so each
    makes it from these (``Bus.ensure_stream``), never from numbers of its own."""

    name: str
    subjects: tuple[str, ...]
    duplicate_window_s: float
    """How long a message's ``Nats-Msg-Id`` is remembered (a second one is dropped), seconds."""
    max_age_s: float
    """How long a message is kept, seconds."""


class NamespaceError(ValueError):
    """A namespace that cannot start a subject and name a bucket."""


def escape_token(value: str) -> str:
    """``value`` as one subject token (and KV key), reversibly.

    Letters, digits, ``_`` and ``-`` stay; every other character becomes ``=XX`` (its UTF-8 bytes
    in upper-case hex), so ``pinecall/worker-a.1791067258`` is ``pinecall=2Fworker-a=2E1791067258``.
    An empty value raises ``ValueError``: an empty token is not a subject.
    """
    if not value:
        raise ValueError("an empty value is not a subject token")
    return "".join(
        ch if _SAFE.fullmatch(ch) else "".join(f"={b:02X}" for b in ch.encode()) for ch in value
    )


def unescape_token(token: str) -> str:
    """The value :func:`escape_token` turned into ``token``; ``ValueError`` on a malformed one."""
    out = bytearray()
    i = 0
    while i < len(token):
        ch = token[i]
        if ch == "=":
            hex_pair = token[i + 1 : i + 3]
            if len(hex_pair) != 2 or not re.fullmatch(r"[0-9A-F]{2}", hex_pair):
                raise ValueError(f"malformed escape at {i} in {token!r}")
            out.append(int(hex_pair, 16))
            i += 3
        elif _SAFE.fullmatch(ch):
            out.extend(ch.encode())
            i += 1
        else:
            raise ValueError(f"character {ch!r} cannot stand in a token: {token!r}")
    return out.decode()


class Subjects:
    """Every subject, stream and bucket name of one namespace.

    ``Subjects("pinecall").heartbeat("pinecall/worker-a.1791067258")`` is
    ``pinecall.fleet.heartbeat.pinecall.pinecall=2Fworker-a=2E1791067258``. Raises :class:`NamespaceError`
    for a namespace that is not ``[a-z][a-z0-9_-]{0,30}``.
    """

    def __init__(self, namespace: str = "pinecall") -> None:
        if not NAMESPACE_PATTERN.match(namespace):
            raise NamespaceError(f"not a NATS namespace: {namespace!r}")
        self.namespace = namespace

    # core: heartbeats fan out; a lost one is replaced 5 s later.
    def heartbeat(self, worker: str) -> str:
        """``<ns>.fleet.heartbeat.<fleet>.<worker>``: the fleet (the name's part before ``/``)
        is a token of its own, so permissions and subscriptions can name one fleet's."""
        fleet = worker.partition("/")[0]
        return f"{self.namespace}.fleet.heartbeat.{escape_token(fleet)}.{escape_token(worker)}"

    def heartbeat_before(self, worker: str) -> str:
        """``<ns>.fleet.heartbeat.<worker>``: the subject a heartbeat was told on before the
        fleet was a token of its own. A roster replica tells each heartbeat on both until no
        replica of an older release runs (expand, then contract: during a rolling deploy an older
        roster or dispatcher replica hears only this one, and a worker it did not hear would look
        gone to it)."""
        return f"{self.namespace}.fleet.heartbeat.{escape_token(worker)}"

    @property
    def heartbeats(self) -> str:
        """Every heartbeat of every fleet, in either shape (:meth:`heartbeat` and
        :meth:`heartbeat_before`): the roster and dispatcher replicas subscribe here. One told
        on both is heard twice; hearing a heartbeat again changes nothing."""
        return f"{self.namespace}.fleet.heartbeat.>"

    def fleet_heartbeats(self, fleet: str) -> str:
        """Every heartbeat of ``fleet``'s workers: all a fleet's NATS user may publish."""
        return f"{self.namespace}.fleet.heartbeat.{escape_token(fleet)}.*"

    # core: a revocation must be forgotten at once; a replica that misses it forgets in 5 s.
    @property
    def key_revoked(self) -> str:
        return f"{self.namespace}.keys.revoked"

    # core: as a revocation: every key of a person changed at an endpoint is forgotten at once.
    @property
    def person_changed(self) -> str:
        return f"{self.namespace}.persons.changed"

    # service: the roster's ops verbs (nats.micro).
    @property
    def ops_service(self) -> str:
        """The ``nats.micro`` service name (``$SRV.PING.<name>`` finds every replica)."""
        return f"{self.namespace}-roster"

    @property
    def ops_fleet_list(self) -> str:
        return f"{self.namespace}.ops.fleet.list"

    @property
    def ops_fleet_cordon(self) -> str:
        return f"{self.namespace}.ops.fleet.cordon"

    @property
    def ops_fleet_records(self) -> str:
        """The fleets rows (FleetListRequest → FleetRecords): the dispatcher reads each fleet's
        environment and LiveKit here."""
        return f"{self.namespace}.ops.fleet.records"

    def ops_people(self, verb: str) -> str:
        """The roster's verbs of orgs, persons and keys (issue 21): ``orgs-create``,
        ``orgs-list``, ``persons-create``, ``persons-list``, ``persons-set``, ``keys-create``,
        ``keys-list``, ``keys-revoke``, each on ``<ns>.ops.people.<verb>``."""
        return f"{self.namespace}.ops.people.{escape_token(verb)}"

    # service: the dispatcher's ops verbs (nats.micro).
    @property
    def dispatch_service(self) -> str:
        return f"{self.namespace}-dispatcher"

    @property
    def ops_dispatch_offers(self) -> str:
        """OffersRequest → OffersSnapshot: rooms waiting per fleet, rooms kept past a minute."""
        return f"{self.namespace}.ops.dispatch.offers"

    @property
    def ops_dispatch_journal(self) -> str:
        """JournalRequest → Journal: a call's offers and why."""
        return f"{self.namespace}.ops.dispatch.journal"

    # service: call-log's ops verbs (nats.micro).
    @property
    def call_log_service(self) -> str:
        return f"{self.namespace}-call-log"

    @property
    def ops_calls_log(self) -> str:
        """CallLogRequest → CallLogPage: a call and a page of its entries (for ``logs``)."""
        return f"{self.namespace}.ops.calls.log"

    @property
    def ops_recordings_failed(self) -> str:
        """RecordingsFailedRequest → RecordingsFailedCount: ``call.recording_failed`` entries
        of a recent window (for ``doctor``)."""
        return f"{self.namespace}.ops.calls.recordings-failed"

    # service: webhook-ingest serves no verb; its nats.micro service answers discovery only.
    @property
    def ingest_service(self) -> str:
        return f"{self.namespace}-webhook-ingest"

    # service: the reaper serves no verb; its nats.micro service answers discovery only.
    @property
    def reaper_service(self) -> str:
        return f"{self.namespace}-reaper"

    # service: the chat service serves no verb; its nats.micro service answers discovery only.
    @property
    def chat_service(self) -> str:
        return f"{self.namespace}-chat"

    @staticmethod
    def ping(service: str) -> str:
        """``$SRV.PING.<service>``: any replica of a ``nats.micro`` service answers (ADR-32)."""
        return f"$SRV.PING.{service}"

    # stream: each webhook webhook-ingest drops, kept ten minutes; its per-subject counts are
    # the drops by environment and reason (no replica keeps a count another cannot see).
    @property
    def webhook_drops_stream(self) -> str:
        return f"{self.namespace}_webhook_drops"

    def webhook_dropped(self, environment: str, reason: str) -> str:
        """``<ns>.webhooks.dropped.<environment>.<reason>``."""
        return (
            f"{self.namespace}.webhooks.dropped.{escape_token(environment)}.{escape_token(reason)}"
        )

    @property
    def webhooks_dropped(self) -> str:
        """Every dropped webhook (the drops stream's subjects)."""
        return f"{self.namespace}.webhooks.dropped.>"

    # kv: cordons survive restarts of every replica; newest revision wins.
    @property
    def cordons_bucket(self) -> str:
        return f"{self.namespace}_cordons"

    def cordon_key(self, worker_key: str) -> str:
        return escape_token(worker_key)

    # core: the call log's events. A lost call.opened costs the dispatcher one re-offer check;
    # appended and tool results are notices: a waiter reads the log itself and bounds its wait.
    def call_event(self, what: str, call: str) -> str:
        """``call.opened``, ``call.ended`` or ``call.sealed`` of ``call``."""
        return f"{self.namespace}.calls.{escape_token(what)}.{escape_token(call)}"

    def call_events(self, what: str) -> str:
        """Every call's ``what`` (``opened``, ``ended``, ``sealed``)."""
        return f"{self.namespace}.calls.{escape_token(what)}.*"

    def appended(self, call: str) -> str:
        return f"{self.namespace}.calls.appended.{escape_token(call)}"

    def command(self, call: str) -> str:
        """A ``call.command`` written to ``call``: what wakes the worker's command poll (the
        call's other entries do not)."""
        return f"{self.namespace}.calls.command.{escape_token(call)}"

    def tool_asked(self, environment: str, agent: str) -> str:
        """Tool calls for the app that holds ``agent`` in ``environment``."""
        return (
            f"{self.namespace}.calls.tool.asked.{escape_token(environment)}.{escape_token(agent)}"
        )

    @property
    def tools_asked(self) -> str:
        """Every tool call asked: each call-log replica sends those of the calls its sockets hold."""
        return f"{self.namespace}.calls.tool.asked.>"

    def app_holding(self, replica: str) -> str:
        """What replica ``replica``'s app sockets hold, said every ``app_announce_s``."""
        return f"{self.namespace}.apps.holding.{escape_token(replica)}"

    @property
    def apps_holding(self) -> str:
        return f"{self.namespace}.apps.holding.*"

    def app_hand(self, replica: str) -> str:
        """Ask replica ``replica`` to hand a call to one of its sockets (request/reply)."""
        return f"{self.namespace}.apps.hand.{escape_token(replica)}"

    def tool_result(self, call: str) -> str:
        return f"{self.namespace}.calls.tool.result.{escape_token(call)}"

    @property
    def tool_results(self) -> str:
        """Every tool call's result: each call-log replica listens for its waiters."""
        return f"{self.namespace}.calls.tool.result.*"

    # stream: LiveKit's webhooks, deduplicated by the webhook's id; a consumer that restarts
    # misses nothing.
    @property
    def livekit_stream(self) -> str:
        return f"{self.namespace}_livekit"

    @property
    def livekit_events(self) -> str:
        """Every LiveKit event of every environment (the stream's subjects)."""
        return f"{self.namespace}.livekit.event.>"

    @property
    def livekit_stream_settings(self) -> StreamSettings:
        """The LiveKit stream as webhook-ingest (its publisher) and the dispatcher (its reader)
        make it, whichever starts first: ids remembered 120 s, events kept a day."""
        return StreamSettings(
            name=self.livekit_stream,
            subjects=(self.livekit_events,),
            duplicate_window_s=LIVEKIT_STREAM_DUPLICATE_WINDOW_S,
            max_age_s=LIVEKIT_STREAM_MAX_AGE_S,
        )

    @property
    def livekit_consumer(self) -> str:
        """The dispatcher's durable consumer of the LiveKit stream: one replica gets each event,
        and a replica that restarts goes on from the last event acknowledged."""
        return "dispatcher"

    def livekit_event(self, environment: str, event: str, room: str | None) -> str:
        """``<ns>.livekit.event.<environment>.<event>.<room>`` (``_`` for an event of no room)."""
        return (
            f"{self.namespace}.livekit.event.{escape_token(environment)}."
            f"{escape_token(event or 'unknown')}.{escape_token(room) if room else '_'}"
        )

    # stream: WhatsApp's webhooks, each message and status stored (once per Meta's id) before
    # Meta hears 200; a work queue, so what it still holds is what no replica has processed.
    @property
    def whatsapp_stream(self) -> str:
        return f"{self.namespace}_whatsapp"

    @property
    def whatsapp_threads(self) -> str:
        """Every WhatsApp thread's items (the stream's subjects)."""
        return f"{self.namespace}.whatsapp.thread.>"

    @property
    def whatsapp_consumer(self) -> str:
        """The chat replicas' durable consumer of the WhatsApp stream: one replica gets each
        item; one that dies unacknowledged has it given to another after the ack wait."""
        return "chat-whatsapp"

    def whatsapp_thread(self, number: str, contact: str) -> str:
        """``<ns>.whatsapp.thread.<number>.<contact>``: one thread's items, in arrival order."""
        return f"{self.namespace}.whatsapp.thread.{escape_token(number)}.{escape_token(contact)}"

    def buckets(self) -> list[str]:
        """Every KV bucket of the namespace (a test deletes them after itself)."""
        return [self.cordons_bucket]

    def streams(self) -> list[str]:
        """Every JetStream stream of the namespace, KV buckets' own streams included."""
        return [
            self.livekit_stream,
            self.webhook_drops_stream,
            self.whatsapp_stream,
            *(f"KV_{bucket}" for bucket in self.buckets()),
        ]


DELIVERY: dict[str, Delivery] = {
    "heartbeat": "core",
    "key_revoked": "core",
    "person_changed": "core",
    "ops_fleet_list": "service",
    "ops_fleet_cordon": "service",
    "ops_fleet_records": "service",
    "ops_people": "service",
    "ops_dispatch_offers": "service",
    "ops_dispatch_journal": "service",
    "ops_calls_log": "service",
    "ops_recordings_failed": "service",
    "ping": "service",
    "webhook_dropped": "stream",
    "cordons_bucket": "kv",
    "livekit_event": "stream",
    "whatsapp_thread": "stream",
    "call_event": "core",
    "appended": "core",
    "tool_asked": "core",
    "tool_result": "core",
}
"""How each subject of :class:`Subjects` is delivered, by attribute name."""
