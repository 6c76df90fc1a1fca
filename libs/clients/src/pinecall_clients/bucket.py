"""The recordings' bucket over the S3 API (aiobotocore): multipart uploads, reads, signed URLs.

S3's rules this follows (Amazon S3 User Guide, "Multipart upload limits"): part numbers 1 to
10 000; every part at least 5 MiB except the last; a part uploaded again under the same number
replaces the one before (``UploadPart``: "if you upload a new part using the same part number
that was used with a previous part, the previously uploaded part is overwritten"); an upload
with no part cannot be completed, only aborted; an upload neither completed nor aborted keeps
its parts (and their cost) until a lifecycle rule removes it. A presigned URL lives 1 s to 7 days.

Errors: :class:`BucketUnavailable` when the bucket did not answer, or answered 5xx (``SlowDown``,
``InternalError``), until the retry's time ran out (stamina; botocore's own retries are off, so
one policy governs); :class:`BucketRefused` for a 4xx, which no retry changes (``AccessDenied``,
``NoSuchUpload``, ``EntityTooSmall``) and for what botocore refuses before any request (a
malformed bucket name, endpoint or region, half the keys). No botocore exception escapes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Final, TypeVar

import stamina
from aiobotocore.config import AioConfig
from aiobotocore.session import AioSession, get_session
from botocore.exceptions import BotoCoreError, ClientError, ParamValidationError

from pinecall_servicekit.recordings import RecordingsSettings

T = TypeVar("T")

MIN_PART_BYTES = 5 * 1024 * 1024
"""S3's smallest part but the last (5 MiB)."""
MAX_PARTS = 10_000
RETRY_S = 10.0
"""Seconds a request is retried while the bucket does not answer or answers 5xx."""


