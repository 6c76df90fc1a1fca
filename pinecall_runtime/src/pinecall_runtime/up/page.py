"""The page's server under ``up``: ``examples/page`` served on loopback, as a tenant's own server
would serve its copy (issue 17, "The page, in a real browser").

=====================  =========================================================================
route                  answer
=====================  =========================================================================
GET /                  the page (``index.html``) and its files, as they are in ``examples/page``
=====================  =========================================================================

``python -m pinecall_runtime.up.page --port P`` serves it on ``127.0.0.1:P`` (Granian, one
worker); ``up`` starts it so with the stand-ins and prints its URL.

The page itself holds no key: what it needs (the call-log's URL, a call and its log token) is in
its address, put there by its server.
"""

from __future__ import annotations

from pathlib import Path

import click
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


@click.command()
@click.option("--port", type=int, required=True, help="The loopback port to serve the page on.")
def serve(port: int) -> None:
    """Serve ``examples/page`` on ``127.0.0.1:PORT`` until stopped."""
    from granian import Granian
    from granian.constants import Interfaces

    Granian(
        f"{__name__}:create_page_app",
        address="127.0.0.1",
        port=port,
        interface=Interfaces.ASGI,
        factory=True,
    ).serve()


if __name__ == "__main__":
    serve()
