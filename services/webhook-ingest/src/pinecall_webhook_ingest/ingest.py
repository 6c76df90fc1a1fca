"""One replica's ingest: verify, pass on once, count.

Counted in ``/metrics``: ``pinecall_webhooks_total{environment,event}`` (stored),
``pinecall_webhooks_duplicate_total{environment}`` (a delivery the stream already had) and
``pinecall_webhooks_refused_total{environment,reason}`` (refused; nothing published).
"""

from __future__ import annotations

import logging

from prometheus_client import CollectorRegistry, Counter

from pinecall_servicekit.bus import Bus
from pinecall_servicekit.errors import BadRequest, NotFound, Unauthorized
from pinecall_webhook_ingest import domain

_log = logging.getLogger(__name__)


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

    async def receive(self, environment: str, body: bytes, authorization: str | None) -> bool:
        """Verify and publish one webhook; True when stored, False for a duplicate.

        Raises ``NotFound`` for an environment with no LiveKit keys, ``Unauthorized`` for a
        refused signature (counted by reason), ``BadRequest`` for a signed body that is not a
        webhook, ``BusUnavailable`` when JetStream did not store it (LiveKit retries on 5xx).
        """
        if environment not in self.keys:
            raise NotFound(f"no LiveKit is configured for environment {environment!r}")
        key, secret = self.keys[environment]
        try:
            event = domain.verify(body, authorization, key, secret)
        except domain.WebhookRefused as exc:
            self.refused.labels(environment, exc.reason).inc()
            _log.warning("webhook refused (%s): %s", exc.reason, exc)
            raise Unauthorized(f"webhook refused: {exc}") from exc
        except Exception as exc:  # protobuf's ParseError and friends: signed, but not a webhook
            raise BadRequest(f"the signed body is not a LiveKit webhook: {exc}") from exc
        if not event.id or not event.event:
            raise BadRequest("the webhook carries no id or no event")
        message = domain.to_contract(event, environment, body)
        subject = self.bus.subjects.livekit_event(environment, message.event, message.room)
        stored = await self.bus.publish_once(subject, message, msg_id=message.id)
        if stored:
            self.stored.labels(environment, message.event).inc()
        else:
            self.duplicates.labels(environment).inc()
        return stored
