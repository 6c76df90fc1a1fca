"""The stand-in's fault controls over HTTP (LiveKit has no equivalent).

Every request needs a token signed with one of the stand-in's keys (any grants), as
``Authorization: Bearer``. JSON in and out:

- ``GET  /lab/control/workers`` → ``[{id, agent_name, status, load, job_count, frozen,
  answer_delay_s}]``
- ``POST /lab/control/workers/{id}/freeze`` · ``…/thaw`` · ``…/slow`` ``{"delay_s": 2.5}``
- ``POST /lab/control/webhooks/faults`` ``{"drop_next", "duplicate_next", "reorder_next",
  "delay_s", "lose": {room: [event, ...]}}`` (fields given replace the current ones)
- ``POST /lab/control/rooms/{room}/participants/{identity}/cut``
- ``POST /lab/control/links/cut`` · ``…/hang`` ``{"agent_name": "pinecall/w.1", "for_s": 45}``:
  a worker's agent socket dropped and its reconnects refused, or LiveKit's side of it hung, for
  ``for_s`` seconds; ``POST /lab/control/links/mend`` ``{"agent_name"}`` ends it now
- ``GET  /lab/control/dispatches`` → ``[{room, dispatch_id, agent_name, at}]``: every
  CreateDispatch received, with when (Unix seconds), for a measure taken in another process

Unknown worker, participant or link fault: 404; a body without what the route needs: 400;
bad token: 401.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from aiohttp import web
from livekit.protocol import agent

from . import events as ev
from .agent_ws import plain_401
from .tokens import AuthError, request_token

if TYPE_CHECKING:
    from .server import StandIn

PREFIX = "/lab/control"


class BadRequest(Exception):
    """A control request's body does not say what its route needs (400)."""


class Answered(Exception):
    """A control request answered with `status` and the JSON `body` (a refused SIP call)."""

    def __init__(self, status: int, body: dict[str, Any]) -> None:
        super().__init__(body)
        self.status, self.body = status, body


async def _link_body(request: web.Request, *, seconds: bool) -> tuple[str, float]:
    """``agent_name`` (and ``for_s`` when `seconds`) of a link fault's JSON body."""
    try:
        body = await request.json()
    except ValueError as exc:
        raise BadRequest(f"the body is not JSON: {exc}") from None
    name = body.get("agent_name") if isinstance(body, dict) else None
    if not isinstance(name, str) or not name:
        raise BadRequest(
            'the body must name the worker: {"agent_name": "<fleet>/<worker>.<start>"}'
        )
    if not seconds:
        return name, 0.0
    for_s = body.get("for_s")
    if isinstance(for_s, bool) or not isinstance(for_s, int | float) or not 0 < for_s < 86_400:
        raise BadRequest(f"for_s must be seconds, more than 0 and less than a day, not {for_s!r}")
    return name, float(for_s)


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def guard(lk: StandIn, fn: Callable[[web.Request], Awaitable[Any]]) -> Handler:
    """`fn` behind the control API's token check, its answer as JSON; `KeyError` → 404,
    `BadRequest` → 400."""

    async def handler(request: web.Request) -> web.StreamResponse:
        try:
            token = request_token(request.headers.get("Authorization"), None)
            if token is None:
                return plain_401("permissions denied")
            lk.keys.verify(token)
        except AuthError as exc:
            return plain_401(str(exc))
        try:
            return web.json_response(await fn(request))
        except KeyError as exc:
            return web.json_response({"error": f"not found: {exc}"}, status=404)
        except BadRequest as exc:
            return web.json_response({"error": str(exc)}, status=400)
        except Answered as exc:
            return web.json_response(exc.body, status=exc.status)

    return handler


def add_routes(app: web.Application, lk: StandIn) -> None:
    """Mount the control API on `app` for stand-in `lk`."""

    def guarded(fn: Callable[[web.Request], Awaitable[Any]]) -> Handler:
        return guard(lk, fn)

    async def workers(_: web.Request) -> list[dict[str, Any]]:
        return [
            {
                "id": w.id,
                "agent_name": w.agent_name,
                "status": agent.WorkerStatus.Name(w.status),
                "load": w.load,
                "job_count": w.job_count,
                "frozen": w.frozen,
                "answer_delay_s": w.answer_delay_s,
            }
            for w in lk.dispatcher.registry.all()
        ]

    async def freeze(request: web.Request) -> dict[str, Any]:
        lk.freeze(request.match_info["id"])
        return {"ok": True}

    async def thaw(request: web.Request) -> dict[str, Any]:
        lk.thaw(request.match_info["id"])
        return {"ok": True}

    async def slow(request: web.Request) -> dict[str, Any]:
        body = await request.json()
        lk.slow(request.match_info["id"], float(body.get("delay_s", 0.0)))
        return {"ok": True}

    async def webhook_faults(request: web.Request) -> dict[str, Any]:
        body = await request.json()
        f = lk.webhooks.faults
        for name in ("drop_next", "duplicate_next", "reorder_next"):
            if name in body:
                setattr(f, name, int(body[name]))
        if "delay_s" in body:
            f.delay_s = float(body["delay_s"])
        if "lose" in body:
            f.lose = {str(room): {str(e) for e in events} for room, events in body["lose"].items()}
        return {
            "drop_next": f.drop_next,
            "duplicate_next": f.duplicate_next,
            "reorder_next": f.reorder_next,
            "delay_s": f.delay_s,
            "lose": {room: sorted(events) for room, events in f.lose.items()},
        }

    async def dispatches(_: web.Request) -> list[dict[str, Any]]:
        return [
            {"room": d.room, "dispatch_id": d.dispatch_id, "agent_name": d.agent_name, "at": d.at}
            for d in lk.events.of(ev.DispatchCreated)
        ]

    async def cut(request: web.Request) -> dict[str, Any]:
        lk.cut(request.match_info["room"], request.match_info["identity"])
        return {"ok": True}

    async def cut_link(request: web.Request) -> dict[str, Any]:
        name, for_s = await _link_body(request, seconds=True)
        lk.cut_link(name, for_s)
        return {"agent_name": name, "fault": "cut", "for_s": for_s}

    async def hang_link(request: web.Request) -> dict[str, Any]:
        name, for_s = await _link_body(request, seconds=True)
        lk.hang_link(name, for_s)
        return {"agent_name": name, "fault": "hang", "for_s": for_s}

    async def mend_link(request: web.Request) -> dict[str, Any]:
        name, _ = await _link_body(request, seconds=False)
        lk.mend_link(name)
        return {"agent_name": name, "fault": None}

    app.router.add_get(f"{PREFIX}/workers", guarded(workers))
    app.router.add_post(f"{PREFIX}/links/cut", guarded(cut_link))
    app.router.add_post(f"{PREFIX}/links/hang", guarded(hang_link))
    app.router.add_post(f"{PREFIX}/links/mend", guarded(mend_link))
    app.router.add_get(f"{PREFIX}/dispatches", guarded(dispatches))
    app.router.add_post(f"{PREFIX}/workers/{{id}}/freeze", guarded(freeze))
    app.router.add_post(f"{PREFIX}/workers/{{id}}/thaw", guarded(thaw))
    app.router.add_post(f"{PREFIX}/workers/{{id}}/slow", guarded(slow))
    app.router.add_post(f"{PREFIX}/webhooks/faults", guarded(webhook_faults))
    app.router.add_post(f"{PREFIX}/rooms/{{room}}/participants/{{identity}}/cut", guarded(cut))
