"""Who holds an agent, as the chat replica hears it (``apps.holding``): the waiting messages of an
agent are drained whenever it becomes held, by a new hold or by announcements that went stale
and are fresh again (a loaded call-log replica late past three periods; CI lost a message to it:
written waiting while stale, and the next announcement named the same agents, so none drained)."""

from __future__ import annotations

from pinecall_chat.whatsapp_threads import Threads
from pinecall_contracts.appsocket import Holding

AGENT = ("production", "org_acme", "support-bot")


async def test_an_agent_held_again_after_stale_announcements_has_its_waiting_messages_drained() -> (
    None
):
    now = [0.0]
    threads = Threads(
        numbers=None,  # type: ignore[arg-type]  # no message is handled here
        engine=None,  # type: ignore[arg-type]
        graph=None,  # type: ignore[arg-type]
        window_s=86_400.0,
        announce_s=1.0,
        monotonic=lambda: now[0],
    )
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
