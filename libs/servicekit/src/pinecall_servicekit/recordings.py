"""Where an environment's recordings go: a bucket over the S3 API, read the same way by every
service that writes or signs them (the worker, the overflow, call-log; issue 19).

AWS S3 takes the keys of an IAM user; GCS answers the same API at
``https://storage.googleapis.com`` with HMAC keys (``PINECALL_RECORDINGS_ACCESS_KEY_ID`` and
``…_SECRET_ACCESS_KEY``), which is what the chart's values take; the lab runs moto's S3 server
on loopback (``pinecall_loadlab.vendors.s3``).
"""

from __future__ import annotations

from pinecall_servicekit.settings import Settings


class RecordingsSettings(Settings, frozen=True, kw_only=True):
    """The recordings' bucket (a base for a service's own settings). No bucket: nothing is
    recorded, and a call whose agent asks for it gets ``call.recording_failed`` saying so."""

    recordings_bucket: str = ""
    """``PINECALL_RECORDINGS_BUCKET``: the bucket's name; empty: no bucket."""
    recordings_prefix: str = "recordings"
    """``PINECALL_RECORDINGS_PREFIX``: the keys' first part (no leading or trailing ``/``)."""
    recordings_endpoint: str | None = None
    """``PINECALL_RECORDINGS_ENDPOINT``: the S3 API's URL; None: AWS's own for the region."""
    recordings_region: str = "us-east-1"
    recordings_access_key_id: str | None = None
    """The bucket's key id (an HMAC key's on GCS); None: the SDK's own chain (an IAM role)."""
    recordings_secret_access_key: str | None = None
    recordings_url_ttl_s: int = 300
    """Seconds a signed URL call-log hands out stays valid (S3 allows 1 to 604800)."""
