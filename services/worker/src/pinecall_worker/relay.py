"""The relay socket: job processes' batches to the log, sent on with the worker's other calls'.

Each call runs in its own job process (livekit-agents' ``JobExecutorType.PROCESS``), and each
flushes its writer once a second: a request a call a second is what a call-log replica cost the
most of (issue 20). The worker's main process serves ``POST /v1/calls/{call}/entries`` on an
``AF_UNIX`` socket (:class:`RelaySocket`, mode 0600: the worker's own user) and hands each batch
to its :class:`~pinecall_clients.relay.BatchRelay`, which sends a tick's batches as one request.
The job's writer speaks to it as to call-log itself (:func:`relay_client`): the same route, the
same answers (the batch's own 200, 404, 409 or 422, its body the log's problem detail), the same
retries on silence or a 503. So nothing about a batch's exactness changes: it keeps its count,
and a batch sent again is a replay.

Failures: a main process that dies takes its job processes with it (livekit-agents' job
processes exit when their parent's channel closes), and their calls are the dead worker's,
re-offered with the log's count. A batch the relay holds longer than :data:`RELAY_WAIT_S` is
answered 503, and the job sends it again.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
from pathlib import Path

import msgspec
from aiohttp import web

from pinecall_clients.calllog import CallLogClient
from pinecall_clients.errors import CallLogRefused, CallLogUnavailable
from pinecall_clients.relay import BatchRelay
from pinecall_contracts.base import decode, encode
from pinecall_contracts.calls import CALL_ID_PATTERN, EntryBatch
from pinecall_contracts.problems import ProblemDetails
from pinecall_servicekit.errors import BadRequest, Unavailable, bounded

_log = logging.getLogger(__name__)

RELAY_WAIT_S = 4.0
"""How long the relay holds a job's batch before it answers 503 (under the job's client's 5 s
request timeout, so the job hears the 503 and sends again rather than giving up on silence)."""
RELAY_WITHIN_S = 10.0
"""How long one combined request is retried (silence, a 5xx) before its batches are answered
503: a request still retrying holds one of the relay's requests in flight."""
PROBLEM = "application/problem+json"
CALL_ID = re.compile(CALL_ID_PATTERN)


def relay_client(path: str, key: str) -> CallLogClient:
    """A job's client of its worker's relay socket at ``path``: a ``CallLogClient`` whose
    ``write_batch`` goes through the socket (its key is the worker's own)."""
    return CallLogClient("http://relay.worker", key, uds=path)


class RelaySocket:
    """The main process's end: serves the relay at ``path`` while started, sending through
    ``client`` (the worker's call-log client). :attr:`relay` counts requests and batches."""

    def __init__(self, path: Path, client: CallLogClient) -> None:
        self.path = path
        self.relay = BatchRelay(client, within_s=RELAY_WITHIN_S)
        app = web.Application(client_max_size=11 * 1024 * 1024)  # call-log's cap, and some
        app.router.add_post("/v1/calls/{call}/entries", self._entries)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)

    async def start(self) -> None:
        """Bind the socket (one left by a dead worker of the same path is replaced)."""
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        await self._runner.setup()
        await web.UnixSite(self._runner, str(self.path)).start()
        os.chmod(self.path, 0o600)

    async def close(self) -> None:
        """Stop serving: the batches held, and any sent from now, are answered 503 at once
        (their jobs send them again); then the socket is closed."""
        await self.relay.aclose()
        await self._runner.cleanup()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()

    async def _entries(self, request: web.Request) -> web.Response:
        call = request.match_info["call"]
        if not CALL_ID.match(call):  # as call-log's own route refuses it: the others' go on
            return _problem(
                BadRequest(f"no call id: {bounded(call)!r} (pattern {CALL_ID_PATTERN})").problem()
            )
        try:
            batch = decode(await request.read(), EntryBatch)
        except msgspec.MsgspecError as exc:
            return _problem(BadRequest(str(exc)).problem())
        try:
            written = await self.relay.write_batch(
                call,
                batch,
                within_s=RELAY_WAIT_S,
                traceparent=request.headers.get("traceparent"),  # the job's: its call's trace
            )
        except CallLogRefused as exc:
            return _problem(exc.problem)
        except CallLogUnavailable as exc:
            return _problem(Unavailable(str(exc)).problem())
        return web.Response(body=encode(written), content_type="application/json")


def _problem(problem: ProblemDetails) -> web.Response:
    return web.Response(
        status=problem.status, body=msgspec.json.encode(problem), content_type=PROBLEM
    )
