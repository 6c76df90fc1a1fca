"""Step 6 of what ``up`` runs (:mod:`pinecall_runtime.up.services`): the processes that drive
the platform, started by :mod:`pinecall_runtime.up.calls` once every fleet is heard and every
app holds its agent: the callers (``lab callers``, :func:`callers`) and the chat visitors
(``lab chats``, :func:`chats`), each told its plan in a JSON file of the state dir and writing
each caller's or visitor's state a line in another; neither is started again when it ends.
"""

from __future__ import annotations

import json
from pathlib import Path

from pinecall_runtime.up.services import TIER, Urls
from pinecall_runtime.up.stage import ENVIRONMENTS, Run
from pinecall_runtime.up.supervise import Supervised

CHAT_MESSAGES = 3
"""Messages each chat visitor writes."""
CHAT_PACE_S = 1.0
"""Seconds between a reply and the visitor's next message."""


def callers(
    run: Run,
    at: Urls,
    state_dir: Path,
    rate: float,
    calls: int | None,
    *,
    agent: str,
    org: str,
    greeted: bool,
) -> Supervised:
    """Step 6: the callers' process (``lab callers``: phones and visitors of every environment
    at ``rate``, ``calls`` in all, ringing for ``org``'s ``agent``, hearing its greeting out
    first when ``greeted``), its plan in ``<state dir>/callers-plan.json``, each caller's state
    in ``<state dir>/callers.jsonl``."""
    environments = [
        {
            "environment": e,
            "fleet": fleet,
            "livekit_url": at.livekit[e],
            "api_key": run.livekit_keys[e][0],
            "api_secret": run.livekit_keys[e][1],
            "app_key": run.app_keys[e],
        }
        for e, fleet in ENVIRONMENTS.items()
    ]
    plan = {
        "environments": environments,
        "dispatcher_url": at.dispatcher,
        "call_log_url": at.call_log,
        "rate": rate,
        "calls": calls,
        "agent": agent,
        "org": org,
        "greeted": greeted,
        "run": f"up{run.token}",
    }
    return _planned(run, state_dir, "callers", plan)


def chats(
    run: Run, at: Urls, state_dir: Path, rate: float, chats: int, *, agent: str, org: str
) -> Supervised:
    """Step 6, written: the chat visitors' process (``lab chats``: ``chats`` visitors of every
    environment in turn at ``rate``, each :data:`CHAT_MESSAGES` messages to ``org``'s ``agent``,
    dialling the chat replicas in turn), its plan in ``<state dir>/chats-plan.json``, each
    visitor's state in ``<state dir>/chats.jsonl``."""
    plan = {
        "environments": [{"environment": e, "app_key": run.app_keys[e]} for e in ENVIRONMENTS],
        "chat_urls": at.chat,
        "agent": agent,
        "org": org,
        "chats": chats,
        "rate": rate,
        "messages": CHAT_MESSAGES,
        "pace_s": CHAT_PACE_S,
    }
    return _planned(run, state_dir, "chats", plan)


def _planned(run: Run, state_dir: Path, name: str, plan: dict[str, object]) -> Supervised:
    """``lab <name> --plan <state dir>/<name>-plan.json --out <state dir>/<name>.jsonl``, the
    plan written first; logging to ``<name>.log``, stopped first (the callers' tier), never
    started again."""
    plan_file = state_dir / f"{name}-plan.json"
    plan_file.write_text(json.dumps(plan, indent=2))
    out = state_dir / f"{name}.jsonl"
    return Supervised(
        name=name,
        args=["lab", name, "--plan", str(plan_file), "--out", str(out)],
        env=run.env(),
        log=run.logs / f"{name}.log",
        tier=TIER["callers"],
        restart=False,
    )
