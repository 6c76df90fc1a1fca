"""``GET /v1/calls/{call}/recording``: a call's recordings, read only through signed URLs that
expire (issue 19, "An app or an operator reads a recording through a short-lived signed URL").

The answer is JSON (:class:`~pinecall_contracts.recordings.RecordingLinks`), not a redirect: a
call may hold more than one recording (the agent's, and the sentence said into a dead worker's
room), and each comes with its length, size, sha256 and whether it is whole; each ``url`` is a
presigned S3 ``GetObject`` valid ``PINECALL_RECORDINGS_URL_TTL_S`` seconds (300), signed here
with the bucket's keys, which never leave call-log.

Who: the app key of the call's environment naming the call's org (``?org=``: keys carry no org,
as at ``/v1/agents``), or an operator key. A key of another environment is 403; an app key naming
another org is 404, as for a call that does not exist (nothing is said of another org's calls);
no ``?org=`` with an app key is 422; a call with no recording on its log is 404; a call-log with
no bucket configured is 503.
"""

from __future__ import annotations

import datetime as dt

from litestar import get

from pinecall_call_log.access import AnyRequest, CallPath, environment_for, key_of, service_of
from pinecall_call_log.definitions import OrgQuery
from pinecall_clients.bucket import Bucket, BucketAccess
from pinecall_contracts import entries
from pinecall_contracts.recordings import CHANNELS, RecordingLink, RecordingLinks
from pinecall_servicekit.errors import NotFound, Unavailable, Unprocessable
from pinecall_servicekit.http import problems


@get("/v1/calls/{call:str}/recording", responses=problems(400, 401, 403, 404, 422, 503))
async def recording(request: AnyRequest, call: CallPath, org: OrgQuery = None) -> RecordingLinks:
    """The call's recordings, each with a signed URL that expires (see the module)."""
    key = await key_of(request)
    service = service_of(request)
    if key.kind == "app" and org is None:
        raise Unprocessable(
            "name the call's org: ?org=<org> (a key carries no org)",
            errors=[{"message": "required", "key": "org", "source": "query"}],
        )
    record = await service.identity(call)
    environment_for(key, record.environment)
    if key.kind == "app" and org != record.org:
        raise NotFound(f"no call {call}")  # another org's: the same answer as none
    access = BucketAccess.of(service.settings)
    if access is None:
        raise Unavailable("no recordings' bucket is configured (PINECALL_RECORDINGS_*)")
    log = await service.store.calls.read(call)
    made = [e.data for e in log.entries if e.kind == entries.CALL_RECORDING]
    if not made:
        raise NotFound(f"call {call} has no recording")
    ttl = service.settings.recordings_url_ttl_s
    expires_at = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=ttl)
    links = []
    async with Bucket(access) as bucket:
        for data in made:
            url = await bucket.signed_url(access.key_of(data["url"]), ttl)
            links.append(
                RecordingLink(
                    url=url,
                    expires_at=expires_at,
                    seconds=data["seconds"],
                    bytes=data["bytes"],
                    sha256=data["sha256"],
                    channels=data.get("channels", list(CHANNELS)),
                    job=data.get("job", "answer"),
                    complete=data.get("complete", True),
                )
            )
    return RecordingLinks(call=call, recordings=links)


ROUTES = [recording]