class BucketError(Exception):
    """The bucket did not do what was asked; ``status`` is its HTTP answer (None: none)."""

    def __init__(self, message: str, status: int | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.status, self.code = status, code


class BucketUnavailable(BucketError):
    """Nothing answered, or a 5xx, until the retry's time ran out."""


class BucketRefused(BucketError):
    """A 4xx: the bucket's answer, which a retry does not change."""


@dataclass(frozen=True, slots=True)
class Part:
    """An uploaded part: its number (1…), its ETag and its size in bytes."""

    number: int
    etag: str
    size: int


@dataclass(frozen=True, slots=True, kw_only=True)
class BucketAccess:
    """Where the recordings go and with which keys (:class:`RecordingsSettings`)."""

    bucket: str
    prefix: str = "recordings"
    endpoint: str | None = None
    region: str = "us-east-1"
    key_id: str | None = None
    secret: str | None = None

    @classmethod
    def of(cls, settings: RecordingsSettings) -> BucketAccess | None:
        """The settings' bucket; None when they name none."""
        if not settings.recordings_bucket:
            return None
        return cls(
            bucket=settings.recordings_bucket,
            prefix=settings.recordings_prefix.strip("/"),
            endpoint=settings.recordings_endpoint,
            region=settings.recordings_region,
            key_id=settings.recordings_access_key_id,
            secret=settings.recordings_secret_access_key,
        )

    def key(self, environment: str, org: str, call: str, job: str) -> str:
        """``<prefix>/<environment>/<org>/<call>/<job>.ogg``: one object per job of a call."""
        return "/".join(p for p in (self.prefix, environment, org, call, f"{job}.ogg") if p)

    def url(self, key: str) -> str:
        """``s3://<bucket>/<key>``, as ``call.recording`` names it."""
        return f"s3://{self.bucket}/{key}"

    def key_of(self, url: str) -> str:
        """The key of an ``s3://`` URL of this bucket; ``ValueError`` for another's."""
        head = f"s3://{self.bucket}/"
        if not url.startswith(head):
            raise ValueError(f"{url!r} is not in the bucket {self.bucket}")
        return url[len(head) :]


def _warmed() -> AioSession:
    """The process's one aiobotocore session, its S3 model and endpoint data loaded now.

    botocore loads and parses them (gzipped JSON, megabytes) the first time a session makes a
    client, on the caller's event loop: a call's job blocked 1.1–2.3 s as its recording started,
    just as the greeting played (the probe of ``up``, worker logs: ``list_available_services``).
    Made at import, so livekit-agents' forkserver, which preloads the worker's modules, makes it
    once and every call's process inherits it: a client then takes ~12 ms."""
    session = get_session()
    loader = session.get_component("data_loader")
    for kind in ("service-2", "endpoint-rule-set-1"):
        loader.load_service_model("s3", kind, api_version=None)  # as create_client asks
    for name in ("endpoints", "partitions", "_retry", "sdk-default-configuration"):
        loader.load_data(name)
    session._get_internal_component("endpoint_resolver")
    return session


_SESSION: Final = _warmed()


WARMED: Final[dict[str, dict[str, object]]] = {
    "create_multipart_upload": {},
    "upload_part": {"UploadId": "u", "PartNumber": 1},
    "list_parts": {"UploadId": "u"},
    "complete_multipart_upload": {"UploadId": "u"},
    "abort_multipart_upload": {"UploadId": "u"},
    "get_object": {},
}
"""The operations a call's recording asks, and what each needs besides the bucket and key."""


_OPENING: list[ThreadPoolExecutor] = []


def _opening() -> ThreadPoolExecutor:
    """The process's one thread that opens clients (:func:`_opened_off_loop`), started on first
    use."""
    if not _OPENING:
        _OPENING.append(ThreadPoolExecutor(1, thread_name_prefix="bucket-opening"))
    return _OPENING[0]


def start_opening() -> None:
    """Start the thread that opens this process's clients now, before a call needs it: a thread
    started from a loop holds that loop until the new thread runs (``Thread.start`` waits for
    it), which ``up --calls 40 --rate 2`` saw last 100–200 ms on a recording job's loop.
    A job process's prewarm calls it (``pinecall_worker.call.session.prewarm``)."""
    _opening().submit(int).result()


def _client_options(access: BucketAccess) -> dict[str, Any]:
    """``create_client``'s arguments for ``access`` (after ``"s3"``)."""
    return {
        "region_name": access.region,
        "endpoint_url": access.endpoint,
        "aws_access_key_id": access.key_id,
        "aws_secret_access_key": access.secret,
        "config": AioConfig(
            retries={"total_max_attempts": 1},  # stamina retries (above): one policy
            signature_version="s3v4",  # signed URLs say X-Amz-Expires (SigV2's are legacy)
            connect_timeout=5,
            read_timeout=30,
            s3={"addressing_style": "path"} if access.endpoint else {},
        ),
    }


def _opened_off_loop(access: BucketAccess) -> tuple[Any, Any]:
    """``(context, client)`` of ``access``, opened and its operations prepared, on the process's
    opening thread (:func:`start_opening`; its own ``asyncio.run``): what botocore does in Python
    before a first request — the client's class and methods, the endpoint rules, each
    operation's shapes, serializer and signing — off the caller's loop. ``up --calls 40 --rate 2``
    (2026-12-04): a recording job's loop blocked 12 times for 110–300 ms (15–56 ms of its CPU) in
    these, as its greeting played.

    aiobotocore 3.10 binds nothing to the loop that opens a client (``AIOHTTPSession`` makes its
    aiohttp sessions, and takes its lock, at the first request and the close), so the client is
    then used and closed on the caller's loop. Only for static keys: a credential chain's
    provider would keep this loop's locks. Each operation is prepared by a presigned URL of it
    (no request made: the serializer, the endpoint rules for this bucket, the signer) and its
    answer's shape resolved (the parser's); a preparation botocore refuses (a bucket name it
    does not take) is left to the first request, whose error says it as before."""

    async def opened() -> tuple[Any, Any]:
        context = _SESSION.create_client("s3", **_client_options(access))
        s3 = await context.__aenter__()
        model = s3.meta.service_model
        try:
            for operation, extra in WARMED.items():
                params: dict[str, object] = {"Bucket": access.bucket, "Key": "warm", **extra}
                await s3.generate_presigned_url(operation, Params=params)
                api = s3.meta.method_to_api_mapping[operation]
                _resolved(model.operation_model(api).output_shape)
        except (BotoCoreError, ValueError):
            pass  # prepared as far as botocore went: the rest on first use
        except BaseException:
            await context.__aexit__(None, None, None)
            raise
        return context, s3

    return asyncio.run(opened())


def _close_off_loop(opened: Future[tuple[Any, Any]]) -> None:
    """Close, on the opening thread, a client opened for a caller that was cancelled meanwhile
    (nothing of it is bound to a loop: it made no request)."""
    if opened.cancelled() or opened.exception() is not None:
        return
    context, _ = opened.result()
    _opening().submit(asyncio.run, context.__aexit__(None, None, None))


def _resolved(shape: Any, seen: set[str] | None = None) -> None:
    """Resolve ``shape`` and every shape under it (botocore resolves each on first use)."""
    seen = set() if seen is None else seen
    if shape is None or shape.name in seen:
        return
    seen.add(shape.name)
    for child in getattr(shape, "members", {}).values():
        _resolved(child, seen)
    for under in ("member", "key", "value"):  # a list's, a map's
        _resolved(getattr(shape, under, None), seen)


def _retryable(exc: Exception) -> bool:
    if isinstance(exc, ClientError):
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        return status is None or status >= 500 or status in (408, 429)
    if isinstance(exc, ParamValidationError):
        return False
    return isinstance(exc, BotoCoreError | OSError | TimeoutError)


class Bucket:
    """An open S3 client of one :class:`BucketAccess` (``async with Bucket(access) as b``)."""

    def __init__(self, access: BucketAccess, *, retry_s: float = RETRY_S) -> None:
        self.access, self.retry_s = access, retry_s
        self._context: Any = None
        self._s3: Any = None

    async def __aenter__(self) -> Bucket:
        """Open the client; :class:`BucketRefused` when botocore cannot make one of the access
        (a malformed endpoint, region or bucket name, half the keys): no retry changes that."""
        try:
            if self.access.key_id and self.access.secret:
                opened = _opening().submit(_opened_off_loop, self.access)
                try:
                    self._context, self._s3 = await asyncio.wrap_future(opened)
                except asyncio.CancelledError:  # the thread may still open it: closed there then
                    opened.add_done_callback(_close_off_loop)
                    raise
            else:  # credentials resolved by botocore's chain: on this loop, whose locks they take
                self._context = _SESSION.create_client("s3", **_client_options(self.access))
                self._s3 = await self._context.__aenter__()
        except (BotoCoreError, ValueError) as exc:
            self._context = self._s3 = None
            raise BucketRefused(
                f"no client of {self.access.bucket} can be made: {exc}", None, type(exc).__name__
            ) from exc
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        context, self._context, self._s3 = self._context, None, None
        if context is not None:
            await context.__aexit__(kind, exc, tb)

    async def _ask(self, what: str, request: Callable[[], Awaitable[T]]) -> T:
        """``request``, retried (stamina) while :func:`_retryable`; errors as :class:`BucketError`."""
        try:
            retrying = stamina.retry_context(
                on=_retryable, attempts=None, timeout=self.retry_s, wait_initial=0.2, wait_max=2.0
            ).with_name(f"S3 {what}", (), {"bucket": self.access.bucket})
            async for attempt in retrying:
                with attempt:
                    return await request()
            raise AssertionError("stamina stopped retrying without an error")  # never reached
        except ClientError as exc:
            error = exc.response.get("Error", {})
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            message = f"{what} on {self.access.bucket}: {status} {error.get('Code')}"
            kind = BucketUnavailable if _retryable(exc) else BucketRefused
            raise kind(message, status, error.get("Code")) from exc
        except ParamValidationError as exc:  # a bucket name or key botocore does not take
            message = f"{what} on {self.access.bucket}: {exc}"
            raise BucketRefused(message, None, "ParamValidation") from exc
        except (BotoCoreError, OSError, TimeoutError) as exc:
            raise BucketUnavailable(f"{what} on {self.access.bucket}: {exc!r}") from exc

    async def start_upload(self, key: str) -> str:
        """CreateMultipartUpload of ``key`` (``audio/ogg``); its upload id."""
        bucket = self.access.bucket
        answer = await self._ask(
            "CreateMultipartUpload",
            lambda: self._s3.create_multipart_upload(
                Bucket=bucket, Key=key, ContentType="audio/ogg"
            ),
        )
        return str(answer["UploadId"])

    async def put_part(self, key: str, upload_id: str, number: int, data: bytes) -> Part:
        """UploadPart ``number`` (1 to 10 000) of ``data``; the same number again replaces it."""
        bucket = self.access.bucket
        answer = await self._ask(
            "UploadPart",
            lambda: self._s3.upload_part(
                Bucket=bucket, Key=key, UploadId=upload_id, PartNumber=number, Body=data
            ),
        )
        return Part(number, str(answer["ETag"]), len(data))

    async def parts(self, key: str, upload_id: str) -> list[Part]:
        """ListParts: every part uploaded so far (``BucketRefused`` 404 ``NoSuchUpload`` when
        the upload was completed or aborted)."""
        bucket, found, marker = self.access.bucket, [], 0
        while True:
            page = await self._ask(
                "ListParts",
                lambda m=marker: self._s3.list_parts(  # type: ignore[misc]
                    Bucket=bucket, Key=key, UploadId=upload_id, PartNumberMarker=m
                ),
            )
            found += [Part(p["PartNumber"], p["ETag"], p["Size"]) for p in page.get("Parts", [])]
            if not page.get("IsTruncated"):
                return found
            marker = page["NextPartNumberMarker"]

    async def complete(self, key: str, upload_id: str, parts: list[Part]) -> None:
        """CompleteMultipartUpload of ``parts`` (at least one), in their numbers' order."""
        bucket = self.access.bucket
        listed = [{"PartNumber": p.number, "ETag": p.etag} for p in sorted(parts, key=_number)]
        await self._ask(
            "CompleteMultipartUpload",
            lambda: self._s3.complete_multipart_upload(
                Bucket=bucket, Key=key, UploadId=upload_id, MultipartUpload={"Parts": listed}
            ),
        )

    async def abort(self, key: str, upload_id: str) -> None:
        """AbortMultipartUpload: its parts are deleted; one already gone is no error."""
        bucket = self.access.bucket
        try:
            await self._ask(
                "AbortMultipartUpload",
                lambda: self._s3.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=upload_id),
            )
        except BucketRefused as exc:
            if exc.status != 404:
                raise

    async def uploads(self) -> list[tuple[str, str]]:
        """ListMultipartUploads: ``(key, upload_id)`` of each upload neither completed nor
        aborted under the prefix (the first 1000)."""
        bucket, prefix = self.access.bucket, self.access.prefix
        page = await self._ask(
            "ListMultipartUploads",
            lambda: self._s3.list_multipart_uploads(Bucket=bucket, Prefix=prefix),
        )
        return [(u["Key"], u["UploadId"]) for u in page.get("Uploads", [])]

    async def get(self, key: str) -> bytes:
        """GetObject: the object's bytes."""
        bucket = self.access.bucket

        async def read() -> bytes:
            answer = await self._s3.get_object(Bucket=bucket, Key=key)
            async with answer["Body"] as body:
                data: bytes = await body.read()
                return data

        return await self._ask("GetObject", read)

    async def signed_url(self, key: str, expires_s: int) -> str:
        """A presigned GetObject URL of ``key`` valid ``expires_s`` seconds (no request made)."""
        url: str = await self._s3.generate_presigned_url(
            "get_object", Params={"Bucket": self.access.bucket, "Key": key}, ExpiresIn=expires_s
        )
        return url


def _number(part: Part) -> int:
    return part.number
