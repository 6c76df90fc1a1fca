"""Keys on the wire: what the operator sees of a key, and the revocation said on NATS."""

from __future__ import annotations

import datetime as dt
from typing import Literal

from pinecall_contracts.base import Contract
from pinecall_contracts.ids import EnvironmentField

KeyKind = Literal["operator", "fleet", "app", "service"]
"""operator: the ops verbs, a person's; fleet: a worker's and KEDA's key, bound to one
environment; app: an app's calls and tokens, bound to one environment; service: a service's
reads and posts of another service in every environment (the dispatcher's and the reaper's: the
roster's rows, call-log's ends and the agents' logs), refused the ops verbs."""


class KeyInfo(Contract, frozen=True, kw_only=True, tag="keys.info.v1"):
    """A key as listed (never its secret)."""

    id: str
    kind: KeyKind
    name: str
    environment: EnvironmentField | None
    created_at: dt.datetime
    revoked_at: dt.datetime | None = None
    person: str | None = None
    """The person who holds the key (``roster.persons``); None: a key of no person, which acts
    as its kind allows (every key made before persons existed, fleet and service keys)."""


class KeyCreated(Contract, frozen=True, kw_only=True, tag="keys.created.v1"):
    """A new key: the only time its secret is shown."""

    key: KeyInfo
    secret: str


class KeyRevoked(Contract, frozen=True, kw_only=True, tag="keys.revoked.v1"):
    """Said on NATS when a key is revoked, so every replica forgets it at once."""

    id: str
    at: dt.datetime
