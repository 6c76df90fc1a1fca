"""pytest fixtures for the S3 fake (:mod:`pinecall_loadlab.vendors.s3`); import them into a
conftest.py or a test module.

    from pinecall_loadlab.vendors.s3_testing import *  # noqa: F403

- `s3` → a started `S3Fake` holding the empty bucket :data:`BUCKET`, stopped after the test;
- `bucket_access` → the `BucketAccess` of that bucket at the fake (keys ``lab``/``lab``, which
  moto does not check; prefix ``recordings``);
- `bucket` → an open `Bucket` (pinecall_clients) on it, closed after the test.

A service pointed at the fake takes the same values from :func:`recordings_settings`.
Needs no extra: moto is one of loadlab's own dependencies, the bucket client a library.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from pinecall_clients.bucket import Bucket, BucketAccess

from .s3 import S3Fake

__all__ = ["BUCKET", "S3Fake", "bucket", "bucket_access", "recordings_settings", "s3"]

BUCKET = "recordings"
"""The bucket the `s3` fixture makes."""
KEY_ID = SECRET = "lab"


def recordings_settings(s3: S3Fake) -> dict[str, str]:
    """The recordings' settings of a service writing to or signing for the fake's bucket, by
    their field names (``RecordingsSettings``; upper-case them with ``PINECALL_`` for an
    environment)."""
    return {
        "recordings_bucket": BUCKET,
        "recordings_endpoint": s3.url,
        "recordings_access_key_id": KEY_ID,
        "recordings_secret_access_key": SECRET,
    }


@pytest.fixture
def s3() -> Iterator[S3Fake]:
    with S3Fake.started(buckets=[BUCKET]) as fake:
        yield fake


@pytest.fixture
def bucket_access(s3: S3Fake) -> BucketAccess:
    return BucketAccess(bucket=BUCKET, endpoint=s3.url, key_id=KEY_ID, secret=SECRET)


@pytest.fixture
async def bucket(bucket_access: BucketAccess) -> AsyncIterator[Bucket]:
    async with Bucket(bucket_access) as opened:
        yield opened
