"""The operator's verbs that the roster serves: ``fleet list|cordon|uncordon`` and ``keys``.

``fleet`` travels over NATS (the roster's ops service), so it works from any machine that
reaches NATS with an operator key; ``fleet list`` adds each fleet's refusals at admission and
rooms waiting for a worker in the last ten minutes when a dispatcher answers its ops verb (the
text is drawn by :mod:`pinecall_roster.listing`). ``keys`` writes the keys table directly (it is
how the first operator key is made) and says a revocation on NATS so every replica forgets the
key at once.
"""

from __future__ import annotations

import datetime as dt
from typing import get_args

import click
import msgspec
import nats.errors

from pinecall_contracts.base import to_builtins
from pinecall_contracts.dispatch import OffersRequest, OffersSnapshot
from pinecall_contracts.fleet import CordonRequest, CordonSetting, FleetListRequest, RosterSnapshot
from pinecall_contracts.ids import ENVIRONMENTS, WorkerNameError, worker_key
from pinecall_contracts.keys import KeyKind, KeyRevoked
from pinecall_roster import listing
from pinecall_servicekit.bus import Bus
from pinecall_servicekit.errors import BusUnavailable
from pinecall_servicekit.lifecycle import ExitCode
from pinecall_servicekit.operator import CommandError, OperatorSettings, run, table


def _auth(settings: OperatorSettings) -> dict[str, str]:
    if not settings.operator_key:
        raise CommandError(
            "unauthorized",
            "no operator key: set PINECALL_OPERATOR_KEY, or run ./dev up "
            f"(while it runs, {settings.state_dir}/up.json names one)",
        )
    return {"Authorization": f"Bearer {settings.operator_key}"}


OFFERS_WITHIN_S = 1.0
"""How long ``fleet list`` waits for the dispatcher's refusals and rooms waiting (seconds)."""


@click.group()
def fleet() -> None:
    """The roster of every fleet: list workers, cordon and uncordon them."""


@fleet.command(name="list")
@click.option("--json", "as_json", is_flag=True, help="JSON for scripts.")
@click.option("--fleet", "only", default=None, help="Only this fleet.")
@run
async def fleet_list(as_json: bool, only: str | None) -> None:
    """Every fleet's workers: state, seats, calls, load, first audio p95, last minute's failed
    calls, last heard; each fleet's refusals and rooms waiting in the last ten minutes."""
    settings = OperatorSettings.load()
    bus = await Bus.connect(settings.nats_url, settings.nats_namespace, name="cli")
    try:
        snapshot = await bus.request(
            bus.subjects.ops_fleet_list,
            FleetListRequest(fleet=only),
            RosterSnapshot,
            headers=_auth(settings),
        )
        offers = await _offers(bus, settings, only)
    finally:
        await bus.close()
    if only is not None and not snapshot.fleets:
        raise CommandError(
            "not_found",
            f"no fleet {only}: `fleet list` names every fleet the roster stores or hears",
            ExitCode.NOT_FOUND,
        )
    if offers is None:
        click.echo(
            "not shown: each fleet's refusals and rooms waiting (no dispatcher answered in "
            f"{OFFERS_WITHIN_S:g} s)",
            err=True,
        )
    if as_json:
        # the roster's snapshot, plus the dispatcher's offers (null when none answered)
        document = to_builtins(snapshot) | {"offers": offers and to_builtins(offers)}
        click.echo(msgspec.json.format(msgspec.json.encode(document), indent=2))
        return
    by_fleet = None if offers is None else {f.fleet: f for f in offers.fleets}
    for view in snapshot.fleets:
        for line in listing.fleet_lines(view, by_fleet):
            click.echo(line)
        click.echo()


async def _offers(bus: Bus, settings: OperatorSettings, only: str | None) -> OffersSnapshot | None:
    """Each fleet's rooms waiting and refusals in the last ten minutes, from the dispatcher's
    ops verb; None when no dispatcher answers (a roster alone)."""
    try:
        return await bus.request(
            bus.subjects.ops_dispatch_offers,
            OffersRequest(fleet=only),
            OffersSnapshot,
            headers=_auth(settings),
            timeout=OFFERS_WITHIN_S,
        )
    except BusUnavailable:
        return None


def _worker_name(_ctx: click.Context, _param: click.Parameter, worker: str) -> str:
    """WORKER as the cordon names it; what is no worker's name is a usage error (exit 2)."""
    try:
        worker_key(worker)
    except WorkerNameError as exc:
        raise click.BadParameter(str(exc)) from exc
    return worker


async def _cordon(
    worker: str, cordoned: bool, reason: str | None, force: bool = False
) -> CordonSetting:
    settings = OperatorSettings.load()
    key = worker_key(worker)  # the argument's callback said it is a worker's name
    bus = await Bus.connect(settings.nats_url, settings.nats_namespace, name="cli")
    try:
        return await bus.request(
            bus.subjects.ops_fleet_cordon,
            # the name as given, its start too: the roster refuses a start nobody heard
            CordonRequest(
                worker=key,
                named=worker if worker != key else None,
                cordoned=cordoned,
                reason=reason,
                force=force,
            ),
            CordonSetting,
            headers=_auth(settings),
        )
    except BusUnavailable as exc:
        if not isinstance(exc.__cause__, nats.errors.TimeoutError):
            raise  # nobody listens: nothing was delivered
        # delivered, unanswered: a roster that is slow (not gone) may still act on it
        raise BusUnavailable(
            f"{exc.detail}; the request was sent: a roster that is slow rather than gone may "
            f"still {'set' if cordoned else 'lift'} the cordon of {key} when it gets to it "
            "(fleet list says whether it did)"
        ) from exc
    finally:
        await bus.close()


