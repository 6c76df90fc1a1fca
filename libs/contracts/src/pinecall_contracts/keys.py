"""Keys on the wire: what the operator sees of a key, and the revocation said on NATS."""

from __future__ import annotations

import datetime as dt
from typing import Literal

from pinecall_contracts.base import Contract
from pinecall_contracts.ids import EnvironmentField

KeyKind = Literal["operator", "fleet", "app"]
"""operator: the ops verbs; fleet: a worker's and KEDA's key, bound to one environment; app: an
app's calls and tokens, bound to one environment."""


class KeyInfo(Contract, frozen=True, kw_only=True, tag="keys.info.v1"):
    """A key as listed (never its secret)."""

    id: str
    kind: KeyKind
    name: str
    environment: EnvironmentField | None
    created_at: dt.datetime
    revoked_at: dt.datetime | None = None


class KeyCreated(Contract, frozen=True, kw_only=True, tag="keys.created.v1"):
    """A new key: the only time its secret is shown."""

    key: KeyInfo
    secret: str


class KeyRevoked(Contract, frozen=True, kw_only=True, tag="keys.revoked.v1"):
    """Said on NATS when a key is revoked, so every replica forgets it at once."""

    id: str
    at: dt.datetime
