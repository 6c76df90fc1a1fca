"""Pinecall Bistro's booking agent: an app holding the agent ``booking`` (``booking.yaml``) with
two tools. Run it with ``pinecall start app:app`` from this folder (README.md says how, against
``./dev up``); SIGTERM drains it.

Its settings are the example's own environment variables: ``BOOKING_URL`` (call-log's URL),
``BOOKING_KEY`` (the org's app key), ``BOOKING_ORG`` (``org_up`` by default: the org ``./dev up``
rings for) and ``BOOKING_INSTANCE`` (optional: this process's stable id).
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path
from typing import Any

import pinecall

log = logging.getLogger("booking")

app = pinecall.App(
    os.environ["BOOKING_URL"],
    os.environ["BOOKING_KEY"],
    org=os.environ.get("BOOKING_ORG", "org_up"),
    instance=os.environ.get("BOOKING_INSTANCE") or None,
)
booking = app.agent("booking", definition=Path(__file__).with_name("booking.yaml"))

SEATS = {"18:00": 8, "19:00": 4, "20:00": 10, "21:00": 6}
"""Seats free at each time tonight (a real app would ask its booking system)."""
bookings: dict[str, dict[str, Any]] = {}
lock = threading.Lock()  # plain handlers run in threads


def _with_room(party: int) -> list[str]:
    return [time for time, free in SEATS.items() if free >= party]


@booking.tool("check_availability")
def check_availability(arguments: dict[str, Any], context: pinecall.ToolContext) -> Any:
    """A plain function: the SDK runs it in a thread."""
    time, party = arguments["time"], int(arguments["party"])
    with lock:
        return {"available": SEATS.get(time, 0) >= party, "times_with_room": _with_room(party)}


@booking.tool("book_table")
async def book_table(arguments: dict[str, Any], context: pinecall.ToolContext) -> Any:
    """A coroutine: run in the app's loop. It runs once per tool call id, so a tool call asked
    again after a reconnect never books twice."""
    time, party, name = arguments["time"], int(arguments["party"]), arguments["name"]
    with lock:
        if SEATS.get(time, 0) < party:
            times = ", ".join(_with_room(party)) or "none tonight"
            raise pinecall.ToolError(f"No table for {party} at {time}. Times with room: {times}.")
        SEATS[time] -= party
        reference = f"BK-{len(bookings) + 1:04d}"
        bookings[reference] = {"time": time, "party": party, "name": name, "call": context.call.id}
    log.info("booked %s: %s", reference, bookings[reference])
    return {"reference": reference, "time": time, "party": party}


@booking.on_call("attached")
def attached(call: pinecall.Call) -> None:
    log.info("serving %s (%s)", call.id, call.why)


@booking.on_call("detached")
def detached(call: pinecall.Call) -> None:
    log.info("no longer serving %s (%s)", call.id, call.detached)