@fleet.command(name="cordon")
@click.argument("worker", callback=_worker_name)
@click.option("--reason", default=None)
@click.option(
    "--force", is_flag=True, help="Cordon a worker nobody heard in the last hour (not started yet)."
)
@run
async def fleet_cordon(worker: str, reason: str | None, force: bool) -> None:
    """Cordon WORKER (<fleet>/<worker>[.<start>]): no new call; it finishes and exits 3.

    A worker nobody heard in the last hour is a [not_found] error (a typo), unless --force."""
    setting = await _cordon(worker, True, reason, force)
    click.echo(f"{setting.worker}: cordoned")


@fleet.command(name="uncordon")
@click.argument("worker", callback=_worker_name)
@run
async def fleet_uncordon(worker: str) -> None:
    """Lift WORKER's cordon."""
    setting = await _cordon(worker, False, None)
    click.echo(f"{setting.worker}: uncordoned")


@click.group()
def keys() -> None:
    """Operator, fleet (per environment), app (per environment) and service keys."""


@keys.command(name="create")
@click.option(
    "--kind",
    type=click.Choice(get_args(KeyKind)),
    required=True,
    help="operator: a person's, for the ops verbs; service: the dispatcher's and the reaper's "
    "(PINECALL_SERVICE_KEY), refused the ops verbs; fleet, app: per environment.",
)
@click.option("--name", required=True, help="Who or what holds it.")
@click.option(
    "--environment",
    type=click.Choice(ENVIRONMENTS),
    default=None,
    help="For fleet and app keys.",
)
@click.option(
    "--person",
    default=None,
    help="A person's key (app, or an operator person's operator key), asked of the roster over "
    "NATS with the operator key (`persons list` shows ids).",
)
@run
async def keys_create(
    kind: KeyKind, name: str, environment: str | None, person: str | None
) -> None:
    """Make a key and print its secret (shown this once). Without --person the key is written
    directly: it is how the first operator key is made, before any roster answers."""
    if kind in ("fleet", "app") and environment is None:
        raise CommandError(
            "usage",
            f"--kind {kind} needs --environment ({' or '.join(ENVIRONMENTS)})",
            ExitCode.USAGE,
        )
    if person is not None:
        from pinecall_contracts.keys import KeyCreated
        from pinecall_contracts.persons import PersonKeyCreate
        from pinecall_roster.people_commands import ask

        try:
            request = msgspec.convert(
                {"kind": kind, "name": name, "environment": environment, "person": person},
                PersonKeyCreate,
            )
        except msgspec.ValidationError as exc:
            raise click.BadParameter(str(exc), param_hint="--person") from exc
        click.echo((await ask("keys-create", request, KeyCreated)).secret)
        return
    from pinecall_roster.store import Store  # SQLAlchemy, loaded by the keys commands alone
    from pinecall_servicekit import db

    engine = db.create_engine(OperatorSettings.load().database_url, pool_size=1)
    try:
        created = await Store(engine).create_key(kind, name, environment)
    finally:
        await engine.dispose()
    click.echo(created.secret)


@keys.command(name="list")
@click.option("--json", "as_json", is_flag=True)
@run
async def keys_list(as_json: bool) -> None:
    """Every key (never a secret)."""
    from pinecall_roster.store import Store  # SQLAlchemy, loaded by the keys commands alone
    from pinecall_servicekit import db

    engine = db.create_engine(OperatorSettings.load().database_url, pool_size=1)
    try:
        infos = await Store(engine).keys()
    finally:
        await engine.dispose()
    if as_json:
        click.echo(msgspec.json.encode([to_builtins(k) for k in infos]).decode())
        return
    click.echo(
        table(
            ("id", "kind", "name", "environment", "created", "revoked"),
            [
                (
                    k.id,
                    k.kind,
                    k.name,
                    k.environment,
                    f"{k.created_at:%Y-%m-%d %H:%M}",
                    k.revoked_at and f"{k.revoked_at:%Y-%m-%d %H:%M}",
                )
                for k in infos
            ],
        )
    )


@keys.command(name="revoke")
@click.argument("key_id")
@run
async def keys_revoke(key_id: str) -> None:
    """Revoke KEY_ID; every roster replica reachable on NATS forgets it at once."""
    settings = OperatorSettings.load()
    from pinecall_roster.store import Store  # SQLAlchemy, loaded by the keys commands alone
    from pinecall_servicekit import db

    engine = db.create_engine(settings.database_url, pool_size=1)
    try:
        info = await Store(engine).revoke_key(key_id)
    finally:
        await engine.dispose()
    try:
        bus = await Bus.connect(settings.nats_url, settings.nats_namespace, name="cli")
    except BusUnavailable:
        click.echo(f"{key_id}: revoked; NATS did not answer, replicas forget it within 5 s")
        return
    try:
        await bus.publish(
            bus.subjects.key_revoked,
            KeyRevoked(id=key_id, at=info.revoked_at or dt.datetime.now(dt.UTC)),
        )
    finally:
        await bus.close()
    click.echo(f"{key_id}: revoked")
