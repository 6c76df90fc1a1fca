"""A worker frozen while calls arrive (issue 8, acceptance 4; seed 000, "A machine that vanishes is
worse"): real worker processes on the chain, the one holding three calls SIGSTOPped whole (its
job processes too), so LiveKit keeps its socket (a ghost) and the roster hears nothing. No new
call is lost: the ones offered to the ghost before it was unheard are offered again to the other
worker. Its own calls, once the stand-in says their agents gone (their connections stop
answering: ``transport_timeout_s``, then ``connection_timeout_s``), are handled as a killed
worker's are (acceptance 3, ``test_commands.py``): the sentence from the other worker, ended
drained, called back, the log following on, sealed, the room deleted.

The numbers are shortened: heartbeats every second, heard 3 s, re-offer 4 s; the stand-in's
transport gives up after 6 s and its connection timeout is 1 s.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from typing import Any

import pytest

from pinecall_loadlab.callers import LINES
from pinecall_loadlab.livekit import StandIn, StandInConfig
from pinecall_loadlab.livekit import events as ev
from pinecall_loadlab.scenarios import runtime_choosing
from pinecall_loadlab.scenarios.callers_lost import Ears, lost_call
from pinecall_loadlab.scenarios.chain import ChainConfig, chain_call_log, runtime_chain
from pinecall_loadlab.scenarios.death import ANSWER, placed_calls, talked
from pinecall_loadlab.scenarios.labworkers import start_process
from pinecall_loadlab.vendors import Reply, VendorFakes
from pinecall_servicekit.bus import Bus

pytestmark = pytest.mark.long  # scheduled first (the testing plugin)


@pytest.fixture
def standin_config(standin_config: StandInConfig) -> StandInConfig:
    return dataclasses.replace(standin_config, transport_timeout_s=6.0, connection_timeout_s=1.0)


@pytest.fixture
def dispatcher_numbers() -> dict[str, Any]:
    return {"heard_s": 3.0, "reoffer_s": 4.0, "fleet_wait_s": 4.0, "sweep_s": 0.5}


async def test_a_frozen_worker_loses_no_new_call_and_its_own_calls_get_the_sentence(
    standin: StandIn, chain_config: ChainConfig, vendor_fakes: VendorFakes
) -> None:
    chain_config.heartbeat_s = 1.0
    vendor_fakes.deepgram.script(*[LINES["question"]] * 3)
    vendor_fakes.anthropic.script(*[Reply(text=ANSWER)] * 3)
    async with (
        chain_call_log(chain_config) as call_log,
        runtime_chain(standin, chain_config, call_log=call_log) as chain,
        contextlib.AsyncExitStack() as stack,
    ):
        bus = await Bus.connect(chain_config.nats_url, chain_config.namespace, name="test-death")
        stack.push_async_callback(bus.close)
        # b has the most seats free: it takes the first calls, and is offered the next ones for
        # as long as it is heard; a has room for the new calls and the sentences
        a, b = await asyncio.gather(
            start_process(chain, stack, host="frozen-a", seats=8, vendors=vendor_fakes),
            start_process(chain, stack, host="frozen-b", seats=12, vendors=vendor_fakes),
        )
        async with asyncio.timeout(120):
            held, callers = await runtime_choosing.place_calls(
                chain, prefix="held", calls=3, settle_each=True
            )
            talking = await talked(chain, bus, placed_calls(chain, held, callers))
            ears = [Ears(t.caller, t.identity) for t in talking]
            b.freeze()
            frozen_at = time.time()
            rung, _ = await runtime_choosing.place_calls(
                chain, prefix="ring", calls=4, interval_s=0.5, settle_s=60
            )
            lost = await asyncio.gather(
                *(
                    lost_call(
                        chain,
                        bus,
                        room=t.room,
                        call=t.call,
                        identity=t.identity,
                        answered_by=t.by,
                        written=t.written,
                        ears=e,
                        lost_at=frozen_at,
                        settle_s=60,
                        quiet_s=60,
                    )
                    for t, e in zip(talking, ears, strict=True)
                )
            )
    assert [h.by for h in held] == [b.name] * 3
    # no new call lost: every one answered by the worker that is not frozen...
    assert [r.by for r in rung] == [a.name] * 4
    # ...some of them after an offer to the ghost (LiveKit still lists it) made again
    to_ghost = chain.lk.events.of(
        ev.DispatchCreated, lambda e: e.room.startswith("ring-") and e.agent_name == b.name
    )
    assert to_ghost
    for call in lost:
        assert call.lost_to_webhook_s is not None  # the stand-in said the agent gone
        assert call.webhook_to_sentence_s is not None  # the caller heard the sentence
        assert call.sentence_by == a.name
        assert (call.ended, call.callback, call.sealed, call.room_deleted) == (
            "drained",
            True,
            True,
            True,
        )
        assert (call.gap, call.written > 0, call.sentence_after) == (False, True, call.written)
        assert call.after_loss == ["call.ended", "call.sentence", "call.sealed"]
