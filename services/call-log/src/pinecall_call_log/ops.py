"""call-log's ops verbs over NATS: a ``nats.micro`` service on every replica (NATS ADR-32).

``<ns>.ops.calls.log`` (CallLogRequest → CallLogPage: what the call is and a page of its entries,
what ``pinecall-runtime logs <call>`` shows beside the dispatcher's journal), with an operator key
in ``Authorization``; the same data as ``GET /v1/calls/{call}`` and ``/entries`` on HTTP.
``<ns>.ops.calls.recordings-failed`` (RecordingsFailedRequest → RecordingsFailedCount: the
``call.recording_failed`` entries of the last minutes, by environment, the newest's call and
reason; what ``doctor`` counts, issue 19).
Errors travel as ``Nats-Service-Error-Code``: 400 a request that is not a CallLogRequest (a call
id that is not one, a limit out of 1..1000), 401/403 the key, 404 a call this log does not hold.
Replicas share a queue group: one answers each request. ``$SRV.PING.<ns>-call-log`` finds them.

A page is kept under half of the connection's largest message (NATS's ``max_payload``, 1 MB by
default), so a call of long transcripts is paged, never refused by NATS. Its record comes without
the call's config (an agent's whole prompt and tools: read them with ``GET /v1/calls/{call}``), so
the other half is never outgrown by what the call runs on.
"""

from __future__ import annotations

import datetime as dt

import msgspec
from nats.micro.service import Service

from pinecall_call_log.service import CallLogService
from pinecall_contracts.base import encode
from pinecall_contracts.calls import OMITTED, CallLogPage, CallLogRequest, LoggedEntry
from pinecall_contracts.keys import KeyInfo
from pinecall_contracts.recordings import RecordingsFailedCount, RecordingsFailedRequest
from pinecall_servicekit.verbs import Verb, serve_verbs


def page_of(entries: list[LoggedEntry], budget: int) -> tuple[list[LoggedEntry], bool]:
    """The first of ``entries`` whose JSON fits ``budget`` bytes, and whether any was left out.

    The first entry always goes in; if it alone is over the budget its ``data`` is replaced by
    ``{"omitted_bytes": <n>}``.
    """
    out: list[LoggedEntry] = []
    used = 0
    for entry in entries:
        size = len(encode(entry))
        if not out and size > budget:
            entry = LoggedEntry(
                seq=entry.seq,
                kind=entry.kind,
                ts=entry.ts,
                data={OMITTED: size},
                counted=entry.counted,
            )
            size = len(encode(entry))
        elif used + size > budget:
            return out, True
        out.append(entry)
        used += size
    return out, False


async def start_ops(service: CallLogService, version: str) -> Service:
    """Serve the ops verbs of ``service``; stop the returned service on shutdown."""
    bus = service.bus

    async def calls_log(request: CallLogRequest, key: KeyInfo) -> CallLogPage:
        # NotFound for a call this log does not hold; one entry more than asked says `more`
        log = await service.store.calls.read(request.call, request.after, request.limit + 1)
        record = await service.store.calls.record(request.call)
        assert record is not None  # calls are never deleted
        entries, cut = page_of(log.entries[: request.limit], bus.client.max_payload // 2)
        return CallLogPage(
            call=request.call,
            record=msgspec.structs.replace(record, config={}),
            entries=entries,
            more=cut or len(log.entries) > request.limit,
        )

    async def recordings_failed(
        request: RecordingsFailedRequest, key: KeyInfo
    ) -> RecordingsFailedCount:
        since = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=request.minutes)
        return await service.store.failed_recordings.since(since)

    return await serve_verbs(
        bus,
        service.keyring,
        name=bus.subjects.call_log_service,
        version=version,
        description="call-log's verbs",
        verbs=[
            Verb("calls-log", bus.subjects.ops_calls_log, CallLogRequest, calls_log),
            Verb(
                "recordings-failed",
                bus.subjects.ops_recordings_failed,
                RecordingsFailedRequest,
                recordings_failed,
            ),
        ],
    )
