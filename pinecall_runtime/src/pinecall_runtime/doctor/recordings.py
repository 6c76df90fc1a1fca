"""``doctor``'s recordings check (issue 19: a recording that cannot be completed is on its
call's log as ``call.recording_failed`` "and ``doctor`` counts them"): the failures of the last
:data:`WINDOW_MIN` minutes, by environment, from call-log's ``calls.recordings-failed`` verb.
"""

from __future__ import annotations

from pinecall_contracts.recordings import RecordingsFailedCount
from pinecall_runtime.doctor import runbook
from pinecall_runtime.doctor.findings import Finding, ok, skip

WINDOW_MIN = 60
"""Minutes back ``doctor`` counts failed recordings (the alert's window is shorter)."""


def recordings(failed: RecordingsFailedCount | None) -> list[Finding]:
    """One ``warn`` per environment with a failed recording in the window (the newest one's
    call and reason said once), else one ``ok``; ``skip`` when call-log did not answer."""
    if failed is None:
        return [skip("recordings", "call-log")]
    if not failed.count:
        return [ok("recordings", f"no recording failed in {WINDOW_MIN} min")]
    last = ""
    if failed.last_call is not None:
        last = f" (the last: {failed.last_call}, {failed.last_reason or 'no reason said'})"
    found = []
    for environment, count in sorted(failed.environments.items()):
        noun = "recording" if count == 1 else "recordings"
        found.append(
            Finding(
                check="recordings",
                level="warn",
                subject=environment,
                what=f"{count} {noun} failed in {WINDOW_MIN} min{last}",
                todo=runbook.RECORDINGS_FAILED,
            )
        )
        last = ""  # said once, on the first line
    return found
