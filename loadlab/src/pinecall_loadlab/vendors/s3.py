"""A real S3 server on loopback for the recordings' bucket: moto's server mode (``moto[server]``,
its ``DomainDispatcherApplication`` on werkzeug, as ``moto.server.ThreadedMotoServer`` runs it),
with faults on command (issue 19, "In the lab").

    with S3Fake.started(buckets=["recordings"]) as s3:   # s3.url: http://127.0.0.1:<port>
        s3.refuse({"parts", "complete"}, status=503)     # the bucket says no
        s3.refuse(set())                                 # and yes again

What a fault refuses, by the S3 operation's request (S3 API reference): ``create``
(``POST ?uploads``, CreateMultipartUpload), ``parts`` (``PUT ?partNumber&uploadId``,
UploadPart), ``complete`` (``POST ?uploadId``, CompleteMultipartUpload). A refused request is
answered with S3's own error body (``SlowDown`` for a 503, ``AccessDenied`` for a 403,
``InternalError`` otherwise) and never reaches moto, so nothing of it is kept. Another process
sets the faults with ``POST /_lab/faults`` ``{"refuse": ["parts"], "status": 503}``.

The keys are anything (moto checks no signature by default); the region is ``us-east-1``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import Iterable, Iterator
from typing import Any
from urllib.parse import parse_qs

from werkzeug.serving import BaseWSGIServer, make_server

OPERATIONS = frozenset({"create", "parts", "complete"})
_CODES = {503: "SlowDown", 403: "AccessDenied", 500: "InternalError"}
_REASONS = {503: "Service Unavailable", 403: "Forbidden", 500: "Internal Server Error"}


def operation(method: str, query: str) -> str | None:
    """Which of :data:`OPERATIONS` a request is (None: another)."""
    asked = parse_qs(query, keep_blank_values=True)
    if method == "POST" and "uploads" in asked:
        return "create"
    if method == "PUT" and "partNumber" in asked and "uploadId" in asked:
        return "parts"
    if method == "POST" and "uploadId" in asked:
        return "complete"
    return None


class S3Fake:
    """moto's S3 on ``host:port`` in a thread of this process, behind the faults."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        from moto.moto_server.werkzeug_app import (
            DomainDispatcherApplication,
            MotoRequestHandler,
            create_backend_app,
        )

        self.refused: frozenset[str] = frozenset()
        self.status = 503
        self.counted: dict[str, int] = dict.fromkeys(OPERATIONS, 0)
        """Requests of each operation refused so far."""
        self.answered: dict[str, int] = dict.fromkeys(OPERATIONS, 0)
        """Requests of each operation moto answered so far (:meth:`answered_at_least`)."""
        self._moto = DomainDispatcherApplication(create_backend_app)
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)

        class Quiet(MotoRequestHandler):
            def log_request(self, *args: Any) -> None:
                pass  # a line per request drowns a run's own output

        self._server: BaseWSGIServer = make_server(
            host, port, self._app, threaded=True, request_handler=Quiet
        )
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @classmethod
    @contextlib.contextmanager
    def started(
        cls, host: str = "127.0.0.1", port: int = 0, *, buckets: Iterable[str] = ()
    ) -> Iterator[S3Fake]:
        """Serve, with ``buckets`` made; stop on leaving."""
        fake = cls(host, port)
        fake.start(buckets)
        try:
            yield fake
        finally:
            fake.stop()

    def start(self, buckets: Iterable[str] = ()) -> None:
        """Serve from an empty store: moto keeps its buckets in this process's memory, shared by
        every fake of the process, so one fake at a time (as a test's fixture) starts clean."""
        from moto.s3.models import s3_backends

        s3_backends["123456789012"]["aws"].reset()
        self._thread.start()
        for bucket in buckets:
            self.make_bucket(bucket)

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    def make_bucket(self, name: str) -> None:
        """CreateBucket ``name`` in moto's backend (as a client's PUT would)."""
        from moto.s3.models import s3_backends

        s3_backends["123456789012"]["aws"].create_bucket(name, "us-east-1")

    def refuse(self, operations: Iterable[str], *, status: int = 503) -> None:
        """Refuse ``operations`` (of :data:`OPERATIONS`) with ``status`` from now on."""
        wanted = frozenset(operations)
        if not wanted <= OPERATIONS:
            raise ValueError(f"no such operation: {sorted(wanted - OPERATIONS)}")
        with self._lock:
            self.refused, self.status = wanted, status

    async def answered_at_least(self, op: str, n: int, *, within_s: float) -> bool:
        """Wait until moto answered ``n`` requests of ``op`` (kept in the bucket: a part
        uploaded, say); False when ``within_s`` passed first. Waits in a thread of its own,
        which ``within_s`` bounds."""

        def wait() -> bool:
            with self._changed:
                return self._changed.wait_for(lambda: self.answered[op] >= n, timeout=within_s)

        return await asyncio.to_thread(wait)

    def _app(self, environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        method, path = environ["REQUEST_METHOD"], environ.get("PATH_INFO", "")
        if path == "/_lab/faults":
            return self._faults(environ, start_response)
        op = operation(method, environ.get("QUERY_STRING", ""))
        with self._lock:
            refused = op is not None and op in self.refused
            status = self.status
            if refused and op is not None:
                self.counted[op] += 1
        if not refused:
            answered: Iterable[bytes] = self._moto(environ, start_response)
            if op is not None:
                with self._changed:
                    self.answered[op] += 1
                    self._changed.notify_all()
            return answered
        length = int(environ.get("CONTENT_LENGTH") or 0)
        if length:
            environ["wsgi.input"].read(length)  # the body is read, as S3 reads it, then refused
        code = _CODES.get(status, "InternalError")
        body = (
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            f"<Error><Code>{code}</Code><Message>the lab refuses {op}</Message></Error>"
        ).encode()
        start_response(
            f"{status} {_REASONS.get(status, 'Error')}",
            [("Content-Type", "application/xml"), ("Content-Length", str(len(body)))],
        )
        return [body]

    def _faults(self, environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        if environ["REQUEST_METHOD"] == "POST":
            length = int(environ.get("CONTENT_LENGTH") or 0)
            asked = json.loads(environ["wsgi.input"].read(length) or b"{}")
            try:
                self.refuse(asked.get("refuse", []), status=int(asked.get("status", 503)))
            except (ValueError, TypeError, AttributeError) as exc:
                body = json.dumps({"title": "bad fault", "detail": str(exc)}).encode()
                start_response("422 Unprocessable Entity", [("Content-Type", "application/json")])
                return [body]
        with self._lock:
            said = {"refuse": sorted(self.refused), "status": self.status, "refused": self.counted}
        start_response("200 OK", [("Content-Type", "application/json")])
        return [json.dumps(said).encode()]
