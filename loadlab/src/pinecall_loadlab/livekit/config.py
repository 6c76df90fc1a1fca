"""The stand-in's settings: LiveKit's defaults, each with the server file it comes from."""

from __future__ import annotations

from dataclasses import dataclass, field

from .policy import AffinityFormula


@dataclass(kw_only=True)
class StandInConfig:
    """Everything the stand-in can be told; defaults are a real server's."""

    keys: dict[str, str] = field(default_factory=lambda: {"devkey": "secret"})
    """API key → secret (`keys:` in livekit.yaml). The first key signs webhooks."""
    webhook_urls: list[str] = field(default_factory=list)
    """`webhook.urls`: every event is POSTed to each."""
    host: str = "127.0.0.1"
    port: int = 7880
    """0 picks a free port (tests)."""
    target_load: float = 0.7
    """`agents.target_load` (`LK:pkg/agent/config.go:L3-8`)."""
    affinity: AffinityFormula = AffinityFormula.TARGET_LOAD
    """The node gate's formula: ≥ v1.11 by default; older servers selectable."""
    offer_deadline_s: float = 10.0
    """One JobRequest's whole budget (all offers of one job share it). 10 s as measured in seed
    000; the source suggests ~3 s (psrpc's default client timeout, reference §2.4)."""
    assign_timeout_s: float = 10.0
    """`AssignJobTimeout` per offer (`LK:pkg/agent/worker.go:L54-57`)."""
    register_timeout_s: float = 10.0
    """`RegisterTimeout`: the first worker frame must be `register` within it."""
    ping_interval_s: float = 10.0
    """WebSocket pings to workers; pongs unchecked (`LK:pkg/service/wsprotocol.go:L36-39`)."""
    refuse_after_s: float = 1.0
    """Under a cut link, a reconnect is closed this long after its ``register`` (the stand-in's
    fault, not LiveKit's: `agent_ws`)."""
    empty_timeout_s: int = 300
    """A room nobody joined closes after this (`LK:pkg/config/config.go:L550`)."""
    departure_timeout_s: int = 20
    """A room closes this long after its last participant left (`LK:pkg/config/config.go:L551`)."""
    connection_timeout_s: float = 5.0
    """A lab participant whose connection is lost leaves with CONNECTION_TIMEOUT after this
    (`disconnectCleanupDuration`, `LK:pkg/rtc/participant.go:L77`)."""
    transport_timeout_s: float = 30.0
    """A lab participant that stops answering (its process stopped, its machine frozen) has lost
    its connection after at most this: the transport pings it every ⅔ of it and gives up ⅓
    later. It stands for WebRTC's consent freshness (RFC 7675: 30 s without an answer), after
    which the server counts the peer connection failed (`LK:pkg/rtc/participant.go`,
    `onAnyTransportFailed`); then `connection_timeout_s` runs."""
    webhook_max_age_s: float = 30.0
    """An event queued longer is dropped (`PR:webhook/notifier.go`, MaxAge)."""
    webhook_retries: int = 4
    """go-retryablehttp's default RetryMax."""
    webhook_backoff_min_s: float = 1.0
    webhook_backoff_max_s: float = 30.0
    webhook_attempt_timeout_s: float = 10.0
    sip_ring_s: float = 0.2
    """How long a dialled phone rings before it picks up, unless told otherwise (the lab's
    choice; `sip.legs.Callee`)."""
    sip_ringing_timeout_s: float = 30.0
    """An outbound leg's ringing timeout when the request sets none (livekit-api's
    `DEFAULT_RINGING_TIMEOUT`, the server's default)."""
    sip_media_timeout_s: float = 15.0
    """An answered leg with no media this long is closed (livekit/sip
    `pkg/media/rtpconn/conn.go`, `MediaTimeout`)."""
    seed: int | None = None
    """Seed of the weighted draw; None draws from the OS."""
    region: str = "lab"
    version: str = "1.13.5-standin"
