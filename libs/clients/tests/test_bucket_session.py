"""One aiobotocore session a process, its S3 model loaded at import (``pinecall_clients.bucket``):
a call's job that starts recording makes its client from it without reading botocore's data on
its event loop (the probe saw 1.1–2.3 s blocked in ``list_available_services``)."""

from __future__ import annotations

from pinecall_clients import bucket
from pinecall_clients.bucket import Bucket, BucketAccess


async def test_every_bucket_client_comes_from_the_one_session_loaded_at_import() -> None:
    loader = bucket._SESSION.get_component("data_loader")
    loaded = set(loader._cache)  # botocore's instance cache: (method, arguments…)
    assert ("load_service_model", "s3", "service-2", "api_version", None) in loaded
    access = BucketAccess(bucket="b", endpoint="http://127.0.0.1:9", key_id="k", secret="s")
    async with Bucket(access) as one:
        assert one._s3 is not None
    # making a client read nothing more of botocore's data
    assert set(loader._cache) == loaded
