"""``up --prometheus``: a real Prometheus (Debian's ``prometheus`` package, ``/usr/bin/prometheus``)
scraping every process of the run that serves ``/metrics``, with the alert rules loaded.

It scrapes and evaluates every second, each rule held for its :attr:`Alert.quick
<pinecall_runtime.monitoring.alerts.Alert.quick>` (a run lasts minutes), its data in the run's
state folder. At the end :func:`fired` asks it which alerts fired at any time of the run
(``ALERTS{alertstate="firing"}`` over the run's window). Run as ``python -m
pinecall_runtime.monitoring.prometheus CONFIG DATA ADDRESS``, it becomes that Prometheus
(``exec``), so ``up``'s supervision stops it as any of its processes.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import httpx
import yaml

from pinecall_contracts.metrics import PROCESSES
from pinecall_runtime.monitoring.alerts import TITLES, rules_yaml

PROMETHEUS = "/usr/bin/prometheus"
EVERY_S = 1
"""Seconds between scrapes, and between evaluations of the rules."""


def job_of(process: str) -> str | None:
    """The registry's process a process of ``up`` is (``roster-1`` → ``roster``,
    ``worker-production`` → ``worker``), None for one that serves no metrics (a stand-in)."""
    for name in PROCESSES:
        if process == name or process.startswith(name + "-"):
            return name
    return None


def config(targets: Iterable[tuple[str, str]], rules: Path) -> dict[str, Any]:
    """Prometheus's configuration: ``targets`` are ``(process, base URL)``; each process a job of
    its own (its name), labelled with the registry's process (``service``)."""
    return {
        "global": {"scrape_interval": f"{EVERY_S}s", "evaluation_interval": f"{EVERY_S}s"},
        "rule_files": [str(rules)],
        "scrape_configs": [
            {
                "job_name": name,
                "static_configs": [
                    {
                        "targets": [url.split("://", 1)[-1]],
                        "labels": {"process": job_of(name) or name},
                    }
                ],
            }
            for name, url in targets
        ],
    }


def prepare(folder: Path, targets: Iterable[tuple[str, str]]) -> Path:
    """Write the rules (quick holds) and the configuration into ``folder`` (emptied first: a
    previous run's data goes); the configuration's path."""
    if not Path(PROMETHEUS).is_file():
        raise FileNotFoundError(
            f"{PROMETHEUS} is missing: ./dev sync installs Debian's prometheus (apt-get install "
            "prometheus)"
        )
    folder = folder.resolve()  # Prometheus reads rule_files from its configuration's folder
    shutil.rmtree(folder, ignore_errors=True)
    (folder / "data").mkdir(parents=True)
    rules = folder / "alerts.yaml"
    rules.write_text(rules_yaml(quick=True))
    path = folder / "prometheus.yml"
    path.write_text(yaml.safe_dump(config(targets, rules), sort_keys=False))
    return path


def args(config_path: Path, address: str) -> list[str]:
    """The arguments of ``python -m pinecall_runtime.monitoring.prometheus``."""
    return [str(config_path), str(config_path.parent / "data"), address]


def fired(url: str, window_s: float) -> list[dict[str, str]]:
    """Every alert that fired in the last ``window_s`` seconds, by name: ``{"alert", "title"}``,
    sorted. Raises ``httpx.HTTPError`` when Prometheus does not answer."""
    query = (
        f'max by (alertname) (max_over_time(ALERTS{{alertstate="firing"}}[{int(window_s) + 1}s]))'
    )
    r = httpx.get(f"{url}/api/v1/query", params={"query": query}, timeout=10)
    r.raise_for_status()
    names = sorted(s["metric"]["alertname"] for s in r.json()["data"]["result"])
    return [{"alert": n, "title": TITLES.get(n, n)} for n in names]


def main(argv: list[str]) -> None:
    """Become Prometheus: ``CONFIG DATA ADDRESS`` (``127.0.0.1:PORT``)."""
    config_path, data, address = argv
    os.execv(
        PROMETHEUS,
        [
            PROMETHEUS,
            f"--config.file={config_path}",
            f"--storage.tsdb.path={data}",
            f"--web.listen-address={address}",
            "--storage.tsdb.retention.time=1d",
            "--log.level=warn",
        ],
    )


if __name__ == "__main__":
    main(sys.argv[1:])
