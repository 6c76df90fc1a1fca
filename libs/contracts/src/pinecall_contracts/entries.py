"""The kinds of a call's entries: what each says and who writes it, in one place.

A call's log is one ordered record (seed 002, "A deploy never cuts a call"). Two writers put
entries on it: the **call-log service**, whose own entries take seqs but are not counted in the
writer's count, and the call's **one writer** (the worker's job, or the job that says the
sentence into a dead worker's room), whose entries travel in counted batches
(``POST /v1/calls/{call}/entries``). Kinds are dotted, lower case (``calls.Kind``).

================  ========  ==========================================================
kind              writer    data
================  ========  ==========================================================
call.started      service   ``{worker, room, agent, prompt_hash?, version?}``: the worker
                            that opened the call; the prompt's hash and the version of
                            the agent it runs, when its org defines the agent
call.reopened     service   ``{agent}``: a call an older release opened, said again
turn.user         worker    ``{text, stopped_speaking_at}``: what the caller said (one
                            user turn; ``stopped_speaking_at`` in Unix seconds or null);
                            a written call's adds ``message``, the contact's message id
turn.agent        worker    ``{text, first_audio_s, llm_ttft_s, tts_ttfb_s, interrupted}``:
                            what the agent said; ``first_audio_s`` is the turn's first
                            audio (livekit-agents' ``e2e_latency``: the caller's end of
                            speech to the agent's first audio out), null when the turn
                            was not measured
turn.tool         worker    ``{id, name, arguments, output, error}``: a tool the agent ran
                            in the worker (``end_call``); ``arguments`` is the model's
                            JSON text, ``error`` true when the tool failed
tool.call         service   ``{id, name, arguments, deadline}``: a tool the app runs,
                            asked through ``POST /v1/calls/{call}/tools``, once per id
tool.result       service   ``{id, result, error}``: that tool's one answer
call.command      service   ``{id, kind, text}``: an app's ``say`` or ``end`` (app socket),
                            once per its id; the worker follows them
                            (``GET /v1/calls/{call}/commands``)
call.error        worker    ``{source, what, recoverable}``: a vendor or the session failed
                            (``source``: ``stt``, ``llm``, ``tts``, ``session``, ``job``),
                            or the session refused an app's command (``command``, with
                            the command's ``id``)
call.sentence     worker    ``{text, job}``: the overflow's sentence, said by the overflow
                            (``job``: ``answer``) or into the room of a worker that died
                            (``sentence``, following on from its count)
call.dialled      worker    ``{to, answered, sip_status_code, sip_status, trunk,
                            participant}`` (``outbound.Dialled``): an outbound call's
                            phone leg, answered or not, with LiveKit SIP's status
call.recording_  worker    ``{key, upload_id, channels}``: the call's recording began as
started                     this S3 multipart upload (``pinecall_contracts.recordings``);
                            whoever finishes a dead job's call completes it from here
call.recording    worker    ``{url, seconds, bytes, sha256, channels, job, complete}``: a
                            recording in the bucket (``url`` ``s3://bucket/key``);
                            ``complete`` false when only the parts a dead job uploaded
                            were kept (``seconds`` says how much)
call.recording_   worker    ``{reason, key?, kept_s}``: a recording that could not be
failed                      completed (never silently missing; ``doctor`` counts them)
call.ended        service   ``{outcome, reason?}``: ``POST /v1/calls/{call}/end`` or the seal
call.sealed       service   ``{}``: nothing more is written
================  ========  ==========================================================

Each ``call.error`` is also a datagram to the worker's main process (its minute's ``errors``),
and each measured ``turn.agent`` a ``TurnMeasured`` (its minute's first audio p95): see
``pinecall_contracts.worker``.
"""

from __future__ import annotations

from typing import Final

CALL_STARTED: Final = "call.started"
CALL_REOPENED: Final = "call.reopened"
TURN_USER: Final = "turn.user"
TURN_AGENT: Final = "turn.agent"
TURN_TOOL: Final = "turn.tool"
TOOL_CALL: Final = "tool.call"
TOOL_RESULT: Final = "tool.result"
CALL_COMMAND: Final = "call.command"
CALL_ERROR: Final = "call.error"
CALL_SENTENCE: Final = "call.sentence"
CALL_DIALLED: Final = "call.dialled"
CALL_RECORDING_STARTED: Final = "call.recording_started"
CALL_RECORDING: Final = "call.recording"
CALL_RECORDING_FAILED: Final = "call.recording_failed"
CALL_ENDED: Final = "call.ended"
CALL_SEALED: Final = "call.sealed"

WRITTEN_BY_THE_WORKER: Final = frozenset(
    {
        TURN_USER,
        TURN_AGENT,
        TURN_TOOL,
        CALL_ERROR,
        CALL_SENTENCE,
        CALL_DIALLED,
        CALL_RECORDING_STARTED,
        CALL_RECORDING,
        CALL_RECORDING_FAILED,
    }
)
"""The kinds a call's writer sends."""
WRITTEN_BY_THE_SERVICE: Final = frozenset(
    {CALL_STARTED, CALL_REOPENED, TOOL_CALL, TOOL_RESULT, CALL_COMMAND, CALL_ENDED, CALL_SEALED}
)
"""The kinds only the call-log service writes: it refuses them from a writer (a ``call.sealed``
a writer sent would read as a seal the log never made, a ``tool.result`` as an answer the app
never gave, a ``call.command`` as an app's command). Kinds in neither set are a newer writer's own, and pass."""

KEPT_BY_A_SERVICE: Final = frozenset({CALL_RECORDING, CALL_RECORDING_FAILED})
"""The kinds a service key (the reaper) may write to a call's log: what became of a recording a
dead job left unfinished (issue 19), after the log's count, as a writer does. Nothing else of a
call is a service's to say."""
