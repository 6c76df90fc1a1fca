"""The calls as the reaper reads and closes them: only through call-log's REST (only call-log
touches its tables), with the reaper's service key.

``GET /v1/calls?environment=&state=open&state=ended&after=&limit=`` a page at a time;
``POST /v1/calls/{call}/end`` and ``/seal`` through :class:`pinecall_clients.calllog.CallLogClient`
(retried within 30 s, idempotent: a call another replica ended changes nothing, one it sealed is
a 409, which here means done).
"""

from __future__ import annotations

from urllib.parse import urlencode

from pinecall_clients.calllog import SEAL_WITHIN_S, CallLogClient
from pinecall_clients.errors import CallLogRefused
from pinecall_contracts.calls import CallPage, EndCause, Outcome
from pinecall_reaper.domain import CallSeen

PAGE = 500


async def unsealed(log: CallLogClient, environment: str) -> list[CallSeen]:
    """Every call of ``environment`` not sealed yet (open or ended)."""
    seen: list[CallSeen] = []
    after = ""
    while True:
        query = urlencode(
            {"environment": environment, "state": ["open", "ended"], "after": after, "limit": PAGE},
            doseq=True,
        )
        page = await log.request(
            f"/v1/calls?{query}", None, CallPage, within_s=SEAL_WITHIN_S, method="GET"
        )
        seen += [
            CallSeen(
                call=c.call,
                room=c.room,
                ended=c.state == "ended",
                opened_at=c.opened_at,
                last_entry_at=c.last_entry_at,
                channel=c.channel,
            )
            for c in page.calls
        ]
        if page.next is None:
            return seen
        after = page.next


async def end(
    log: CallLogClient, call: str, outcome: Outcome, reason: str, cause: EndCause | None = None
) -> bool:
    """End ``call`` (``cause``: why a ``drained`` one ended); False if it was sealed already (a
    409: another replica, or its job)."""
    try:
        await log.end(call, outcome, reason=reason, cause=cause)
    except CallLogRefused as exc:
        if exc.status == 409:
            return False
        raise
    return True
