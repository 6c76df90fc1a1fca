"""The one TLS context of a process's HTTP clients.

httpx builds a context for every client it makes — certifi's bundle read and parsed, 31 ms on an
idle core of this machine, up to 2.2 s on a worker job's event loop under ``up``'s load
(livekit-agents' slow-callback warnings, issue 20). Made here once, at import (so in the worker's
forkserver, and inherited by every job process), and given to every client as ``verify``.
"""

from __future__ import annotations

import ssl

import httpx

TLS: ssl.SSLContext = httpx.create_ssl_context()
"""httpx's own default context (certifi's bundle, ``SSL_CERT_FILE``/``SSL_CERT_DIR`` honoured)."""
