"""``pinecall-runtime lab …``: the load lab's commands (loaded only when invoked)."""

from __future__ import annotations

import click


@click.group()
def lab() -> None:
    """The load lab: stand-ins, scenarios and benchmarks, on this machine only."""
