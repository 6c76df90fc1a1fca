"""The page's server under ``up``: ``examples/page`` served on loopback, as a tenant's own server
would serve its copy (issue 17, "The page, in a real browser").

=====================  =========================================================================
route                  answer
=====================  =========================================================================
GET /                  the page (``index.html``) and its files, as they are in ``examples/page``
=====================  =========================================================================

The page itself holds no key: what it needs (the call-log's URL, a call and its log token) is in
its address, put there by its server.
"""

from __future__ import annotations

from pathlib import Path

from litestar import Litestar
from litestar.static_files import create_static_files_router

PAGE = Path(__file__).resolve().parents[4] / "examples" / "page"
"""The page of the checkout ``up`` runs from."""


def create_page_app(directory: Path = PAGE) -> Litestar:
    """The page's files from ``directory`` (``/`` is its ``index.html``); no lifespan, no state."""
    return Litestar(
        route_handlers=[create_static_files_router("/", [directory], html_mode=True)],
        logging_config=None,
    )
