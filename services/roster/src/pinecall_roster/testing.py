"""Test support for the roster and for tests of other services that need one (no fixtures here:
they are in the tests' conftest). Used only by tests."""

from __future__ import annotations

import msgspec


class Keys(msgspec.Struct, frozen=True):
    operator: str
    production: str
    sandbox: str
    app: str
    production_id: str


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def heartbeat(host: str = "worker-a", *, fleet: str = "pinecall", start: int = 1791067258,
              active: int = 0, seats: int = 8, **extra: object) -> dict[str, object]:
    name = f"{fleet}/{host}.{start}"
    body: dict[str, object] = {"fleet": fleet, "worker": name, "agent_name": name,
                               "active": active, "max_jobs": seats, "load": active / seats,
                               "draining": False}
    return body | extra
