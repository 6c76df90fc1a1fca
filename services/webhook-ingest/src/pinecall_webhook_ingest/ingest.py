"""One replica's ingest: verify, pass on once, count.

Counted in ``/metrics``: ``pinecall_webhooks_total{environment,event}`` (stored),
``pinecall_webhooks_duplicate_total{environment}`` (a delivery the stream already had),
``pinecall_webhook_to_stream_seconds{environment}`` (from a webhook's arrival to its event stored)
and
``pinecall_webhooks_refused_total{environment,reason}`` (refused; nothing published; the reasons
of :data:`domain.Refusal`, ``not_a_webhook``, ``no_environment`` and ``unknown_environment``).

Each webhook not passed on is also a ``WebhookDropped`` on the drops stream
(``<ns>_webhook_drops``, kept :data:`DROPS_KEPT_S`), stored before the answer: a replica's
counters die with it and no other replica sees them, while the stream's counts per
``<environment>.<reason>`` are every replica's drops of the last ten minutes, which ``doctor``
reads. A drop that JetStream does not store is logged and the answer stands.

A webhook stored is published inside the span ``webhook <event>`` of its call's trace
(:func:`pinecall_servicekit.calltrace.call_context` of its environment and room): the trace
starts here, or goes on when an earlier webhook of the room started it, and its ``traceparent``
travels with the event on the stream. The span links to the HTTP request's own span.
"""

from __future__ import annotations

import datetime as dt
import logging
import time

from opentelemetry import trace
from prometheus_client import CollectorRegistry, Counter, Histogram

from pinecall_contracts.livekit import WebhookDropped
from pinecall_contracts.metrics import LATENCY_BUCKETS_S
from pinecall_servicekit import calltrace
from pinecall_servicekit.bus import Bus
from pinecall_servicekit.errors import BadRequest, BusUnavailable, NotFound, Unauthorized
from pinecall_webhook_ingest import domain

_log = logging.getLogger(__name__)
_tracer = trace.get_tracer(__name__)

DROPS_KEPT_S = 600.0
"""How long the drops stream keeps a dropped webhook: ``doctor``'s ten minutes (seed 000)."""
DROPS_PER_SUBJECT = 10_000
"""At most this many drops are kept per environment and reason (the oldest go first), so a flood
of forged requests costs bounded storage; a count at this number means "at least"."""

UNKNOWN = "_unknown"
"""The environment a webhook to an environment with no LiveKit, or naming none, is counted under
(the name it gave is in the drop's detail)."""


async def ensure_drops_stream(bus: Bus) -> None:
    """Make the drops stream if it is missing (every replica, at start)."""
    await bus.ensure_stream(
        bus.subjects.webhook_drops_stream,
        [bus.subjects.webhooks_dropped],
        duplicate_window_s=60.0,
        max_age_s=DROPS_KEPT_S,
        max_msgs_per_subject=DROPS_PER_SUBJECT,
    )


class Ingest:
    """Verifies webhooks of each environment's LiveKit and publishes them once."""

    def __init__(self, bus: Bus, keys: dict[str, tuple[str, str]], registry: CollectorRegistry):
        self.bus = bus
        self.keys = keys
        self.stored = Counter(
            "pinecall_webhooks",
            "LiveKit webhooks stored on the stream",
            ["environment", "event"],
            registry=registry,
        )
        self.duplicates = Counter(
            "pinecall_webhooks_duplicate",
            "LiveKit webhooks delivered again and dropped",
            ["environment"],
            registry=registry,
        )
        self.refused = Counter(
            "pinecall_webhooks_refused",
            "LiveKit webhooks refused, by reason",
            ["environment", "reason"],
            registry=registry,
        )
        self.to_stream = Histogram(
            "pinecall_webhook_to_stream_seconds",
            "from a webhook's arrival to its event stored on the LiveKit stream",
            ["environment"],
            registry=registry,
            buckets=LATENCY_BUCKETS_S,
        )

    async def receive(
        self, environment: str | None, body: bytes, authorization: str | None
    ) -> bool:
        """Verify and publish one webhook of ``environment`` (the URL's ``?world=``); True when
        stored, False for a duplicate.

        Raises ``BadRequest`` for no environment named (``no_environment``) or a signed body that
        is not a webhook, ``NotFound`` for an environment with no LiveKit keys, ``Unauthorized``
        for a refused signature (counted by reason), ``BusUnavailable`` when JetStream did not
        store it (LiveKit retries on 5xx).
        """
        arrived = time.perf_counter()
        if environment is None:
            detail = (
                "the webhook's URL names no environment: LiveKit's webhook.urls end in "
                f"?world=<environment> ({', '.join(sorted(self.keys))})"
            )
            await self._dropped(UNKNOWN, "no_environment", detail)
            raise BadRequest(detail)
        if environment not in self.keys:
            detail = f"no LiveKit is configured for environment {environment!r}"
            # one label and subject for every unknown name: a caller chooses the name
            await self._dropped(UNKNOWN, "unknown_environment", detail)
            raise NotFound(detail)
        key, secret = self.keys[environment]
        try:
            event = domain.verify(body, authorization, key, secret)
        except domain.WebhookRefused as exc:
            _log.warning("webhook refused (%s): %s", exc.reason, exc)
            await self._dropped(environment, exc.reason, str(exc))
            raise Unauthorized(f"webhook refused: {exc}") from exc
        except Exception as exc:  # protobuf's ParseError and friends: signed, but not a webhook
            detail = f"the signed body is not a LiveKit webhook: {exc}"
            await self._dropped(environment, "not_a_webhook", detail)
            raise BadRequest(detail) from exc
        if not event.id or not event.event:
            await self._dropped(environment, "not_a_webhook", "no id or no event")
            raise BadRequest("the webhook carries no id or no event")
        message = domain.to_contract(event, environment, body)
        subject = self.bus.subjects.livekit_event(environment, message.event, message.room)
        request = trace.get_current_span().get_span_context()
        with _tracer.start_as_current_span(
            f"webhook {message.event}",
            context=calltrace.call_context(environment, message.room) if message.room else None,
            links=[trace.Link(request)] if request.is_valid else None,
            attributes={calltrace.ENVIRONMENT: environment, calltrace.ROOM: message.room or ""},
        ):
            stored = await self.bus.publish_once(subject, message, msg_id=message.id)
        if stored:
            self.stored.labels(environment, message.event).inc()
            self.to_stream.labels(environment).observe(time.perf_counter() - arrived)
        else:
            self.duplicates.labels(environment).inc()
            await self._dropped(environment, "duplicate", f"{message.id} ({message.event})")
        return stored

    async def _dropped(self, environment: str, reason: str, detail: str) -> None:
        """Count a webhook not passed on, and keep it on the drops stream for ``doctor``."""
        if reason != "duplicate":
            self.refused.labels(environment, reason).inc()
        drop = WebhookDropped(
            environment=environment, reason=reason, at=dt.datetime.now(dt.UTC), detail=detail[:500]
        )
        try:
            await self.bus.publish_stored(
                self.bus.subjects.webhook_dropped(environment, reason), drop
            )
        except BusUnavailable as exc:
            _log.warning("a dropped webhook was not kept for doctor: %s", exc)
