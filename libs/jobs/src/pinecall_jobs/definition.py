"""The definition of a sentence job's agent, read once before it speaks: the overflow speaks in
its voice (issue 16) and either sentence job records what it says when the definition says
``record`` (issue 19: "the overflow's sentence job and a dead worker's sentence job record what
they said").

Read with the job's fleet key (``GET /v1/agents/{agent}``, its environment's), one try within
:data:`WITHIN_S`: the caller is waiting in silence, and the open after it retries for 10 s
anyway. An agent not defined, or a call-log that does not answer in time: None (logged), and
the job speaks in its own voice and records nothing.
"""

from __future__ import annotations

import asyncio
import logging

from pinecall_clients.calllog import CallLogClient
from pinecall_clients.errors import AgentUnknown, CallLogError
from pinecall_contracts.agents import AgentDefinition
from pinecall_contracts.dispatch import JobOffer

_log = logging.getLogger(__name__)

WITHIN_S = 2.0
"""Seconds a job waits for its agent's definition before it speaks without it."""


async def read_definition(
    offer: JobOffer, log: CallLogClient, *, within_s: float = WITHIN_S
) -> AgentDefinition | None:
    """``offer``'s agent's latest definition in the offer's environment, or None: no org on
    the offer, no such agent, or no answer within ``within_s`` (each logged)."""
    if not offer.org:
        return None  # an agent is an org's: a ring that names none names no definition
    try:
        async with asyncio.timeout(within_s):
            found = await log.agent(offer.agent, org=offer.org, within_s=None, attempts=1)
    except AgentUnknown:
        _log.warning("call %s: %s of %s is not defined", offer.call, offer.agent, offer.org)
        return None
    except (CallLogError, TimeoutError) as exc:
        _log.warning("call %s: %s's definition not read (%s)", offer.call, offer.agent,
                     exc or f"no answer in {within_s:.0f} s")  # fmt: skip
        return None
    return found.definition
