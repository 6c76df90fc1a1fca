"""Holds a ``/metrics`` body to the registry (:mod:`pinecall_contracts.metrics`).

Each service's tests scrape its ``/metrics`` and assert ``unregistered(body, "<process>") == []``:
the body names only metrics registered for that process, each with exactly its registered labels
and type, and every metric registered for it is there (a family with no sample yet still says its
``# TYPE``), so the registry lists nothing nobody serves.
"""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from pinecall_contracts.metrics import BY_NAME, Process, served_by

_SUFFIXES = {"counter": ("_total", "_created"), "histogram": ("_bucket", "_sum", "_count")}


def unregistered(body: str, process: Process) -> list[str]:
    """What in ``body`` (Prometheus text) the registry does not say of ``process``, one line
    each: a family not registered for it, a wrong type, a sample's labels not the registered
    ones, a registered family missing. Empty when the two agree."""
    wanted = served_by(process)
    problems: list[str] = []
    seen: set[str] = set()
    for family in text_string_to_metric_families(body):
        # the parser names a counter's family without _total; the registry, as scraped, with it
        name = family.name + "_total" if family.type == "counter" else family.name
        spec = wanted.get(name)
        if spec is None:
            where = "" if name not in BY_NAME else f" (registered for {BY_NAME[name].served_by})"
            problems.append(f"{name}: served by {process}, not registered for it{where}")
            continue
        seen.add(name)
        if family.type != spec.kind:
            problems.append(f"{name}: a {family.type}, registered as a {spec.kind}")
        for sample in family.samples:
            if sample.name.endswith("_created"):
                continue  # prometheus-client's own timestamp series of a counter or histogram
            labels = tuple(k for k in sample.labels if k != "le")
            if sorted(labels) != sorted(spec.labels):
                problems.append(f"{sample.name}: labels {labels}, registered {spec.labels}")
    problems += [f"{name}: registered for {process}, not served" for name in wanted.keys() - seen]
    return problems
