"""Who holds an agent, as the chat replica hears it (``apps.holding``): the waiting messages of an
agent are drained whenever it becomes held, by a new hold or by announcements that went stale
and are fresh again (a loaded call-log replica late past three periods; CI lost a message to it:
written waiting while stale, and the next announcement named the same agents, so none drained)."""

from __future__ import annotations

import asyncio

from pinecall_chat.whatsapp_threads import Threads
from pinecall_contracts.appsocket import Holding

AGENT = ("production", "org_acme", "support-bot")


def threads_at(now: list[float]) -> Threads:
    """A replica's threads with no store, graph or numbers (no message is handled here), its
    clock ``now[0]`` (seconds), announcements every second and a day's window."""
    return Threads(
        numbers=None,  # type: ignore[arg-type]
        engine=None,  # type: ignore[arg-type]
        graph=None,  # type: ignore[arg-type]
        window_s=86_400.0,
        announce_s=1.0,
        monotonic=lambda: now[0],
    )


async def test_an_agent_held_again_after_stale_announcements_has_its_waiting_messages_drained() -> (
    None
):
    now = [0.0]
    threads = threads_at(now)
    drained: list[tuple[str, str, str]] = []
    threads._drain = drained.append  # type: ignore[method-assign,assignment]
    said = Holding(replica="call-log-1", agents=[AGENT])

    async def heard_at(at: float) -> None:
        now[0] = at
        await threads.heard(said)

    await heard_at(0.0)  # held for the first time: drained
    assert drained == [AGENT]
    await heard_at(1.0)  # still held, fresh: nothing to drain
    await heard_at(3.5)
    assert drained == [AGENT]
    now[0] = 7.0  # 3.5 s unheard: not held (a message that came now went waiting) ...
    assert not threads.holds(*AGENT)
    await heard_at(7.0)  # ... held again: drained
    assert drained == [AGENT, AGENT]
    assert threads.holds(*AGENT)


async def test_a_replica_just_started_waits_to_hear_who_holds_an_agent_before_judging_nobody_does() -> (
    None
):
    """Within three announcement periods of its start a replica has maybe heard nobody yet: a
    message then waits for the agent's holder to be heard (CI: a replica just started wrote its
    first message waiting, so the replica killed after never answered it, nor the next)."""
    now = [0.0]
    threads = threads_at(now)
    threads._drain = lambda scope: None  # type: ignore[method-assign,assignment,misc]
    waiting = asyncio.create_task(threads._until_heard(*AGENT))
    await asyncio.sleep(0)  # the task runs up to its wait
    assert not waiting.done()
    await threads.heard(Holding(replica="call-log-1", agents=[AGENT]))
    await waiting  # held: it goes on at once
    now[0] = 10.0  # listened past three periods, nothing heard since: nobody holds it, now
    assert not threads.holds(*AGENT)
    await threads._until_heard(*AGENT)
