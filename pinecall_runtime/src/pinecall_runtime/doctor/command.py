"""``pinecall-runtime doctor [--json] [--timeout S]``: what is wrong now, one line per thing.

Each line is ``LEVEL  check: subject: what is wrong → what to do`` (the subject left out of a
check's own ``ok`` line). Exit status: 0 when every line is ``ok``, ``info`` or ``skip``;
``ExitCode.PROBLEMS`` (4) when one is ``warn`` or ``fail``; an operator key refused is
``error [unauthorized]`` (1). A service that does not answer is a ``fail`` line, never a crash.
"""

from __future__ import annotations

import datetime as dt

import click
import msgspec

from pinecall_runtime.doctor import diagnose
from pinecall_runtime.doctor.evidence import gather
from pinecall_runtime.doctor.findings import Finding, wrong
from pinecall_servicekit.lifecycle import ExitCode
from pinecall_servicekit.operator import Number, OperatorSettings, run

LABEL = {"ok": "ok", "info": "info", "warn": "WARN", "fail": "FAIL", "skip": "skip"}


class Report(msgspec.Struct, frozen=True, kw_only=True):
    """``doctor --json``: whether all is well, and every finding in the order said."""

    ok: bool
    findings: list[Finding]
    at: dt.datetime


def line(finding: Finding) -> str:
    """One finding as ``doctor`` prints it."""
    subject = "" if finding.subject == finding.check else f"{finding.subject}: "
    todo = f" → {finding.todo}" if finding.todo else ""
    return f"{LABEL[finding.level]:<5} {finding.check}: {subject}{finding.what}{todo}"


async def report(settings: OperatorSettings, timeout_s: float) -> Report:
    """Ask the platform and judge it (``Unauthorized`` when the operator key is refused)."""
    findings = diagnose(await gather(settings, timeout_s))
    return Report(ok=not wrong(findings), findings=findings, at=dt.datetime.now(dt.UTC))


@click.command()
@click.option("--json", "as_json", is_flag=True, help="JSON for scripts.")
@click.option(
    "--timeout",
    "timeout_s",
    type=Number(0.1, 60),
    default=5.0,
    show_default=True,
    help="Seconds each service has to answer (on a loaded machine 2 s read healthy ones as down).",
)
@run
async def doctor(as_json: bool, timeout_s: float) -> None:
    """What is wrong now: services that do not answer, silent fleets, failing workers, rooms kept
    in offers, refusals at admission, dropped webhooks, stale migrations.

    Exits 4 when something is wrong (a WARN or FAIL line), 0 otherwise.
    """
    result = await report(OperatorSettings.load(), timeout_s)
    if as_json:
        click.echo(msgspec.json.format(msgspec.json.encode(result), indent=2))
    else:
        for finding in result.findings:
            click.echo(line(finding))
    if not result.ok:
        raise click.exceptions.Exit(ExitCode.PROBLEMS)
