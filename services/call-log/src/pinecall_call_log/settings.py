"""The call log's settings, read once from the environment in ``main.py``."""

from __future__ import annotations

from pinecall_servicekit.recordings import RecordingsSettings
from pinecall_servicekit.settings import Port


class CallLogSettings(RecordingsSettings, frozen=True, kw_only=True):
    """Where the call log listens, the numbers it keeps, and the recordings' bucket whose URLs
    it signs (:class:`RecordingsSettings`)."""

    host: str = "127.0.0.1"
    port: Port = 8102
    key_cache_s: float = 5.0
    """Seconds a verified key is remembered (seed 000, "Three planes")."""
    db_pool_size: int = 16
    """Postgres connections per replica, all kept open (no overflow: a connection made per
    burst costs more than a request waiting for one)."""
    cache_calls: int = 100_000
    """Calls whose identity (agent, environment, room, worker) a replica keeps in memory."""
    log_token_secret: str = ""
    """Signs the pages' log tokens; the same on every replica. Empty: no token is minted."""
    log_token_ttl_s: float = 3600.0
    """Seconds a log token lets a page follow its call."""
    app_heartbeat_s: float = 15.0
    """Seconds between an app socket's frames at most (it pings when it has nothing to say);
    silence for twice as long closes it 4010 and parks its calls (app-socket reference §4.2)."""
    app_max_frame_bytes: int = 262_144
    """A frame from an app, at most this many bytes (256 KiB: a tool's result with room to
    spare); over it the socket closes 1009."""
    app_queue_frames: int = 1024
    """Frames waiting for an app socket to read them, at most; past it the socket closes 4008
    (a slow consumer) and its calls are handed over."""
    app_announce_s: float = 1.0
    """Seconds between a replica's words on NATS of the agents its app sockets take; a replica
    not heard for three of them is taken for dead and its calls handed again."""
