"""WhatsApp numbers (issue 17): the only SQL of them.

A put is one statement, ``INSERT … ON CONFLICT (phone_number_id) DO UPDATE … WHERE`` the row is
the same org's and environment's: a number another org (or environment) holds is never taken
over (the put answers None and writes nothing), and two puts of one number on any replica leave
one of them whole. Reads never return the secrets; :meth:`NumberStore.secrets` does, for the
chat service's route only.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncEngine

from pinecall_call_log.store.tables import WHATSAPP_NUMBERS
from pinecall_contracts.whatsapp import WhatsAppNumber, WhatsAppNumberPut, WhatsAppNumberSecrets
from pinecall_servicekit import db

T = WHATSAPP_NUMBERS.c


def token_hash(verify_token: str) -> str:
    """How a verify token is kept and found: its SHA-256 of UTF-8, in hex."""
    return hashlib.sha256(verify_token.encode()).hexdigest()


def _number(row: sa.Row[Any]) -> WhatsAppNumber:
    return WhatsAppNumber(
        phone_number_id=row.phone_number_id,
        org=row.org,
        environment=row.environment,
        agent=row.agent,
        display_phone_number=row.display_phone_number,
        updated_at=row.updated_at,
    )


class NumberStore:
    """Every WhatsApp number, in Postgres."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    async def put(
        self, phone_number_id: str, org: str, environment: str, put: WhatsAppNumberPut,
        now: dt.datetime,
    ) -> WhatsAppNumber | None:  # fmt: skip
        """Tie the number to ``put.agent`` with its secrets; None when another org or
        environment holds it (nothing written). The same put again keeps ``updated_at``."""
        values = {
            "agent": put.agent,
            "display_phone_number": put.display_phone_number,
            "verify_token_sha256": token_hash(put.verify_token),
            "app_secret": put.app_secret,
            "access_token": put.access_token,
        }
        excluded = insert(WHATSAPP_NUMBERS).excluded
        changed = sa.or_(*(T[k].is_distinct_from(excluded[k]) for k in values))
        statement = (
            insert(WHATSAPP_NUMBERS)
            .values(
                phone_number_id=phone_number_id,
                org=org,
                environment=environment,
                updated_at=now,
                **values,
            )
            .on_conflict_do_update(
                index_elements=[T.phone_number_id],
                set_={**{k: excluded[k] for k in values}, "updated_at": excluded.updated_at},
                where=sa.and_(T.org == org, T.environment == environment, changed),
            )
            .returning(WHATSAPP_NUMBERS)
        )
        async with db.translate_errors("storing a WhatsApp number"), self.engine.begin() as conn:
            row = (await conn.execute(statement)).first()
            if row is None:  # not written: another's, or the same put again
                query = sa.select(WHATSAPP_NUMBERS).where(
                    T.phone_number_id == phone_number_id, T.org == org,
                    T.environment == environment,
                )  # fmt: skip
                row = (await conn.execute(query)).first()
        return None if row is None else _number(row)

    async def get(self, phone_number_id: str) -> WhatsAppNumber | None:
        async with db.translate_errors("reading a WhatsApp number"), self.engine.connect() as c:
            query = sa.select(WHATSAPP_NUMBERS).where(T.phone_number_id == phone_number_id)
            row = (await c.execute(query)).first()
        return None if row is None else _number(row)

    async def of_org(self, org: str, environment: str) -> list[WhatsAppNumber]:
        """The org's numbers in ``environment``, by id."""
        query = (
            sa.select(WHATSAPP_NUMBERS)
            .where(T.org == org, T.environment == environment)
            .order_by(T.phone_number_id)
        )
        async with db.translate_errors("listing WhatsApp numbers"), self.engine.connect() as c:
            return [_number(r) for r in (await c.execute(query)).all()]

    async def secrets(self, phone_number_id: str) -> WhatsAppNumberSecrets | None:
        async with db.translate_errors("reading a WhatsApp number"), self.engine.connect() as c:
            query = sa.select(WHATSAPP_NUMBERS).where(T.phone_number_id == phone_number_id)
            row = (await c.execute(query)).first()
        if row is None:
            return None
        return WhatsAppNumberSecrets(
            number=_number(row), app_secret=row.app_secret, access_token=row.access_token
        )

    async def by_verify_token(self, verify_token: str) -> list[WhatsAppNumber]:
        """The numbers whose verify token is ``verify_token``."""
        query = sa.select(WHATSAPP_NUMBERS).where(T.verify_token_sha256 == token_hash(verify_token))
        async with db.translate_errors("reading WhatsApp numbers"), self.engine.connect() as c:
            return [_number(r) for r in (await c.execute(query)).all()]
