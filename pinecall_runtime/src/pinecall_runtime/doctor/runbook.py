"""What to do, said once: ``doctor``'s advice and the alert rules' (``pinecall_runtime.alerting``).

Each text may name ``{fleet}``, ``{worker}`` (a cordon key) or ``{call}``: ``doctor`` fills them
with what it found, an alert's annotation with its labels (``{{ $labels.fleet }}``). A text keyed
by reason (admission, webhooks) is chosen by the finding's reason, or by the alert's label.
"""

from __future__ import annotations

SILENT = (
    "start workers of {fleet} (PINECALL_FLEET={fleet}), or find why their heartbeats do not "
    "reach the roster (fleet key, PINECALL_ROSTER_URL)"
)
NO_CALL = "uncordon a worker (pinecall-runtime fleet uncordon WORKER) or start new ones"
UNREGISTERED_FLEET = (
    "its workers cannot reach LIVEKIT_URL, or LiveKit there does not answer them (the workers "
    "check names them; their logs say why)"
)
FULL = "add workers, or seats (PINECALL_MAX_JOBS) where the machines have room"
FAILING = (
    "read its logs (call.error entries: pinecall-runtime logs CALL); pinecall-runtime fleet "
    "cordon {worker} drains it"
)
FAILING_KEPT = "start healthy workers of the fleet, then cordon this one"
KEPT = (
    "pinecall-runtime logs {call} says why; a room kept past a minute means no dispatcher "
    "replica sweeps (its logs) or LiveKit refuses its dispatches"
)
WAITED = "pinecall-runtime logs CALL of its calls says which worker"

ADMISSION = {
    "not_ready": "start workers: none of the fleet was heard for 90 s",
    "fleet_full": "add workers: no worker heard lately had a seat",
    "unheard": "start workers or find why they are silent: none was heard in the last 12 s",
    "cordoned": "uncordon workers or start others: every worker heard lately was cordoned or "
    "draining (pinecall-runtime fleet list)",
    "quota": "an org held its concurrent_calls quota (pinecall-runtime dispatcher quota list)",
    "unknown_agent": "no fleet's fault: callers rang for an agent their org does not define in "
    "that environment (a token request's or a SIP rule's agent and org): define it "
    "(pinecall-runtime agents put FILE --org ORG) or fix the ring",
}
ADMISSION_OTHER = "see the dispatcher's logs ({reason})"

WEBHOOKS = {
    "unknown_key": "LiveKit signs with another API key: make PINECALL_LIVEKIT_KEYS name the key "
    "of LiveKit's webhook configuration",
    "forged": "the secret is not LiveKit's: check PINECALL_LIVEKIT_KEYS",
    "expired": "LiveKit's clock and webhook-ingest's differ, or deliveries come late: check NTP",
    "not_yet_valid": "LiveKit's clock is ahead of webhook-ingest's by over a minute: check NTP",
    "unsigned": "something other than LiveKit posts to the webhook URL, or a proxy drops "
    "Authorization",
    "malformed_token": "something other than LiveKit posts to the webhook URL",
    "hash_mismatch": "a proxy changes the body on the way: pass it unchanged",
    "no_hash": "a proxy or an old LiveKit sends tokens without the body's sha256",
    "not_utf8": "a proxy changes the body on the way: pass it unchanged",
    "not_a_webhook": "a signed body that is no LiveKit webhook: check what posts to the URL",
    "unknown_environment": "LiveKit's webhook URL names an environment with no keys: fix its "
    "?world= or PINECALL_LIVEKIT_KEYS",
    "no_environment": "LiveKit's webhook URL names no environment: end it in "
    "?world=<environment> (webhook.urls in LiveKit's config)",
}
WEBHOOKS_OTHER = "see webhook-ingest's logs"

# said by the alerts only: doctor reads no such evidence yet
WRITE_ERRORS = (
    "call-log answered writes with 5xx: Postgres or NATS does not answer it (its /readyz says "
    "which; pinecall-runtime doctor names the service); the workers keep and retry their "
    "batches, so entries wait but are not lost while it mends"
)
RECORDINGS_FAILED = (
    "recordings were not completed: pinecall-runtime logs CALL of one says the bucket's answer "
    "in its call.recording_failed; check the bucket, its keys and its endpoint "
    "(PINECALL_RECORDINGS_BUCKET, _ENDPOINT, _ACCESS_KEY_ID: the chart's recordings values) "
    "and that the worker reaches it; the calls themselves were not affected"
)
FOLLOW_UPS_WAITING = (
    "the dispatcher dials them as outbound calls of their agent when {fleet} has a seat free; "
    "those due now wait for a seat: {full}"
)
NOT_REACHED = (
    "calls back that never rang are a capacity or dispatch signal (seed 003): check the outbound "
    "trunk and the SIP provider (the not_reached calls' SIP status: pinecall-runtime logs CALL), "
    "and whether callees are called back at an hour they answer"
)
FIRST_AUDIO = (
    "callers wait for the agent's first word: the roster counts a worker failing past this line; "
    "pinecall-runtime doctor names the failing workers, whose advice is: " + FAILING
)
