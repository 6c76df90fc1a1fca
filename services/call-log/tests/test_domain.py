"""The batch protocol's rules on their own, and the property of issue 5, acceptance 1: any
interleaving of sends, lost answers and retries of one writer's batches leaves the log equal to
the writer's entries, once each, in order."""

from __future__ import annotations

import datetime as dt
import hashlib

from hypothesis import given, settings
from hypothesis import strategies as st

from pinecall_call_log import domain
from pinecall_call_log.domain import Conflict, Replay, Write, clamp, digest, judge, same_entries
from pinecall_contracts.agents import MAX_CALL_SECONDS, MAX_PROMPT_BYTES, AgentDefinition, AgentTool
from pinecall_contracts.calls import Entry

T0 = dt.datetime(2026, 11, 30, 6, 49, 19, tzinfo=dt.UTC)


def test_a_batch_that_starts_where_the_count_stands_is_written() -> None:
    assert judge(written=5, after=5, size=3) == Write(5)


def test_an_empty_batch_at_the_count_writes_nothing_and_is_not_refused() -> None:
    assert judge(written=5, after=5, size=0) == Write(5)


def test_the_same_batch_again_is_a_replay() -> None:
    assert judge(written=8, after=5, size=3) == Replay(5, 3)
    assert judge(written=20, after=5, size=3) == Replay(5, 3)  # and later batches were written


def test_a_gap_is_refused_with_both_counts() -> None:
    verdict = judge(written=5, after=7, size=2)
    assert verdict == Conflict(written=5, after=7)
    assert isinstance(verdict, Conflict)
    assert verdict.counts == {"path": "$.after", "written": 5, "after": 7}
    assert "5" in verdict.detail
    assert "7" in verdict.detail


def test_an_overlap_is_refused() -> None:
    assert judge(written=6, after=5, size=3) == Conflict(written=6, after=5)


def test_an_empty_batch_behind_the_count_is_refused() -> None:
    assert judge(written=6, after=5, size=0) == Conflict(written=6, after=5)


def entry(n: int, ts: dt.datetime = T0) -> Entry:
    return Entry(kind="transcript.user", ts=ts, data={"n": n})


def test_a_replay_must_be_the_same_entries() -> None:
    sent = [digest(entry(1)), digest(entry(2))]
    assert same_entries(sent, [digest(entry(1)), digest(entry(2))])
    assert not same_entries(sent, [digest(entry(1)), digest(entry(3))])
    assert not same_entries(sent, [digest(entry(1))])
    assert digest(entry(1)) != digest(entry(1, T0 + dt.timedelta(milliseconds=1)))


def test_a_writer_ts_is_clamped_to_the_service_clock() -> None:
    now = T0
    assert clamp(T0 + dt.timedelta(hours=1), now) == now
    earlier = T0 - dt.timedelta(seconds=3)
    assert clamp(earlier, now) == earlier
    east = dt.timezone(dt.timedelta(hours=2))
    assert clamp(earlier.astimezone(east), now).tzinfo == dt.UTC
    year_one = dt.datetime.fromisoformat("0001-01-01T00:00:00+14:00")  # not in UTC's range
    assert clamp(year_one, now) == dt.datetime(2000, 1, 1, tzinfo=dt.UTC)


class Log:
    """The head and the entries as the service keeps them, driven only by the pure rules."""

    def __init__(self) -> None:
        self.entries: list[bytes] = []  # by the writer's count

    def receive(self, after: int, batch: list[bytes]) -> int | None:
        """The writer's count after the batch, or None for a 409."""
        verdict = judge(len(self.entries), after, len(batch))
        if isinstance(verdict, Write):
            self.entries.extend(batch)
            return len(self.entries)
        if isinstance(verdict, Replay):
            stored = self.entries[after : after + len(batch)]
            return len(self.entries) if same_entries(batch, stored) else None
        return None


@settings(max_examples=300, deadline=None)
@given(
    sizes=st.lists(st.integers(min_value=1, max_value=4), min_size=1, max_size=8),
    steps=st.lists(st.tuples(st.integers(0, 3), st.integers(0, 50), st.booleans()), max_size=60),
)
def test_any_interleaving_of_sends_lost_answers_and_retries_writes_each_entry_once_in_order(
    sizes: list[int], steps: list[tuple[int, int, bool]]
) -> None:
    wanted = [digest(entry(n)) for n in range(sum(sizes))]
    log = Log()
    written = 0  # the writer's count
    queued = list(wanted)
    pending: tuple[int, list[bytes]] | None = None
    in_flight: list[tuple[int, list[bytes]]] = []  # every copy ever sent, delivered any time
    batches = iter(sizes)

    def take_next() -> tuple[int, list[bytes]] | None:
        size = next(batches, None)
        if size is None:
            return None
        batch = (written, queued[written : written + size])
        return batch if batch[1] else None

    for action, pick, answer_lost in steps:
        if action == 0 and pending is None:  # the writer sends what is queued
            pending = take_next()
            if pending:
                in_flight.append(pending)
        elif action == 1 and pending is not None:  # a retry: the same batch, after the same count
            in_flight.append(pending)
        elif in_flight:  # the network delivers some copy, late or not; its answer may be lost
            after, batch = in_flight.pop(pick % len(in_flight))
            count = log.receive(after, batch)
            if not answer_lost and pending == (after, batch) and count is not None:
                written, pending = count, None
    # the network settles: every copy arrives; the writer retries until answered, then sends on
    for after, batch in in_flight:
        log.receive(after, batch)
    while True:
        if pending is not None:
            count = log.receive(*pending)
            assert count is not None, "a retried batch is never refused"
            written, pending = count, None
        pending = take_next()
        if pending is None:
            break
    assert written == len(log.entries)
    assert log.entries == wanted


def test_a_definition_breaking_several_rules_is_refused_naming_each() -> None:
    tool = AgentTool(name="look", timeout_s=200.0, parameters={"type": 3})
    broken = AgentDefinition(
        name="other", prompt="p", tools=[tool, tool], max_call_seconds=MAX_CALL_SECONDS + 1
    )
    paths = [e["path"] for e in domain.definition_refusals(broken, "support-bot")]
    assert paths == [
        "$.name",
        "$.max_call_seconds",
        "$.tools[0].timeout_s",
        "$.tools[0].parameters",
        "$.tools[1].name",
        "$.tools[1].timeout_s",
        "$.tools[1].parameters",
    ]
    fine = AgentDefinition(name="support-bot", prompt="é" * (MAX_PROMPT_BYTES // 2))
    assert domain.definition_refusals(fine, "support-bot") == []
    assert domain.prompt_hash("Be brief.") == hashlib.sha256(b"Be brief.").hexdigest()
