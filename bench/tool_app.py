"""The app ``tool_roundtrip.py`` runs (``pinecall start tool_app:app --app-dir bench``): it holds
the agent ``bench`` and answers its tool ``echo`` at once with the arguments it was given, so the
round trip measured is the runtime's and the SDK's, not a handler's.

Its URL, key and org come from the benchmark (``TOOL_APP_URL``, ``TOOL_APP_KEY``,
``TOOL_APP_ORG``); the agent's definition is sent as ``call.setup`` (``TOOL_APP_AGENT``, JSON)."""

from __future__ import annotations

import json
import os
from typing import Any

import pinecall

app = pinecall.App(
    os.environ["TOOL_APP_URL"],
    os.environ["TOOL_APP_KEY"],
    org=os.environ["TOOL_APP_ORG"],
    instance="bench-app",
)
agent = app.agent("bench", definition=json.loads(os.environ["TOOL_APP_AGENT"]))


@agent.tool("echo")
async def echo(arguments: dict[str, Any], context: pinecall.ToolContext) -> Any:
    return {"echo": arguments}
