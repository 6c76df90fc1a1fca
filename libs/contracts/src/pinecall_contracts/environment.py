"""Every ``PINECALL_*`` environment variable the runtime reads, in one registry.

A service's settings read only names listed here, and a ``PINECALL_*`` variable that is listed
nowhere is an error at start-up, not a silent typo (``shared/CONVENTIONS.md`` habit 3). A name is
added here in the same change that adds the setting.
"""

from __future__ import annotations

PINECALL_VARIABLES: frozenset[str] = frozenset(
    {
        # every service
        "PINECALL_DATABASE_URL",
        "PINECALL_NATS_URL",
        "PINECALL_NATS_NAMESPACE",
        "PINECALL_HOST",
        "PINECALL_PORT",
        "PINECALL_KEEPALIVE_S",
        "PINECALL_LOG_LEVEL",
        "PINECALL_LOG_FORMAT",
        "PINECALL_TRACES_FILE",
        "PINECALL_KEY_CACHE_S",
        "PINECALL_DRAIN_TIMEOUT_S",
        # roster
        "PINECALL_SILENT_S",
        "PINECALL_FORGOTTEN_S",
        "PINECALL_WANTED_TARGET",
        "PINECALL_FLEETS",
        # webhook-ingest (the LiveKit stream's settings are the subject registry's)
        "PINECALL_LIVEKIT_KEYS",
        # dispatcher (LiveKit's keys as webhook-ingest reads them)
        "PINECALL_HEARD_S",
        "PINECALL_REOFFER_S",
        "PINECALL_MOST_OFFERS",
        "PINECALL_FLEET_WAIT_S",
        "PINECALL_SWEEP_S",
        "PINECALL_NOT_READY_S",
        "PINECALL_ROSTER_MAX_AGE_S",
        "PINECALL_ADMIT_S",
        "PINECALL_WRITTEN_HELD_S",
        "PINECALL_KEPT_S",
        "PINECALL_AGENT_CACHE_S",
        # the dispatcher's simulated caller (and PINECALL_LAB_ROOMS, PINECALL_CARTESIA_URL,
        # PINECALL_DEEPGRAM_URL: the worker's names)
        "PINECALL_EVAL_ANSWER_WITHIN_S",
        "PINECALL_EVAL_SPEAK_WITHIN_S",
        "PINECALL_EVAL_QUIET_S",
        "PINECALL_FOLLOWUP_EVERY_S",
        "PINECALL_FOLLOWUP_TRIES",
        "PINECALL_FOLLOWUP_RETRY_S",
        "PINECALL_FOLLOWUP_NOT_READY_S",
        "PINECALL_OUTBOUND_TRUNK",
        # call-log
        "PINECALL_DB_POOL_SIZE",
        "PINECALL_CACHE_CALLS",
        "PINECALL_LOG_TOKEN_SECRET",
        "PINECALL_LOG_TOKEN_TTL_S",
        "PINECALL_APP_HEARTBEAT_S",
        "PINECALL_APP_MAX_FRAME_BYTES",
        "PINECALL_APP_QUEUE_FRAMES",
        "PINECALL_APP_ANNOUNCE_S",
        # the CLI
        "PINECALL_OPERATOR_KEY",
        "PINECALL_STATE_DIR",
        # the worker and the overflow (issue 6, 8): named now so an operator's env is accepted
        "PINECALL_FLEET",
        "PINECALL_WORKER_HOST",
        "PINECALL_HEARTBEAT_S",
        "PINECALL_SEAL_TIMEOUT_S",
        "PINECALL_MEASURES_SOCKET",
        "PINECALL_RELAY_SOCKET",
        "PINECALL_LAB_ROOMS",
        "PINECALL_DEEPGRAM_URL",
        "PINECALL_ANTHROPIC_URL",
        "PINECALL_CARTESIA_URL",
        "PINECALL_MODEL",
        "PINECALL_INSTRUCTIONS",
        "PINECALL_FLEET_KEY",
        "PINECALL_MAX_JOBS",
        "PINECALL_OVERFLOW_SAYS",
        "PINECALL_LIMIT_SAYS",
        "PINECALL_RINGING_TIMEOUT_S",
        "PINECALL_ROSTER_URL",
        "PINECALL_CALL_LOG_URL",
        "PINECALL_HEALTH_PORT",
        # the recordings' bucket (issue 19): the worker and the overflow write it, call-log
        # signs its URLs
        "PINECALL_RECORDINGS_BUCKET",
        "PINECALL_RECORDINGS_PREFIX",
        "PINECALL_RECORDINGS_ENDPOINT",
        "PINECALL_RECORDINGS_REGION",
        "PINECALL_RECORDINGS_ACCESS_KEY_ID",
        "PINECALL_RECORDINGS_SECRET_ACCESS_KEY",
        "PINECALL_RECORDINGS_URL_TTL_S",
        # the dispatcher and the reaper: their own key for what they read and post of the
        # roster and call-log (never the operator's)
        "PINECALL_SERVICE_KEY",
        # the reaper (issue 8)
        "PINECALL_LIVEKIT_URLS",
        "PINECALL_REAP_EVERY_S",
        "PINECALL_QUIET_S",
        "PINECALL_CHAT_QUIET_S",
        "PINECALL_WHATSAPP_QUIET_S",
        # the chat service (issue 17)
        "PINECALL_DISPATCHER_URL",
        "PINECALL_FLEET_KEYS",
        "PINECALL_CHAT_TOKEN_SECRET",
        "PINECALL_CHAT_TOKEN_TTL_S",
        "PINECALL_CHAT_MAX_MESSAGE_CHARS",
        "PINECALL_CHAT_MAX_FRAME_BYTES",
        # the chat service's WhatsApp threads (issue 17)
        "PINECALL_WHATSAPP_GRAPH_URL",
        "PINECALL_WHATSAPP_GRAPH_VERSION",
        "PINECALL_WHATSAPP_PAIR_INTERVAL_S",
        "PINECALL_WHATSAPP_ACK_WAIT_S",
        "PINECALL_WHATSAPP_RETRY_S",
        "PINECALL_WHATSAPP_QUOTA_RETRY_S",
        "PINECALL_WHATSAPP_WINDOW_S",
        # the dispatcher, the reaper and the worker: one ceiling of a call, one name (seed 003)
        "PINECALL_MAX_CALL_SECONDS",
    }
)
