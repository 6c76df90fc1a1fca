"""webhook-ingest: LiveKit's webhooks in, each event once on NATS JetStream out.

Owns ``POST /v1/livekit/webhook?world=<environment>``: verifies the signature on the raw body
with livekit-api's ``WebhookReceiver`` against that environment's LiveKit keys, lifts every fact
a consumer reads into a ``LiveKitEvent`` (it is the one reader of a webhook's body), and publishes
it on the LiveKit stream with the webhook's id as ``Nats-Msg-Id``, so a duplicate delivery is
dropped and a consumer that restarts misses nothing (``shared/DESIGN.md``, "The wire"). It answers
once JetStream has stored the event: a 503 makes LiveKit deliver it again. A webhook it does not
pass on (refused, not a webhook, a duplicate) is kept ten minutes on the drops stream for
``doctor``; its ``nats.micro`` service answers discovery (``$SRV.PING.<ns>-webhook-ingest``).
"""
