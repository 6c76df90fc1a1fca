"""The NATS bus: typed publish, subscribe and request, JetStream KV, and ``nats.micro`` services.

Every message is a :class:`pinecall_contracts.base.Contract` encoded as JSON; the W3C
``traceparent`` of the current span travels in the headers, and a handler runs inside a span
continued from it. Subjects come only from :class:`pinecall_contracts.subjects.Subjects`.

Ops verbs are ``nats.micro`` services (NATS ADR-32): a handler returns a Contract, or raises a
:class:`~pinecall_servicekit.errors.PinecallError`, which travels as ``Nats-Service-Error-Code``
(the HTTP status) with the problem detail as the body; :meth:`Bus.request` raises the same error
on the caller's side. NATS that does not answer is
:class:`~pinecall_servicekit.errors.BusUnavailable`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

import msgspec
import nats
import nats.js.errors
import stamina
from nats import micro
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.js.api import RetentionPolicy, StorageType, StreamConfig
from nats.js.errors import BucketNotFoundError
from nats.js.kv import KeyValue
from nats.micro.request import Request
from nats.micro.service import Service
from opentelemetry import propagate, trace

from pinecall_contracts.base import Contract, decode, encode
from pinecall_contracts.plain import plainly
from pinecall_contracts.problems import ProblemDetails
from pinecall_contracts.subjects import Subjects
from pinecall_servicekit.errors import (
    BadRequest,
    BusUnavailable,
    PinecallError,
    from_problem,
    told,
)
from pinecall_servicekit.natsauth import redact

C = TypeVar("C", bound=Contract)
R = TypeVar("R", bound=Contract)
T = TypeVar("T")

STREAM_RETRY_S = 10.0
"""Seconds a stream's making is asked again while nats-server fails to make its store."""
STORE_FAILED = 10049
"""JetStream's ``err_code`` of ``error creating store for stream`` (``JSStreamStoreFailedF``)."""


def _store_failed(exc: Exception) -> bool:
    return isinstance(exc, nats.js.errors.ServerError) and exc.err_code == STORE_FAILED


async def _until_stored(what: str, make: Callable[[], Awaitable[T]]) -> T:
    """``make()``, asked again for :data:`STREAM_RETRY_S` while nats-server fails to make the
    store (:data:`STORE_FAILED`); any other error raised at once."""
    retrying = stamina.retry_context(
        on=_store_failed,
        attempts=None,
        timeout=STREAM_RETRY_S,
        wait_initial=0.05,
        wait_max=1.0,
        wait_jitter=0.1,
    ).with_name(what, (), {})
    async for attempt in retrying:
        with attempt:
            return await make()
    raise AssertionError("stamina stopped retrying without an error")  # never reached


ERROR_CODE_HEADER = "Nats-Service-Error-Code"
_log = logging.getLogger(__name__)
_tracer = trace.get_tracer(__name__)


class ServicePing(msgspec.Struct, frozen=True, kw_only=True):
    """A ``nats.micro`` replica's answer to ``$SRV.PING`` (NATS's own format, not a contract)."""

    name: str
    id: str
    version: str


def _headers(extra: dict[str, str] | None = None) -> dict[str, str]:
    headers = dict(extra or {})
    propagate.inject(headers)
    return headers


