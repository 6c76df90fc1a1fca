"""``doctor``'s rule of the schemas: each installed service's migrations against its database.

Source: ``shared/CONVENTIONS.md`` habit 14 (each service its schema and version table; ``migrate``
as a pre-upgrade hook). The standing is :meth:`pinecall_servicekit.migrations.Migrations.status`.
"""

from __future__ import annotations

from pinecall_runtime.doctor.findings import WRONG, Finding, Level, ok, skip
from pinecall_servicekit.migrations import MigrationStatus


def migrations(statuses: dict[str, MigrationStatus | str] | None) -> list[Finding]:
    """Each installed service's schema against its scripts: behind or never migrated fails."""
    if statuses is None:
        return [skip("migrations", "Postgres")]
    found: list[Finding] = []
    at_head = []
    for service, status in sorted(statuses.items()):

        def finding(level: Level, what: str, todo: str, service: str = service) -> Finding:
            return Finding(check="migrations", level=level, subject=service, what=what, todo=todo)

        if isinstance(status, str):
            found.append(finding("skip", status, ""))
        elif status.standing == "at_head":
            at_head.append(f"{service} {','.join(status.heads)}")
        elif status.standing == "never":
            found.append(
                finding(
                    "fail",
                    f"never migrated (no {status.schema}.alembic_version)",
                    "pinecall-runtime migrate",
                )
            )
        elif status.standing == "behind":
            found.append(
                finding(
                    "fail",
                    f"stale: the database is at {','.join(status.applied)}, its scripts at "
                    f"{','.join(status.heads)}",
                    "pinecall-runtime migrate (the Helm chart's pre-upgrade hook runs it)",
                )
            )
        else:
            found.append(
                finding(
                    "warn",
                    f"the database is at {','.join(status.applied)}, which the scripts "
                    "installed here do not know: a newer release migrated it",
                    "run doctor from the release the platform runs",
                )
            )
    if not at_head and not found:
        return [
            Finding(
                check="migrations",
                level="skip",
                subject="migrations",
                what="not checked: no service's migrations are installed here",
            )
        ]
    if at_head and not any(f.level in WRONG for f in found):
        found.insert(0, ok("migrations", "at head: " + ", ".join(at_head)))
    return found
