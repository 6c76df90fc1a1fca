"""``pinecall-runtime logs CALL [--json]``: a call's journal (offers and why) and its entries.

Source: ``shared/DESIGN.md``, "The operator's surface". Over NATS, at once: the dispatcher's
``dispatch.journal`` and call-log's ``calls.log`` (paged until the log is read whole), woven into
one story by :mod:`pinecall_runtime.timeline`; the header names the call's trace id (issue 22).

Errors: a call id that is not one is a usage error (exit 2, before anything is asked); a call
neither the dispatcher nor call-log knows is ``error [not_found]`` (``ExitCode.NOT_FOUND``, 5);
when one of them does not answer, what the other said is shown, the missing part named, and the
exit is ``ExitCode.UNAVAILABLE`` (69); neither answering is ``error [unavailable]`` (69).
"""

from __future__ import annotations

import asyncio

import click
import msgspec

from pinecall_contracts.calls import CallIdField, CallLogPage, CallLogRequest, CallRecord
from pinecall_contracts.calls import LoggedEntry as Entry
from pinecall_contracts.dispatch import Journal, JournalLine, JournalRequest
from pinecall_runtime import timeline
from pinecall_servicekit import calltrace
from pinecall_servicekit.bus import Bus
from pinecall_servicekit.errors import BusUnavailable, NotFound, Unauthorized
from pinecall_servicekit.lifecycle import ExitCode
from pinecall_servicekit.operator import CommandError, Number, OperatorSettings, run

PAGE = 500
"""Entries asked for at a time (call-log also keeps a page under half a NATS message)."""


class CallStory(msgspec.Struct, frozen=True, kw_only=True):
    """``logs --json``: what the call is, its journal, its entries, and what did not answer."""

    call: str
    record: CallRecord | None
    journal: list[JournalLine]
    entries: list[Entry]
    missing: list[str]
    trace: str | None = None
    """The call's trace id (32 hex digits: ``servicekit.calltrace``, from its environment and
    room on the log), for a tracing backend; None when call-log holds no such call."""
    """``dispatcher: …`` or ``call-log: …`` for a source that did not answer."""


def call_id(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """``value`` if it is a call id (the contracts' ``CallIdField``), else a usage error."""
    try:
        return msgspec.convert(value, CallIdField)
    except msgspec.ValidationError as exc:
        raise click.BadParameter(
            f"{value!r} is not a call id: letters, digits and _ . : - (128 at most), "
            "starting with a letter or digit"
        ) from exc


async def _log(bus: Bus, call: str, headers: dict[str, str], timeout_s: float) -> CallLogPage:
    """Every page of the call's log, as one page."""
    first = page = await bus.request(
        bus.subjects.ops_calls_log,
        CallLogRequest(call=call, limit=PAGE),
        CallLogPage,
        headers=headers,
        timeout=timeout_s,
    )
    entries = list(first.entries)
    while page.more and page.entries:
        page = await bus.request(
            bus.subjects.ops_calls_log,
            CallLogRequest(call=call, after=page.entries[-1].seq, limit=PAGE),
            CallLogPage,
            headers=headers,
            timeout=timeout_s,
        )
        entries += page.entries
    return CallLogPage(call=call, record=page.record, entries=entries)


async def story(settings: OperatorSettings, call: str, timeout_s: float) -> CallStory:
    """What the dispatcher and call-log know of ``call``.

    Raises ``NotFound`` when both answered and neither knows it, ``Unavailable`` when neither
    answered, ``Unauthorized`` for the operator key.
    """
    if not settings.operator_key:
        raise Unauthorized("no operator key: set PINECALL_OPERATOR_KEY")
    headers = {"Authorization": f"Bearer {settings.operator_key}"}
    bus = await Bus.connect(settings.nats_url, settings.nats_namespace, name="cli")
    try:
        journal, log = await asyncio.gather(
            bus.request(
                bus.subjects.ops_dispatch_journal,
                JournalRequest(call=call),
                Journal,
                headers=headers,
                timeout=timeout_s,
            ),
            _log(bus, call, headers, timeout_s),
            return_exceptions=True,
        )
    finally:
        await bus.close()
    missing = []
    for service, answer in (("dispatcher", journal), ("call-log", log)):
        if isinstance(answer, BusUnavailable):
            missing.append(f"{service}: no replica answered in {timeout_s:g} s")
        elif isinstance(answer, BaseException) and not isinstance(answer, NotFound):
            raise answer  # the operator key refused, or a service's own failure
    lines = journal.lines if isinstance(journal, Journal) else []
    page = log if isinstance(log, CallLogPage) else None
    if page is None and not lines:
        if len(missing) == 2:
            raise BusUnavailable("neither the dispatcher nor call-log answered")
        if not missing:
            raise NotFound(
                f"no call {call}: the dispatcher's journal has no offer of it and call-log "
                "holds no such call"
            )
        knows = {
            "dispatcher": "the dispatcher's journal has no offer of it",
            "call-log": "call-log holds no such call",
        }
        [answered] = [s for s in knows if not any(m.startswith(f"{s}:") for m in missing)]
        raise BusUnavailable(f"no call {call}: {knows[answered]}, and {missing[0]}")
    record = page.record if page else None
    return CallStory(
        call=call,
        record=record,
        journal=lines,
        entries=page.entries if page else [],
        missing=missing,
        trace=calltrace.call_trace_id(record.environment, record.room) if record else None,
    )


@click.command()
@click.argument("call", callback=call_id)
@click.option("--json", "as_json", is_flag=True, help="JSON for scripts.")
@click.option(
    "--timeout",
    "timeout_s",
    type=Number(0.1, 60),
    default=2.0,
    show_default=True,
    help="Seconds each service has to answer.",
)
@run
async def logs(call: str, as_json: bool, timeout_s: float) -> None:
    """CALL's journal (each offer and why) and its entries, in the order they happened.

    Exits 5 for a call nobody knows, 69 when the dispatcher or call-log did not answer.
    """
    try:
        told = await story(OperatorSettings.load(), call, timeout_s)
    except NotFound as exc:
        raise CommandError(exc.code, exc.detail, ExitCode.NOT_FOUND) from exc
    if as_json:
        click.echo(msgspec.json.format(msgspec.json.encode(told), indent=2))
    else:
        said = timeline.header(call, told.record)
        if told.trace is not None:  # the call's one trace, across every service
            said[-1] += f"; trace {told.trace}"
        for text in said:
            click.echo(text)
        for line in timeline.weave(call, told.journal, told.entries):
            click.echo(timeline.text(line))
        for missing in told.missing:
            click.echo(f"not shown: {missing}", err=True)
    if told.missing:
        raise click.exceptions.Exit(ExitCode.UNAVAILABLE)
