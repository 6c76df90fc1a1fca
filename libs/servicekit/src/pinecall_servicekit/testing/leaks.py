"""A test file's garbage collected as the file ends, so what it left open is blamed on it.

A connection, transport or socket a test leaves unclosed says so (``ResourceWarning``) only when
the garbage collector frees it, at no moment a test chose: pytest (``filterwarnings = error``)
then fails whichever test runs in that xdist process at the time, often a later file's (CI:
``test_migration_0004`` failed on the server-side connections of ``test_whatsapp_killed``'s
silent model). Collected at the end of each file, the warning fails that file's last test.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest


@pytest.fixture(scope="module", autouse=True)
def _garbage_of_the_file() -> Iterator[None]:
    """Set up before, and so torn down after, the module's event loop: a full collection then
    (pytest reports what it frees unclosed in that teardown; about 0.1–1 s a file)."""
    yield
    gc.collect()
