"""``up`` records every call, and its report says how each recording came out (issue 19, "In the
lab and the main job").

The bucket is moto's S3 server on loopback (``lab s3``, :func:`bucket`, started with the
stand-ins); every process whose settings read ``PINECALL_RECORDINGS_*`` is given them
(:func:`equip`: the workers, which record, and call-log, which signs the URLs they are read
through), and ``up`` defines its agent with ``record: true``.

The report's ``recordings`` section (:func:`build`), for every caller an agent answered: its
call's log holds ``call.recording`` (``completed``) or ``call.recording_failed`` (``failed``,
its reason a problem); the recording is read as an app or an operator reads it, through
call-log's signed URL (``GET /v1/calls/{call}/recording``), and is *verified* when the file is
the entry's bytes and SHA-256, decodes with two channels, lasts as long as the call within
:data:`WITHIN_S` (the log's ``call.recording_started`` to its ``call.ended``: the recorder starts
with the session and stops at its end), and its caller's (left) channel holds the speech of the
lines the caller said (``CallerReport.said``), at least ``HOLDS`` of it by voiced time (the lab
knows what each caller said; the measure is the worker test's,
``pinecall_loadlab.vendors.recordings``). The files are measured by ``lab recordings`` in a
process of its own (``up`` imports nothing of the lab). Every answered call without a verified
recording is a problem.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Iterable
from typing import Any

from pinecall_clients.calllog import CallLogClient
from pinecall_clients.errors import CallLogError
from pinecall_contracts import entries
from pinecall_contracts.calls import CallLog
from pinecall_contracts.lab import CallerReport
from pinecall_contracts.recordings import RecordingLinks
from pinecall_runtime.up.stage import Run
from pinecall_runtime.up.supervise import Supervised

BUCKET = "recordings"
"""The bucket ``lab s3`` makes and the services are told (``PINECALL_RECORDINGS_BUCKET``)."""
RECORDED_BY = ("call-log", "worker-", "overflow-", "reaper")
"""The processes (by name, or its start) whose settings read ``PINECALL_RECORDINGS_*`` (the
overflow records its sentences; the reaper keeps what a dead job uploaded); any other would refuse them as unknown settings at
start-up."""
WITHIN_S = 1.0
"""A recording lasts as long as its call within this many seconds (issue 19)."""
HOLDS = 0.5
"""The caller's channel holds its lines when it holds at least this share of their voiced
seconds (``pinecall_loadlab.vendors.recordings.HOLDS``, the worker test's)."""
READ_WITHIN_S = 5.0


def bucket(run: Run, url: str, tier: int) -> Supervised:
    """The bucket's process: ``lab s3`` on ``url``'s port, :data:`BUCKET` made, its log
    ``s3.log``; ready when its faults endpoint answers."""
    return Supervised(
        name="s3",
        args=["lab", "s3", "--port", url.rsplit(":", 1)[1], "--bucket", BUCKET],
        env=run.env(),
        log=run.logs / "s3.log",
        url=url,
        ready="/_lab/faults",
        tier=tier,
    )


def settings(url: str) -> dict[str, str]:
    """``PINECALL_RECORDINGS_*`` of the bucket at ``url`` (moto takes any keys)."""
    return {
        "PINECALL_RECORDINGS_BUCKET": BUCKET,
        "PINECALL_RECORDINGS_ENDPOINT": url,
        "PINECALL_RECORDINGS_ACCESS_KEY_ID": "lab",
        "PINECALL_RECORDINGS_SECRET_ACCESS_KEY": "lab",
    }


def equip(processes: Iterable[Supervised], url: str) -> None:
    """Give each of ``processes`` named by :data:`RECORDED_BY` the bucket's settings."""
    for process in processes:
        if process.name.startswith(RECORDED_BY):
            process.env |= settings(url)


def _seconds(log: CallLog, first: str, last: str) -> float | None:
    began = next((e.ts for e in log.entries if e.kind == first), None)
    ended = next((e.ts for e in log.entries if e.kind == last), None)
    return None if began is None or ended is None else (ended - began).total_seconds()


async def _read(log: CallLogClient, call: str) -> tuple[CallLog, RecordingLinks | None]:
    """The call's log and, when it says a recording, call-log's signed URLs of it."""
    entries_ = await log.entries(call, within_s=READ_WITHIN_S)
    if not any(e.kind == entries.CALL_RECORDING for e in entries_.entries):
        return entries_, None
    links = await log.request(
        f"/v1/calls/{call}/recording", None, RecordingLinks,
        within_s=READ_WITHIN_S, method="GET", call=call,
    )  # fmt: skip
    return entries_, links


async def measure(asked: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``lab recordings`` over ``asked`` (``{"call", "url", "said"}`` each): what each file
    holds. ``RuntimeError`` with its output when it fails."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "pinecall_runtime", "lab", "recordings",
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await process.communicate(json.dumps(asked).encode())
    if process.returncode != 0:
        raise RuntimeError(f"lab recordings exited {process.returncode}: {err.decode()[-500:]}")
    measured: list[dict[str, Any]] = json.loads(out)
    return measured


def verify(call: str, said: dict[str, Any], found: dict[str, Any], seconds: float | None,
           lines: list[str]) -> str | None:  # fmt: skip
    """What is wrong with the recording of ``call`` (None: it verifies): ``said`` is its
    ``call.recording`` entry, ``found`` what ``lab recordings`` read of the file, ``seconds``
    the call's length by its log, ``lines`` what its caller said."""
    if found["error"] is not None:
        return f"{call}: its recording could not be read: {found['error']}"
    if (found["bytes"], found["sha256"]) != (said["bytes"], said["sha256"]):
        return f"{call}: its recording is not the bytes and SHA-256 its log says"
    if found["channels"] != 2:
        return f"{call}: its recording has {found['channels']} channels, not 2"
    if seconds is None or abs(found["seconds"] - seconds) > WITHIN_S:
        return f"{call}: its recording lasts {found['seconds']} s, its call {seconds} s"
    if lines and (found["holds"] is None or found["holds"] < HOLDS):
        return (
            f"{call}: its caller's channel holds {found['holds']} of the speech of the lines "
            f"the caller said ({', '.join(lines)})"
        )
    return None


async def build(
    reports: dict[int, CallerReport],
    callers: list[dict[str, Any]],
    *,
    operator_key: str,
    call_log: str,
) -> tuple[dict[str, Any], list[str]]:
    """The report's ``recordings`` section and its problems, for the ``callers`` rows of the
    report (``caller``, ``call``, ``answered_by``) an agent answered; ``reports`` says what
    each caller said."""
    answered = [
        c for c in callers
        if c.get("call") and c["answered_by"] and not c["answered_by"].endswith("/overflow")
    ]  # fmt: skip
    problems: list[str] = []
    completed, failed, asked, rows = 0, 0, [], {}
    async with CallLogClient(call_log, operator_key, request_timeout_s=30.0) as log:
        for caller in answered:
            call = caller["call"]
            try:
                read, links = await _read(log, call)
            except (CallLogError, ValueError) as exc:
                problems.append(f"{call}: its recording could not be read: {exc}")
                continue
            made = [e.data for e in read.entries if e.kind == entries.CALL_RECORDING]
            refused = [e.data for e in read.entries if e.kind == entries.CALL_RECORDING_FAILED]
            failed += len(refused)
            problems += [f"{call}: its recording failed: {f.get('reason')}" for f in refused]
            if not made or links is None or not links.recordings:
                if not refused:
                    problems.append(f"{call}: no recording on its log")
                continue
            completed += 1
            lines = reports[caller["caller"]].said if caller["caller"] in reports else []
            seconds = _seconds(read, entries.CALL_RECORDING_STARTED, entries.CALL_ENDED)
            rows[call] = (made[0], seconds, lines)
            asked.append({"call": call, "url": links.recordings[0].url, "said": lines})
    found = await measure(asked) if asked else []
    verified, each = 0, []
    for one in found:
        said, seconds, lines = rows[one["call"]]
        wrong = verify(one["call"], said, one, seconds, lines)
        verified += wrong is None
        problems += [wrong] if wrong else []
        each.append(
            one | {"call_seconds": None if seconds is None else round(seconds, 3),
                   "said": lines, "verified": wrong is None}
        )  # fmt: skip
    section = {
        "calls": len(answered),
        "completed": completed,
        "failed": failed,
        "verified": verified,
        "recordings": each,
    }
    return section, problems


def summary(section: dict[str, Any]) -> str:
    """The section in a line for the terminal."""
    return (
        f"up: recordings: {section['completed']} completed, {section['failed']} failed, "
        f"{section['verified']} of {section['calls']} calls answered verified (decoded, as long "
        "as the call, the caller's lines on its channel)"
    )
