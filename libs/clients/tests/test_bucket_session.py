"""One aiobotocore session a process, its S3 model loaded at import (``pinecall_clients.bucket``):
a call's job that starts recording makes its client from it without reading botocore's data on
its event loop (the probe saw 1.1–2.3 s blocked in ``list_available_services``)."""

from __future__ import annotations

import asyncio
import gc
import threading
import warnings
from typing import Any

import pytest

from pinecall_clients import bucket as buckets
from pinecall_clients.bucket import Bucket, BucketAccess, BucketRefused
from pinecall_loadlab.vendors.s3_testing import *  # noqa: F403  (the S3 fake: s3, bucket_access)


async def test_every_bucket_client_comes_from_the_one_session_loaded_at_import() -> None:
    loader = buckets._SESSION.get_component("data_loader")
    loaded = set(loader._cache)  # botocore's instance cache: (method, arguments…)
    assert ("load_service_model", "s3", "service-2", "api_version", None) in loaded
    access = BucketAccess(bucket="b", endpoint="http://127.0.0.1:9", key_id="k", secret="s")
    async with Bucket(access) as one:
        assert one._s3 is not None
    # making a client read nothing more of botocore's data
    assert set(loader._cache) == loaded


async def test_a_client_opened_in_a_thread_asks_and_closes_on_the_callers_loop(
    bucket_access: BucketAccess,
) -> None:
    """With static keys the client is opened and its operations prepared in a thread of its own
    (``bucket._opened``); what it binds to a loop (aiohttp's sessions) is made at the first
    request, on the caller's loop, and closed there."""
    async with Bucket(bucket_access) as one:
        model = one._s3.meta.service_model
        for operation in buckets.WARMED:  # each answer's shape resolved before any request
            api = one._s3.meta.method_to_api_mapping[operation]
            assert "output_shape" in model.operation_model(api).__dict__
        sessions = one._s3._endpoint.http_session._sessions
        assert sessions == {}  # nothing made on the thread's loop
        upload = await one.start_upload("k.ogg")
        part = await one.put_part("k.ogg", upload, 1, b"audio")
        await one.complete("k.ogg", upload, [part])
        assert await one.get("k.ogg") == b"audio"
        assert [s._loop for s in sessions.values()] == [asyncio.get_running_loop()]
    assert one._s3 is None


async def test_clients_are_opened_on_one_thread_started_before_any_call(
    bucket_access: BucketAccess,
) -> None:
    """A job's prewarm starts the opening thread (``start_opening``), so no call's loop waits for
    a thread to start; every client of the process is opened on it."""
    buckets.start_opening()
    started = [t for t in threading.enumerate() if t.name.startswith("bucket-opening")]
    assert len(started) == 1
    for _ in range(2):
        async with Bucket(bucket_access) as one:
            assert await one.uploads() == []
    assert [t for t in threading.enumerate() if t.name.startswith("bucket-opening")] == started


@pytest.mark.parametrize(
    ("bucket", "key_id", "secret", "endpoint"),
    [
        ("bad name!", "lab", "lab", None),  # a name S3 does not take, static keys
        ("bad name!", None, None, None),  # the same, the credential chain's path
        ("recordings", "lab", None, None),  # half the keys
        ("recordings", "lab", "lab", "not a url"),
    ],
)
async def test_what_botocore_refuses_before_any_request_is_refused_at_once(
    s3: Any, bucket: str, key_id: str | None, secret: str | None, endpoint: str | None
) -> None:
    access = BucketAccess(bucket=bucket, endpoint=endpoint or s3.url, key_id=key_id, secret=secret)
    # no botocore exception, and not retried as if the bucket were down (a retried error ends
    # BucketUnavailable once the retry's time runs out)
    with pytest.raises(BucketRefused) as refused:
        async with Bucket(access, retry_s=1.0) as one:
            await one.start_upload("k.ogg")
    assert refused.value.status is None


async def test_an_open_cancelled_leaves_no_coroutine_unawaited(
    bucket_access: BucketAccess,
) -> None:
    """Opens cancelled while queued behind others, or while the thread runs them: nothing made
    for them is left unawaited, and the thread opens the next."""
    buckets.start_opening()
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        opening = [asyncio.create_task(Bucket(bucket_access).__aenter__()) for _ in range(10)]
        await asyncio.sleep(0)
        for task in opening:
            task.cancel()
        await asyncio.gather(*opening, return_exceptions=True)
        await asyncio.wrap_future(buckets._opening().submit(int))  # the thread drained
        gc.collect()
    assert [w for w in said if issubclass(w.category, RuntimeWarning)] == []
    async with Bucket(bucket_access) as one:
        assert await one.uploads() == []
