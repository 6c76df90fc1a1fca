"""``freeze_what_started``: what is alive when a service has started is frozen once, and the
young garbage of the start is collected, not frozen (``pinecall_servicekit.frozen``)."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import gc, weakref
from pinecall_servicekit.frozen import freeze_what_started

class Node:
    pass

def garbage():
    a, b = Node(), Node()
    a.other, b.other = b, a  # a cycle: only the collector frees it
    return weakref.ref(a)

kept = Node()
gone = garbage()
assert gone() is not None and gc.get_freeze_count() == 0
freeze_what_started()
frozen = gc.get_freeze_count()
freeze_what_started()  # once a process
print(gone() is None, frozen > 1000, gc.get_freeze_count() == frozen, kept in gc.get_objects())
"""


def test_the_start_is_frozen_once_and_its_young_garbage_collected() -> None:
    # a process of its own: freezing is for the life of the process that does it
    out = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, check=True
    ).stdout.split()
    # the cycle collected; the imports and the app's objects frozen; not again; the frozen ones
    # are no longer tracked by the generations the collector walks
    assert out == ["True", "True", "True", "False"]