class Bus:
    """One NATS connection and the namespace's subjects.

    Open with :meth:`connect` in a lifespan and :meth:`close` (drain) in its ``finally``.
    """

    def __init__(self, client: Client, subjects: Subjects) -> None:
        self.client = client
        self.subjects = subjects
        self.js = client.jetstream()

    @classmethod
    async def connect(
        cls, url: str, namespace: str, *, name: str, connect_timeout_s: float = 5.0
    ) -> Bus:
        """Connect to ``url`` (reconnecting for ever once connected); ``BusUnavailable`` if no
        connection is made within ``connect_timeout_s`` seconds."""
        subjects = Subjects(namespace)
        first: list[Exception] = []  # what the first connection's tries met: said once, below
        connected = False

        async def on_error(exc: Exception) -> None:
            if connected:
                _log.warning("nats: %s", exc)
            else:
                first.append(exc)

        try:
            # nats-py keeps retrying a first connection that fails when reconnects are allowed:
            # bound the first one, then reconnect for ever.
            async with asyncio.timeout(connect_timeout_s):
                client = await nats.connect(
                    url,
                    name=name,
                    connect_timeout=2,
                    allow_reconnect=True,
                    max_reconnect_attempts=-1,
                    reconnect_time_wait=0.5,
                    error_cb=on_error,
                )
        except Exception as exc:  # nats-py raises a handful of unrelated types here
            met = first[-1] if first else exc
            why = str(met) or type(met).__name__
            raise BusUnavailable(
                f"NATS at {redact(url)} did not answer in {connect_timeout_s:g} s: {why}"
            ) from exc
        connected = True
        return cls(client, subjects)

    @property
    def connected(self) -> bool:
        return bool(self.client.is_connected)

    async def publish(self, subject: str, message: Contract) -> None:
        """Publish ``message`` on a core subject (at most once)."""
        await self.client.publish(subject, encode(message), headers=_headers())

    async def subscribe(
        self,
        subject: str,
        kind: type[C],
        handler: Callable[[C], Awaitable[None]],
        *,
        queue: str = "",
    ) -> Subscription:
        """Call ``handler`` with every ``kind`` on ``subject``; a message that does not decode
        is logged and dropped (a newer publisher's breaking change must not stop the reader)."""

        async def on_message(msg: Msg) -> None:
            try:
                message = decode(msg.data, kind)
            except msgspec.MsgspecError as exc:
                _log.warning("dropped a malformed %s on %s: %s", kind.__name__, msg.subject, exc)
                return
            ctx = propagate.extract(msg.headers or {})
            with _tracer.start_as_current_span(f"receive {kind.__name__}", context=ctx):
                await handler(message)

        return await self.client.subscribe(subject, queue=queue, cb=on_message)

    async def request(
        self,
        subject: str,
        message: Contract,
        reply: type[R],
        *,
        timeout: float = 2.0,
        headers: dict[str, str] | None = None,
    ) -> R:
        """Ask a service; returns its ``reply``, or raises the error it answered with.

        No responder or no answer within ``timeout`` seconds is ``BusUnavailable``.
        """
        try:
            msg = await self.client.request(
                subject, encode(message), timeout=timeout, headers=_headers(headers)
            )
        except (nats.errors.NoRespondersError, nats.errors.TimeoutError) as exc:
            raise BusUnavailable(f"nobody answered on {subject}: {type(exc).__name__}") from exc
        if msg.headers and ERROR_CODE_HEADER in msg.headers:
            try:
                problem = msgspec.json.decode(msg.data, type=ProblemDetails)
            except msgspec.MsgspecError:
                problem = ProblemDetails(
                    title=msg.headers.get("Nats-Service-Error", "error"),
                    status=int(msg.headers[ERROR_CODE_HEADER]),
                )
            raise from_problem(problem)
        return decode(msg.data, reply)

    async def ping(self, service: str, *, timeout: float = 2.0) -> ServicePing:
        """Which replica of the ``nats.micro`` service ``service`` answers ``$SRV.PING`` first
        (NATS ADR-32 discovery); ``BusUnavailable`` when none does within ``timeout`` seconds."""
        subject = self.subjects.ping(service)
        try:
            msg = await self.client.request(subject, b"", timeout=timeout)
            return msgspec.json.decode(msg.data, type=ServicePing)
        except (nats.errors.NoRespondersError, nats.errors.TimeoutError) as exc:
            raise BusUnavailable(f"nobody answered on {subject}: {type(exc).__name__}") from exc
        except msgspec.MsgspecError as exc:
            raise BusUnavailable(f"{subject} answered with no ping response: {exc}") from exc

    async def ensure_stream(
        self,
        name: str,
        subjects: list[str],
        *,
        duplicate_window_s: float,
        max_age_s: float,
        max_msgs_per_subject: int = -1,
        work_queue: bool = False,
    ) -> None:
        """Make the JetStream stream ``name`` if missing (file storage, limits retention; at
        most ``max_msgs_per_subject`` messages a subject, the oldest dropped; -1: no limit).
        ``work_queue``: work-queue retention instead, a message gone once acknowledged.

        A store nats-server failed to make is asked again for :data:`STREAM_RETRY_S`
        (stamina): ``error creating store for stream`` (500, err 10049) when the account's last
        stream was deleted meanwhile and its directory went with it (seen in CI: ``mkdir
        …/jetstream/$G/streams: no such file or directory``). Any other refusal is raised at
        once (a config nats-server refuses is a 500 too: ``invalid subject``, err 10052)."""
        config = StreamConfig(
            name=name,
            subjects=subjects,
            retention=RetentionPolicy.WORK_QUEUE if work_queue else RetentionPolicy.LIMITS,
            storage=StorageType.FILE,
            duplicate_window=duplicate_window_s,
            max_age=max_age_s,
            max_msgs_per_subject=max_msgs_per_subject,
        )

        async def make() -> None:
            try:
                await self.js.stream_info(name)
            except nats.js.errors.NotFoundError:
                await self.js.add_stream(config)

        await _until_stored(f"JetStream stream {name}", make)

    async def publish_once(self, subject: str, message: Contract, *, msg_id: str) -> bool:
        """Publish on a stream with ``Nats-Msg-Id: msg_id``; True when stored, False when the
        stream already had ``msg_id`` in its duplicate window. ``BusUnavailable`` when no ack."""
        try:
            ack = await self.js.publish(
                subject, encode(message), headers=_headers({"Nats-Msg-Id": msg_id}), timeout=2
            )
        except (nats.errors.TimeoutError, nats.js.errors.NoStreamResponseError) as exc:
            raise BusUnavailable(f"JetStream did not store {subject}: {exc!r}") from exc
        return not ack.duplicate

    async def publish_stored(self, subject: str, message: Contract) -> None:
        """Publish on a stream and wait for JetStream to store it; ``BusUnavailable`` if no ack."""
        try:
            await self.js.publish(subject, encode(message), headers=_headers(), timeout=2)
        except (nats.errors.TimeoutError, nats.js.errors.NoStreamResponseError) as exc:
            raise BusUnavailable(f"JetStream did not store {subject}: {exc!r}") from exc

    async def counts(self, stream: str, subjects: str) -> dict[str, int] | None:
        """Messages the stream ``stream`` holds now on each subject matching ``subjects``
        (a wildcard); None when there is no such stream. ``BusUnavailable`` if JetStream does
        not answer."""
        try:
            info = await self.js.stream_info(stream, subjects_filter=subjects)
        except nats.js.errors.NotFoundError:
            return None
        except (nats.errors.TimeoutError, nats.js.errors.ServiceUnavailableError) as exc:
            raise BusUnavailable(f"JetStream did not answer for {stream}: {exc!r}") from exc
        return dict(info.state.subjects or {})

    async def last(self, stream: str, subject: str, kind: type[C]) -> C | None:
        """The newest ``kind`` the stream ``stream`` holds on ``subject``; None for none (or
        one that does not decode: a newer publisher's). ``BusUnavailable`` if JetStream does
        not answer."""
        try:
            msg = await self.js.get_last_msg(stream, subject)
        except nats.js.errors.NotFoundError:
            return None
        except (nats.errors.TimeoutError, nats.js.errors.ServiceUnavailableError) as exc:
            raise BusUnavailable(f"JetStream did not answer for {stream}: {exc!r}") from exc
        try:
            return decode(msg.data or b"", kind)
        except msgspec.MsgspecError:
            return None

    async def key_value(self, bucket: str, *, history: int = 64) -> KeyValue:
        """The JetStream KV ``bucket``, made on first use with ``history`` values per key (a
        store nats-server failed to make asked again, as :meth:`ensure_stream` does)."""

        async def make() -> KeyValue:
            try:
                return await self.js.key_value(bucket)
            except BucketNotFoundError:
                return await self.js.create_key_value(bucket=bucket, history=history)

        return await _until_stored(f"JetStream KV {bucket}", make)

    async def add_service(self, name: str, *, version: str, description: str) -> Service:
        """A ``nats.micro`` service (``$SRV.PING.<name>`` finds every replica)."""
        service: Service = await micro.add_service(
            self.client, name=name, version=version, description=description
        )
        return service

    async def add_endpoint(
        self,
        service: Service,
        *,
        name: str,
        subject: str,
        kind: type[C],
        handler: Callable[[C, dict[str, str]], Awaitable[Contract]],
    ) -> None:
        """Serve ``handler`` on ``subject``: it gets the request and its headers."""

        async def on_request(request: Request) -> None:
            ctx = propagate.extract(request.headers or {})
            with _tracer.start_as_current_span(f"serve {name}", context=ctx):
                try:
                    try:
                        message = decode(request.data, kind)
                    except msgspec.MsgspecError as exc:
                        raise BadRequest(f"not a {kind.__name__}: {plainly(str(exc))}") from exc
                    answer = await handler(message, dict(request.headers or {}))
                except PinecallError as exc:
                    body = msgspec.json.encode(told(exc.problem(instance=subject)))
                    await request.respond_error(str(exc.status), exc.title, data=body)
                    return
                await request.respond(encode(answer))

        await service.add_endpoint(name=name, subject=subject, handler=on_request)

    async def close(self) -> None:
        """Drain the connection: deliver what is in flight, then close."""
        if not self.client.is_closed:
            try:
                await self.client.drain()
            except Exception as exc:  # a connection already lost cannot drain
                _log.debug("nats drain: %s", exc)
                await self.client.close()
