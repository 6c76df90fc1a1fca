"""The call log's HTTP API (seed 002, "The gateway restarts"; seed 000, "Full, at the endpoint").

=========================================  ================  ==================================
route                                      key               answer
=========================================  ================  ==================================
POST /v1/calls                             fleet             CallRecord (CallOpen; idempotent)
GET  /v1/calls?state=&after=&limit=        fleet, serv., op. CallPage (unsealed calls, paged)
GET  /v1/calls/{call}                      fleet, serv., op. CallRecord
POST /v1/calls/{call}/entries              fleet, service    BatchWritten (EntryBatch); a service
                                                             key only ``entries.KEPT_BY_A_SERVICE``
POST /v1/entries                           fleet, service    WorkerBatchWritten (WorkerBatch): a
                                                             worker's calls' batches, each
                                                             answered as alone
GET  /v1/calls/{call}/entries?after=<seq>  fleet, op.; serv. CallLog (a service: SERVICE_READS only)
GET  /v1/calls/{call}/commands?after=&wait_s=  fleet         CallCommands (a long poll)
POST /v1/calls/{call}/events               fleet             EventWritten (one Entry, not counted)
POST /v1/calls/{call}/reopened             fleet             CallRecord (Reopened)
POST /v1/calls/{call}/served               fleet             Handed: a written call's session
                                                             taken up again; its app's socket
                                                             hears ``call.attached`` again
POST /v1/calls/{call}/end                  fleet, serv., op. CallRecord (CallEnd)
POST /v1/calls/{call}/seal                 fleet, serv., op. CallRecord (CallEnd or none)
POST /v1/calls/{call}/tools                fleet             ToolResult (ToolCall); waits
POST /v1/calls/{call}/tools/{id}/result    app               ToolResult (ToolAnswer)
POST /v1/callbacks                         all four          AgentEntry (CallbackRequest;
                                                             :mod:`.callbacks`)
POST /v1/agents/{agent}/log                fleet, serv., op. AgentEntry (AgentEntry; once per key)
GET  /v1/agents/{agent}/log?after=<seq>    fleet, app, op.   AgentLog (an operator: &environment=)
PUT  /v1/agents/{agent}?org=               app, operator     AgentVersion (:mod:`.definitions`)
GET  /v1/agents?org=                        app, operator     AgentList (the same)
GET  /v1/agents/{agent}?org=               all four          AgentVersion (the same)
PUT/GET /v1/whatsapp/numbers…              app, op., service WhatsApp numbers (:mod:`.numbers`)
POST /v1/calls/{call}/log-token            app, operator     LogToken (:mod:`.stream`)
GET  /v1/calls/{call}/stream?log_token=    the log token     Server-Sent Events (Last-Event-ID,
                                                             ?last_event_id=; 204 sealed;
                                                             :mod:`.stream`)
GET  /v1/calls/{call}/recording?org=       app, operator     RecordingLinks: signed URLs that
                                                             expire (:mod:`.recordings`)
WS   /v1/apps/socket                       app               the app socket (:mod:`.sockets`)
=========================================  ================  ==================================

Keys: the workers (and the overflow) use their environment's fleet key; the app answering a tool
call, and a page's server asking a call back, use the app key of its environment; the dispatcher
(``fleet.full`` on an agent's log; a dead worker's call read, ended drained and called back) and
the reaper (unsealed calls listed, ended, sealed) use their service key, which acts on any call
as an operator key does, on these routes only (the reaper also reads a call's entries and
writes what became of a recording a dead job left unfinished: ``call.recording`` or
``call.recording_failed``, nothing else, 403); the dispatcher also reads one agent with it
(whether a ring's agent exists), and the overflow with its fleet key (the agent's voice). A fleet or app key of another environment than
the call's is 403. An operator or service key names the environment of an agent's log with
``?environment=`` (422 when it does not: a log is per environment), and of a call back
(production by default); a fleet or app key's is its own. Every error is a problem detail, and a
refused request writes nothing: a 409 says why (sealed, or both counts of a batch). An entry whose
``data`` is over ``calls.MAX_ENTRY_BYTES`` (64 KiB as JSON) is a 422 naming the limit, and none of
its batch is written.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec
from litestar import get, post
from litestar.params import FromQuery, JSONBody, PathParameter, QueryParameter

from pinecall_call_log import domain
from pinecall_call_log.access import (
    AgentPath,
    AnyRequest,
    CallPath,
    call_for,
    environment_for,
    environment_named,
    key_of,
    service_of,
)
from pinecall_contracts.appsocket import Handed
from pinecall_contracts.calls import (
    AgentEntry,
    AgentLog,
    BatchWritten,
    CallBatchAnswer,
    CallCommands,
    CallEnd,
    CallLog,
    CallOpen,
    CallPage,
    CallRecord,
    CallState,
    Entry,
    EntryBatch,
    EventWritten,
    Reopened,
    ToolAnswer,
    ToolCall,
    ToolResult,
    WorkerBatch,
    WorkerBatchWritten,
)
from pinecall_contracts.entries import (
    CALL_DIALLED,
    CALL_ENDED,
    CALL_RECORDING_STARTED,
    KEPT_BY_A_SERVICE,
)
from pinecall_contracts.keys import KeyInfo
from pinecall_servicekit.db import utcnow
from pinecall_servicekit.errors import Forbidden, PinecallError, Unprocessable, told
from pinecall_servicekit.http import problems

After = Annotated[int, QueryParameter(ge=0, le=2**31 - 1)]
AfterCall = Annotated[
    str, QueryParameter(pattern=r"^$(?![\s\S])|^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$(?![\s\S])")
]
Unsealed = Annotated[list[Literal["open", "ended"]] | None, QueryParameter(name="state")]
"""``?state=`` (Litestar reserves the name ``state`` for the app's state)."""
Limit = Annotated[int, QueryParameter(ge=1, le=1000)]
MAX_WAIT_S = 30.0
"""The longest a command poll waits, in seconds (under a load balancer's idle timeout)."""
WaitS = Annotated[float, QueryParameter(ge=0.0, le=MAX_WAIT_S)]


@post("/v1/calls", status_code=200, responses=problems(400, 401, 403, 409, 422, 503))
async def open_call(request: AnyRequest, data: JSONBody[CallOpen]) -> CallRecord:
    """Open a call: the worker that took the job, with its environment's fleet key."""
    environment_for(await key_of(request), data.environment)
    return await service_of(request).open(data)


@get("/v1/calls", responses=problems(400, 401, 403, 422, 503))
async def list_calls(
    request: AnyRequest,
    wanted: Unsealed = None,
    after: AfterCall = "",
    limit: Limit = 500,
    environment: FromQuery[str | None] = None,
) -> CallPage:
    """The environment's calls not sealed yet (``state``: ``open``, ``ended``, or both; ``open``
    when not given), in call-id order after the call ``after``, with each log's last entry time.
    An operator names the environment (production by default); a fleet key lists its own."""
    env = environment_for(await key_of(request), environment)
    states: set[CallState] = set(wanted or ["open"])
    return await service_of(request).store.unsealed.page(env, states, after, limit)


@get("/v1/calls/{call:str}", responses=problems(400, 401, 403, 404, 503))
async def call_record(request: AnyRequest, call: CallPath) -> CallRecord:
    """What the call is and where its log stands (read now, not from memory)."""
    await call_for(request, call)
    record = await service_of(request).store.calls.record(call)
    assert record is not None  # calls are never deleted
    return record


def _writers(entries: list[Entry]) -> None:
    if (why := domain.too_large(entries) or domain.writers_kinds(entries)) is not None:
        raise Unprocessable(why)


def _writable(key: KeyInfo, environment: str, entries: list[Entry]) -> None:
    """Whether ``key`` may write ``entries`` to a call of ``environment``: 403 for another
    environment's call, or a service key's entries other than what became of a dead job's
    recording; 422 for an entry over the size or of a kind only the service writes."""
    environment_for(key, environment)
    _writers(entries)
    if key.kind == "service" and (others := sorted({e.kind for e in entries} - KEPT_BY_A_SERVICE)):
        raise Forbidden(
            f"a service key writes only {', '.join(sorted(KEPT_BY_A_SERVICE))} "
            f"to a call's log, not {', '.join(others)}"
        )


@post(
    "/v1/calls/{call:str}/entries",
    status_code=200,
    responses=problems(400, 401, 403, 404, 409, 422, 503),
)
async def write_entries(
    request: AnyRequest, call: CallPath, data: JSONBody[EntryBatch]
) -> BatchWritten:
    """A batch of the call's writer: written whole, answered as a replay, or 409. A service
    key's batch holds only what became of a dead job's recording (403 otherwise)."""
    key = await key_of(request)
    _writable(key, (await service_of(request).identity(call)).environment, data.entries)
    return await service_of(request).write(call, data.after, data.entries)


@post("/v1/entries", status_code=200, responses=problems(400, 401, 403, 422, 503))
async def write_batches(request: AnyRequest, data: JSONBody[WorkerBatch]) -> WorkerBatchWritten:
    """A worker's calls' batches in one request (issue 20): each answered as ``POST
    /v1/calls/{call}/entries`` would answer it alone, its problem detail (404, 403, 409, 422,
    503) in its own answer; the request itself is refused only for its key or its body."""
    key = await key_of(request)
    service = service_of(request)
    refused: dict[int, PinecallError] = {}
    for i, b in enumerate(data.batches):
        try:
            _writable(key, (await service.identity(b.call)).environment, b.entries)
        except PinecallError as exc:
            refused[i] = exc
    taken = [b for i, b in enumerate(data.batches) if i not in refused]
    written = iter(await service.write_batches(taken) if taken else [])
    answers = []
    for i, b in enumerate(data.batches):
        answer = refused[i] if i in refused else next(written)
        answers.append(
            CallBatchAnswer(
                call=b.call,
                problem=told(answer.problem(instance=f"/v1/calls/{b.call}/entries")),
            )
            if isinstance(answer, PinecallError)
            else CallBatchAnswer(call=b.call, written=answer)
        )
    return WorkerBatchWritten(answers=answers)


@get("/v1/calls/{call:str}/entries", responses=problems(400, 401, 403, 404, 503))
async def read_entries(request: AnyRequest, call: CallPath, after: After = 0) -> CallLog:
    """The call's entries with seq above ``after``, in order (10 000 at most). A service key
    reads only :data:`SERVICE_READS` of them, never the transcript (the dispatcher reads a
    follow-up's try's SIP status; the reaper, a dead job's recording)."""
    key = await key_of(request)
    record = await service_of(request).identity(call)
    environment_for(key, record.environment)
    log = await service_of(request).store.calls.read(call, after)
    if key.kind != "service":
        return log
    return msgspec.structs.replace(log, entries=[e for e in log.entries if e.kind in SERVICE_READS])


SERVICE_READS = frozenset({CALL_DIALLED, CALL_ENDED, CALL_RECORDING_STARTED, *KEPT_BY_A_SERVICE})
"""What a service key reads of a call's entries: how its phone leg was dialled and how it
ended, and where its recordings are, no word of the conversation."""


@get("/v1/calls/{call:str}/commands", responses=problems(400, 401, 403, 404, 503))
async def read_commands(
    request: AnyRequest, call: CallPath, after: After = 0, wait_s: WaitS = 0.0
) -> CallCommands:
    """The app's commands to the call with seq above ``after`` (its ``call.command`` entries,
    in order), waiting up to ``wait_s`` (at most :data:`MAX_WAIT_S`) for one while there is none
    and the call is open: the command stream its worker follows."""
    await call_for(request, call)
    return await service_of(request).commands(call, after, wait_s)


@post(
    "/v1/calls/{call:str}/events",
    status_code=200,
    responses=problems(400, 401, 403, 404, 409, 422, 503),
)
async def write_event(request: AnyRequest, call: CallPath, data: JSONBody[Entry]) -> EventWritten:
    """One entry from a worker of an older release: takes a seq, counts nothing."""
    await call_for(request, call)
    _writers([data])
    return EventWritten(seq=await service_of(request).event(call, data))


@post(
    "/v1/calls/{call:str}/reopened",
    status_code=200,
    responses=problems(400, 401, 403, 409, 422, 503),
)
async def reopened(request: AnyRequest, call: CallPath, data: JSONBody[Reopened]) -> CallRecord:
    """A call an older release opened, said again once: no quota, no second ``call.ringing``."""
    environment = environment_for(await key_of(request))
    return await service_of(request).reopen(call, data, environment)


@post("/v1/calls/{call:str}/served", status_code=200, responses=problems(400, 401, 403, 404, 503))
async def served(request: AnyRequest, call: CallPath) -> Handed:
    """The call is served anew (the chat service took a written call's session up again, on any
    replica): the app socket holding it hears ``call.attached`` again (``again: true``), or, when
    none holds it, it is handed as a parked call is. ``attached``: whether a socket heard it (a
    call not open, or an agent no socket holds: False). Writes nothing on the log."""
    await call_for(request, call)
    return await service_of(request).served(call)


@post(
    "/v1/calls/{call:str}/end",
    status_code=200,
    responses=problems(400, 401, 403, 404, 409, 422, 503),
)
async def end_call(request: AnyRequest, call: CallPath, data: JSONBody[CallEnd]) -> CallRecord:
    """End the call with its outcome (idempotent; 409 once sealed)."""
    await call_for(request, call)
    return await service_of(request).end(
        call, data.outcome, data.reason, seal=False, cause=data.cause, at=data.at
    )


@post(
    "/v1/calls/{call:str}/seal",
    status_code=200,
    responses=problems(400, 401, 403, 404, 409, 422, 503),
)
async def seal_call(
    request: AnyRequest, call: CallPath, data: JSONBody[CallEnd | None] = None
) -> CallRecord:
    """Seal the call (ending it first if it is open: then name the outcome). Idempotent."""
    await call_for(request, call)
    body = data or CallEnd()
    return await service_of(request).end(
        call, body.outcome, body.reason, seal=True, cause=body.cause, at=body.at
    )


@post(
    "/v1/calls/{call:str}/tools",
    status_code=200,
    responses=problems(400, 401, 403, 404, 409, 422, 503),
)
async def run_tool(request: AnyRequest, call: CallPath, data: JSONBody[ToolCall]) -> ToolResult:
    """Run a tool once per id: a retry joins the round trip or gets the logged result."""
    await call_for(request, call)
    return await service_of(request).tools.run(call, data)


@post(
    "/v1/calls/{call:str}/tools/{tool_id:str}/result",
    status_code=200,
    responses=problems(400, 401, 403, 404, 409, 422, 503),
)
async def answer_tool(
    request: AnyRequest,
    call: CallPath,
    tool_id: Annotated[str, PathParameter(pattern=r"^[A-Za-z0-9_.:-]{1,128}$(?![\s\S])")],
    data: JSONBody[ToolAnswer],
) -> ToolResult:
    """The app's answer to a tool call (its app key); a second answer gets the first."""
    await call_for(request, call)
    return await service_of(request).tools.answer_tool(call, tool_id, data.result, data.error)


@post("/v1/agents/{agent:str}/log", status_code=200, responses=problems(400, 401, 403, 422, 503))
async def agent_append(
    request: AnyRequest,
    agent: AgentPath,
    data: JSONBody[AgentEntry],
    environment: FromQuery[str | None] = None,
) -> AgentEntry:
    """An entry on the agent's log (``fleet.full``, ``agent.draining``) of the key's environment
    (an operator's names it, ``?environment=``; 422 when it does not); once per ``key`` when
    the entry has one (a second answers the first)."""
    key = await key_of(request)
    env = environment_named(key, environment, "an agent's log")
    if (why := domain.too_large([data])) is not None:
        raise Unprocessable(why)
    agents = service_of(request).store.agents
    return await agents.append(env, agent, data.kind, data.data, utcnow(), key=data.key)


@get("/v1/agents/{agent:str}/log", responses=problems(400, 401, 403, 422, 503))
async def agent_log(
    request: AnyRequest,
    agent: AgentPath,
    after: After = 0,
    environment: FromQuery[str | None] = None,
) -> AgentLog:
    """The agent's log after ``after``, in order: the key's environment's (an operator's names
    it, ``?environment=``; 422 when it does not)."""
    key = await key_of(request)
    env = environment_named(key, environment, "an agent's log")
    return await service_of(request).store.agents.agent_log(env, agent, after)


ROUTES = [
    open_call,
    list_calls,
    call_record,
    write_entries,
    write_batches,
    read_entries,
    read_commands,
    write_event,
    reopened,
    served,
    end_call,
    seal_call,
    run_tool,
    answer_tool,
    agent_append,
    agent_log,
]
