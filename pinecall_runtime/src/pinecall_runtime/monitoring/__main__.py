"""``python -m pinecall_runtime.monitoring``: write the alert rules and the dashboard to the chart's
``files/`` (``deploy/charts/pinecall/files/alerts.yaml`` and ``dashboard.json``), from the
repository's root or a folder given as the one argument."""

from __future__ import annotations

import sys
from pathlib import Path

from pinecall_runtime.monitoring.alerts import rules_yaml
from pinecall_runtime.monitoring.dashboard import dashboard_json

FILES = Path("deploy/charts/pinecall/files")


def main(argv: list[str]) -> int:
    files = Path(argv[0]) if argv else FILES
    files.mkdir(parents=True, exist_ok=True)
    (files / "alerts.yaml").write_text(rules_yaml())
    (files / "dashboard.json").write_text(dashboard_json())
    print(f"wrote {files / 'alerts.yaml'} and {files / 'dashboard.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
