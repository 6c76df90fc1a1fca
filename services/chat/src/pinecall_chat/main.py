"""``pinecall-runtime chat serve``: the chat service's process entry and image command."""

from __future__ import annotations

from pinecall_chat.settings import ChatSettings
from pinecall_servicekit.lifecycle import service_cli

cli = service_cli(
    "chat",
    about="The chat service: written calls (web chat, WhatsApp) run in the control plane.",
    app="pinecall_chat.app:create_app",
    settings=ChatSettings.from_env,
    check=ChatSettings.check,
    serves=(
        "Serve WS /v1/chat, POST /v1/chat/tokens, /healthz, /readyz and /metrics.\n\n"
        "Replicas are stateless: a session lives while its socket is served, and is rebuilt "
        "from the call's log by whichever replica the page dials next."
    ),
)
