"""The chain's close: its calls end before its workers stop, so a lab that simply ends logs no
drain timeout (issue 14 item 13: ``lab run capacity`` ended exit 0 with ``ERROR drain timeout``,
``ERROR seal timeout`` and a stamina retry of each call's seal)."""

from __future__ import annotations

import logging

from pinecall_loadlab.livekit import StandIn
from pinecall_loadlab.scenarios.chain import ChainConfig, runtime_chain
from pinecall_loadlab.scenarios.runtime_choosing import place_calls


class Said(logging.Handler):
    """Every record of WARNING and above, as ``LEVEL logger: message``."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"{record.levelname} {record.name}: {record.getMessage()}")


async def test_a_chain_closed_with_its_calls_up_ends_them_and_its_workers_drain_quietly(
    standin: StandIn, chain_config: ChainConfig
) -> None:
    said = Said()
    try:
        async with runtime_chain(standin, chain_config) as chain:
            # after the chain's services set up their logging (each replaces the root's handlers)
            logging.getLogger().addHandler(said)
            handle = await chain.worker("w1", seats=2)
            answered, _callers = await place_calls(chain, prefix="up", calls=2, settle_each=True)
            assert [a.by for a in answered] == [handle.name, handle.name]
    finally:
        logging.getLogger().removeHandler(said)
    assert handle.task.result() == 0  # drained: exit 0
    assert [line for line in said.lines if " pinecall_worker" in line or " stamina" in line] == []
