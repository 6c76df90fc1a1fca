"""``GET /v1/calls/{call}/recording`` (issue 19, acceptance 5): a call's recording read only
through a signed URL that expires, with the app key of its org or an operator key; another org's
or another environment's key refused with a problem detail; a real call-log replica on real
Postgres and NATS, moto's S3 server on loopback as the bucket."""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import AsyncIterator
from urllib.parse import parse_qs, urlsplit

import httpx
import msgspec
import pytest

from pinecall_call_log.app import create_app
from pinecall_call_log.settings import CallLogSettings
from pinecall_clients.bucket import Bucket
from pinecall_loadlab.vendors.s3 import S3Fake
from pinecall_loadlab.vendors.s3_testing import *  # noqa: F403  (the S3 fake's fixtures)
from pinecall_loadlab.vendors.s3_testing import BUCKET, recordings_settings
from pinecall_testkit.call_log import Keys, Replica, bearer, entry, opening, running

KEY = "recordings/production/org_acme/call_1/answer.ogg"
DATA = b"OggS" + bytes(range(256)) * 40
PATH = "/v1/calls/call_1/recording"


@pytest.fixture
async def recorded(
    s3: S3Fake, bucket: Bucket, call_log_settings: CallLogSettings, keys: Keys
) -> AsyncIterator[Replica]:
    """A replica signing the fake's URLs, and call_1 whose log says its recording, in the
    bucket as one part."""
    upload = await bucket.start_upload(KEY)
    part = await bucket.put_part(KEY, upload, 1, DATA)
    await bucket.complete(KEY, upload, [part])
    settings = msgspec.structs.replace(
        call_log_settings, **recordings_settings(s3), recordings_url_ttl_s=120
    )
    said = {
        "url": f"s3://{BUCKET}/{KEY}",
        "seconds": 12.5,
        "bytes": len(DATA),
        "sha256": hashlib.sha256(DATA).hexdigest(),
        "channels": ["caller", "agent"],
        "job": "answer",
        "complete": True,
    }
    async with running(create_app(settings)) as replica:
        fleet = bearer(keys.production)
        assert (await replica.post("/v1/calls", json=opening(), headers=fleet)).status_code == 200
        batch = {"after": 0, "entries": [entry(0, "call.recording") | {"data": said}]}
        written = await replica.post("/v1/calls/call_1/entries", json=batch, headers=fleet)
        assert written.status_code == 200, written.text
        yield replica


async def test_the_orgs_app_reads_it_through_a_signed_url_that_expires(
    recorded: Replica, keys: Keys
) -> None:
    asked = dt.datetime.now(dt.UTC)
    r = await recorded.get(PATH, params={"org": "org_acme"}, headers=bearer(keys.app))
    assert r.status_code == 200, r.text
    [link] = r.json()["recordings"]
    assert (link["bytes"], link["seconds"], link["complete"]) == (len(DATA), 12.5, True)
    query = parse_qs(urlsplit(link["url"]).query)
    assert query["X-Amz-Expires"] == ["120"]
    assert "X-Amz-Signature" in query
    expires_at = dt.datetime.fromisoformat(link["expires_at"])
    assert dt.timedelta(seconds=119) < expires_at - asked < dt.timedelta(seconds=125)
    assert "lab" not in link["url"].split("X-Amz-Credential=")[0]  # no key but the signature's id
    async with httpx.AsyncClient() as http:
        got = await http.get(link["url"])
    assert got.status_code == 200
    assert hashlib.sha256(got.content).hexdigest() == link["sha256"]


async def test_an_operator_reads_it_too(recorded: Replica, keys: Keys) -> None:
    r = await recorded.get(PATH, headers=bearer(keys.operator))
    assert r.status_code == 200, r.text
    assert len(r.json()["recordings"]) == 1


@pytest.mark.parametrize(
    ("who", "org", "status"),
    [
        ("app", "org_other", 404),  # another org's: as if there were no such call
        ("app_sandbox", "org_acme", 403),  # another environment's key
        ("app", None, 422),  # an app key names its org
        ("production", "org_acme", 403),  # a fleet key reads no recording
    ],
)
async def test_another_orgs_or_environments_key_is_refused(
    recorded: Replica, keys: Keys, who: str, org: str | None, status: int
) -> None:
    params = {"org": org} if org else {}
    r = await recorded.get(PATH, params=params, headers=bearer(getattr(keys, who)))
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    assert "X-Amz" not in r.text


async def test_a_call_with_no_recording_is_404(recorded: Replica, keys: Keys) -> None:
    fleet = bearer(keys.production)
    opened = await recorded.post("/v1/calls", json=opening("call_2"), headers=fleet)
    assert opened.status_code == 200
    r = await recorded.get(
        "/v1/calls/call_2/recording", params={"org": "org_acme"}, headers=bearer(keys.app)
    )
    assert r.status_code == 404
    assert "no recording" in r.json()["detail"]
