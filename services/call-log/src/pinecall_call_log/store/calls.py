"""Calls and their entries: open, batches, ``/events``, end, seal, reads (the only SQL of them).

Every change to a call's log runs in one transaction that first locks the call's head row at READ
COMMITTED: two replicas retrying one batch at once queue on that row, and the second reads the
head the first committed, so it finds a replay and writes nothing (platform notes, "Postgres, the
append-only call log"). A batch's common case moves the head and writes its entries in one statement
(:data:`.head.WRITE_AT_HEAD`, on psycopg itself); when it changes nothing (a replay, a gap, a race
lost, a sealed or unknown call) a second transaction locks the head ``SELECT … FOR UPDATE`` and
follows :func:`domain.judge`. The keys of ``entries`` back it up. Reads run in autocommit
(:func:`~pinecall_servicekit.db.autocommit`): one round trip, not three.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

import psycopg
import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncEngine

from pinecall_call_log import domain
from pinecall_call_log.store.head import (
    LOCK_HEADS,
    WRITE_AT_HEADS,
    append_own,
    append_own_all,
    at_heads_parameters,
    insert_entries,
    lock_driver_head,
    lock_head,
    record_of,
    write_at_head,
)
from pinecall_call_log.store.lifecycle import end_at_head, open_head, started_data
from pinecall_call_log.store.tables import CALLS, ENTRIES
from pinecall_contracts import entries as kinds
from pinecall_contracts.agents import CONFIG_AGENT, AgentVersion
from pinecall_contracts.base import to_builtins
from pinecall_contracts.calls import (
    BatchWritten,
    CallBatch,
    CallCommandEntry,
    CallCommands,
    CallLog,
    CallOpen,
    CallRecord,
    EndCause,
    Entry,
    LoggedEntry,
    Outcome,
    Reopened,
)
from pinecall_servicekit import db
from pinecall_servicekit.errors import (
    Conflict,
    Forbidden,
    NotFound,
    PinecallError,
    StoreUnavailable,
    Unprocessable,
)


class CallStore:
    """Calls and entries in Postgres; driver errors become ``StoreUnavailable`` (503)."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self._autocommit = db.autocommit(engine)
        """The same pool, each statement its own transaction, for reads: no BEGIN and ROLLBACK
        around them (two round trips of three; issue 20's profile)."""

    async def open(
        self, o: CallOpen, now: dt.datetime, agent: AgentVersion | None = None
    ) -> tuple[CallRecord, bool]:
        """Open ``o.call`` and write ``call.started`` (naming the worker) as its seq 1.

        ``agent``, the latest version of the call's agent (None: its org defines none), is kept
        in the call's config (``agents.CONFIG_AGENT``) and its prompt's hash on the call and on
        ``call.started``, with the version. Returns the record and whether this request opened
        it. Opening again with the same agent, environment, room and worker answers the record
        as it was opened (a retry whose answer was lost: its agent's version is the first's);
        anything else is ``Conflict``. A new call is one statement (:data:`lifecycle.OPEN_CALL`, on
        psycopg itself); a call held already is judged under its head's lock.
        """
        config, prompt_hash, started = o.config, o.prompt_hash, {}
        if agent is not None:
            config = o.config | {CONFIG_AGENT: to_builtins(agent)}
            prompt_hash = agent.prompt_hash
            started = {"prompt_hash": agent.prompt_hash, "version": agent.version}
        elif prompt_hash is not None:
            started = {"prompt_hash": prompt_hash}
        data = started_data(o, started)
        async with (
            db.translate_errors("opening a call"),
            db.driver_transaction(self.engine) as pg,
        ):
            opened = await open_head(pg, o, config, prompt_hash, data, now)
        if opened is not None:
            return record_of(opened), True
        async with db.translate_errors("opening a call"), self.engine.begin() as conn:
            values = {
                "call_id": o.call,
                "agent": o.agent,
                "org": o.org,
                "environment": o.environment,
                "room": o.room,
                "worker": o.worker,
                "context": o.context,
                "config": config,
                "prompt_hash": prompt_hash,
                "channel": o.channel,
                "opened_at": now,
            }
            # a row made here is this transaction's, locked until it commits: it is the head
            made = (
                await conn.execute(
                    insert(CALLS).values(values).on_conflict_do_nothing().returning(*CALLS.c)
                )
            ).first()
            head = made if made is not None else await lock_head(conn, o.call)
            if made is None:
                same = (head.agent, head.environment, head.room, head.worker) == (
                    o.agent,
                    o.environment,
                    o.room,
                    o.worker,
                )
                if not same:
                    raise Conflict(f"call {o.call} was opened by {head.worker} in {head.room}")
                return record_of(head), False
            return record_of(await append_own_all(conn, head, [("call.started", data)], now)), True

    async def reopen(
        self, call: str, r: Reopened, environment: str, now: dt.datetime
    ) -> tuple[CallRecord, bool]:
        """Hold a call an older release opened; writes ``call.reopened`` only (no ringing, no
        started), and starts the writer's count at ``r.written``. A call already held is
        answered as it is (said once; a second time changes nothing)."""
        async with db.translate_errors("reopening a call"), self.engine.begin() as conn:
            made = (
                await conn.execute(
                    insert(CALLS)
                    .values(
                        call_id=call,
                        agent=r.agent,
                        org=r.org,
                        environment=environment,
                        room=r.room,
                        worker=r.worker,
                        context=r.context,
                        config=r.config,
                        reopened=True,
                        written=r.written,
                        opened_at=now,
                    )
                    .on_conflict_do_nothing()
                    .returning(CALLS.c.call_id)
                )
            ).first()
            head = await lock_head(conn, call)
            if made is None:
                if head.environment != environment:  # as every endpoint says it: 403
                    raise Forbidden(f"call {call} is not of {environment}")
                return record_of(head), False
            await append_own(conn, head, "call.reopened", {"agent": r.agent}, now)
            return record_of(await lock_head(conn, call)), True

    async def record(self, call: str) -> CallRecord | None:
        async with db.translate_errors("reading a call"), self._autocommit.connect() as conn:
            row = (await conn.execute(sa.select(CALLS).where(CALLS.c.call_id == call))).first()
        return None if row is None else record_of(row)

    async def write_batches(
        self, batches: Sequence[CallBatch], digests: Sequence[Sequence[bytes]], now: dt.datetime
    ) -> list[BatchWritten | PinecallError]:
        """Several calls' batches (a worker's, ``POST /v1/entries``), each answered as
        :meth:`write_batch` would answer it alone: its ``BatchWritten`` or the error it would
        raise, in ``batches``' order. ``digests[i]`` are :func:`domain.digest` of the i-th's.

        The common case is one statement, :data:`head.WRITE_AT_HEADS`, in its own transaction
        after :data:`head.LOCK_HEADS` has locked the heads in the order of their ids (so two
        such requests never deadlock). It commits whole or not at all, so a replica
        that dies before it commits writes none of them and each is sent again after the same
        count. A batch the statement did not write (a replay, a gap, a sealed or unknown call),
        and every batch when the transaction fails other than for Postgres not answering (a
        value Postgres cannot store: that batch's own 422), goes on alone through
        :meth:`write_batch`, so one batch's refusal is never another's."""
        order = [i for i, b in enumerate(batches) if b.entries]
        fast: dict[int, BatchWritten] = {}
        try:
            async with (
                db.translate_errors("writing entries"),
                db.driver_transaction(self.engine) as pg,
            ):
                await pg.execute(LOCK_HEADS, {"calls": sorted({batches[i].call for i in order})})
                cursor = await pg.execute(
                    WRITE_AT_HEADS,
                    at_heads_parameters(
                        [batches[i] for i in order], [digests[i] for i in order], now
                    ),
                )
                moved = {int(part): int(last) for part, last in await cursor.fetchall()}
            for place, i in enumerate(order, start=1):
                if (last := moved.get(place)) is not None:
                    size, after = len(batches[i].entries), batches[i].after
                    fast[i] = BatchWritten(
                        seqs=list(range(last - size + 1, last + 1)), written=after + size
                    )
        except StoreUnavailable as exc:
            return [exc for _ in batches]
        except (PinecallError, sa.exc.SQLAlchemyError, psycopg.Error):
            fast = {}
        answers: list[BatchWritten | PinecallError] = []
        for i, b in enumerate(batches):
            if (written := fast.get(i)) is not None:
                answers.append(written)
                continue
            try:
                answers.append(await self.write_batch(b.call, b.after, b.entries, digests[i], now))
            except PinecallError as exc:
                answers.append(exc)
        return answers

    async def write_batch(
        self,
        call: str,
        after: int,
        entries: Sequence[Entry],
        digests: Sequence[bytes],
        now: dt.datetime,
    ) -> BatchWritten:
        """A writer's batch, by :func:`domain.judge`: written whole, answered as a replay, or
        ``Conflict`` (409) naming both counts. ``NotFound`` / ``Conflict`` for an unknown or
        sealed call. ``digests`` are :func:`domain.digest` of ``entries``."""
        if entries:
            # the common case in one statement (head.WRITE_AT_HEAD) on psycopg itself; committed
            # by its transaction, so a replica that dies before it commits takes the batch with
            # it. Never in autocommit: a statement waiting on the head's lock when its replica
            # dies would still write once the lock is let go (tests/test_kill.py)
            async with (
                db.translate_errors("writing entries"),
                db.driver_transaction(self.engine) as pg,
            ):
                written = await write_at_head(pg, call, after, entries, digests, now)
            if written is not None:
                return written
        # the statement changed nothing (a replay, a gap, a race lost, a sealed or unknown
        # call): judged under the head's lock, which reads its newest version
        async with db.translate_errors("writing entries"), self.engine.begin() as conn:
            head = await lock_head(conn, call)
            verdict = domain.judge(int(head.written), after, len(entries))
            if isinstance(verdict, domain.Conflict):
                raise Conflict(verdict.detail, errors=[verdict.counts])
            if isinstance(verdict, domain.Replay):
                rows = (
                    await conn.execute(
                        sa.select(ENTRIES.c.seq, ENTRIES.c.digest)
                        .where(
                            ENTRIES.c.call_id == call,
                            ENTRIES.c.counted >= after,
                            ENTRIES.c.counted < after + len(entries),
                        )
                        .order_by(ENTRIES.c.counted)
                    )
                ).all()
                if not domain.same_entries(digests, [bytes(r.digest) for r in rows]):
                    refused = domain.Conflict(int(head.written), after)
                    raise Conflict(
                        refused.detail + "; the entries at those places are another batch's",
                        errors=[refused.counts],
                    )
                return BatchWritten(
                    seqs=[r.seq for r in rows], written=int(head.written), replayed=True
                )
            if not entries:
                return BatchWritten(seqs=[], written=int(head.written))
            # the head moved to this count after the first statement missed it
            first = int(head.last_seq) + 1
            await conn.execute(
                sa.update(CALLS)
                .where(CALLS.c.call_id == call)
                .values(written=after + len(entries), last_seq=first + len(entries) - 1)
            )
            return await insert_entries(conn, call, after, first, entries, digests, now)

    async def write_event(self, call: str, entry: Entry, now: dt.datetime) -> int:
        """An older worker's one entry (``/events``): takes a seq, counts nothing."""
        async with db.translate_errors("writing an event"), self.engine.begin() as conn:
            head = await lock_head(conn, call)
            return await append_own(conn, head, entry.kind, entry.data, domain.clamp(entry.ts, now))

    async def end(
        self,
        call: str,
        outcome: Outcome | None,
        reason: str | None,
        now: dt.datetime,
        *,
        seal: bool,
        cause: EndCause | None = None,
        at: dt.datetime | None = None,
    ) -> tuple[CallRecord, list[str]]:
        """End (and with ``seal``, seal) a call; returns the record and what changed, in order
        (``["ended", "sealed"]``, or ``[]`` for a repeat). Idempotent: ending an ended call or
        sealing a sealed one changes nothing; ending a sealed call is ``Conflict``. Ending an
        open call needs an ``outcome`` (``Unprocessable`` otherwise); its ``cause`` (why it ended
        ``drained``) is kept with it, and a repeat's is not. ``call.ended`` and ``ended_at`` are
        stamped ``at`` (the writer's time of the end, ``CallEnd.at``) kept between the call's
        opening and ``now``; ``now`` when None. The seal is stamped ``now``."""
        async with db.translate_errors("ending a call"), db.driver_transaction(self.engine) as pg:
            head = await lock_driver_head(pg, call, changing=not seal)
            done: list[str] = []
            own: list[tuple[str, dict[str, Any]]] = []
            stamped: dict[str, dt.datetime] = {}
            changes: dict[str, Any] = {}
            if head.ended_at is None:
                if outcome is None:
                    raise Unprocessable(f"call {call} is open: name its outcome")
                data: dict[str, Any] = {"outcome": outcome}
                if reason:
                    data["reason"] = reason
                if cause:
                    data["cause"] = cause
                ended = now if at is None else max(domain.clamp(at, now), head.opened_at)
                own.append(("call.ended", data))
                stamped["call.ended"] = ended
                changes |= {"ended_at": ended, "outcome": outcome, "cause": cause}
                done.append("ended")
            if seal and head.sealed_at is None:
                own.append(("call.sealed", {}))
                changes["sealed_at"] = now
                done.append("sealed")
            if own:
                head = await end_at_head(pg, head, own, now, stamped=stamped, changes=changes)
            return record_of(head), done

    async def read(self, call: str, after: int = 0, limit: int = 10_000) -> CallLog:
        """Entries of ``call`` with seq above ``after``, in seq order; ``NotFound`` if unknown."""
        async with db.translate_errors("reading a log"), self._autocommit.connect() as conn:
            head = (await conn.execute(sa.select(CALLS).where(CALLS.c.call_id == call))).first()
            if head is None:
                raise NotFound(f"no call {call}")
            rows = (
                await conn.execute(
                    sa.select(ENTRIES)
                    .where(ENTRIES.c.call_id == call, ENTRIES.c.seq > after)
                    .order_by(ENTRIES.c.seq)
                    .limit(limit)
                )
            ).all()
        return CallLog(
            call=call,
            state=record_of(head).state,
            entries=[
                LoggedEntry(seq=r.seq, kind=r.kind, ts=r.ts, data=r.data, counted=r.counted)
                for r in rows
            ],
        )

    async def commands(self, call: str, after: int = 0, limit: int = 100) -> CallCommands:
        """The call's ``call.command`` entries with seq above ``after``, in seq order (at most
        ``limit``) and the call's state; ``NotFound`` if unknown. Seqs are taken under the
        call's head lock and committed with it, so a command is never seen before one with a
        lower seq: a follower reading on from the last seq it saw misses none."""
        async with (
            db.translate_errors("reading a call's commands"),
            self._autocommit.connect() as conn,
        ):
            head = (await conn.execute(sa.select(CALLS).where(CALLS.c.call_id == call))).first()
            if head is None:
                raise NotFound(f"no call {call}")
            rows = (
                await conn.execute(
                    sa.select(ENTRIES.c.seq, ENTRIES.c.data)
                    .where(
                        ENTRIES.c.call_id == call,
                        ENTRIES.c.seq > after,
                        ENTRIES.c.kind == kinds.CALL_COMMAND,
                    )
                    .order_by(ENTRIES.c.seq)
                    .limit(limit)
                )
            ).all()
        return CallCommands(
            call=call,
            state=record_of(head).state,
            commands=[
                CallCommandEntry(
                    seq=r.seq, id=r.data["id"], kind=r.data["kind"], text=r.data.get("text")
                )
                for r in rows
            ],
        )
