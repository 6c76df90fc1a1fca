"""An agent's tools as livekit-agents function tools whose body asks the app holding the agent,
shared by the worker's voice calls and the chat service's written calls (issue 17: a written call
runs its tools exactly as a voice call does),
through call-log's tool endpoint (issue 16, "The worker runs the call's agent"; seed 002, "The
gateway restarts": a tool call runs once per id).

Each tool is built from its raw JSON Schema (livekit-agents 1.8.9 ``function_tool(raw_schema=…)``,
``llm/tool_context.py``: the body gets the model's arguments as ``raw_arguments`` and the
``RunContext``). Its id on the log is the model's call id, so a retry of the request, on any
call-log replica, joins the one tool call. The body retries within the tool's own ``timeout_s``
(:meth:`~pinecall_clients.calllog.CallLogClient.tool`) and never waits longer: past it, or on an
error, it raises ``ToolError`` with a sentence the model can speak around (livekit-agents hands
the model the message as the tool's failed output), so the caller is never held in silence past
the tool's deadline.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Sequence
from typing import Any

import msgspec
from livekit.agents import RunContext, ToolError, function_tool
from livekit.agents.llm import RawFunctionTool

from pinecall_clients.calllog import CallLogClient
from pinecall_clients.errors import CallLogRefused, CallLogUnavailable
from pinecall_contracts.agents import AgentTool
from pinecall_contracts.calls import ToolCall

AppTool = RawFunctionTool[..., Coroutine[Any, Any, str]]
"""A tool the app answers, as the model is given it."""


async def ask_app(
    client: CallLogClient, call: str, tool: AgentTool, tool_id: str, arguments: dict[str, Any]
) -> str:
    """The app's answer to ``tool`` asked with ``arguments`` under ``tool_id``, as text for the
    model (a string as it is, anything else as JSON). ``ToolError`` when the app answered an
    error, nothing answered within ``tool.timeout_s``, or call-log refused the call."""
    asking = ToolCall(id=tool_id, name=tool.name, arguments=arguments, timeout_s=tool.timeout_s)
    late = ToolError(
        f"{tool.name} gave no answer within {tool.timeout_s:g} seconds. Tell the caller it "
        "cannot be done right now, and carry on with the call."
    )
    try:
        async with asyncio.timeout(tool.timeout_s):
            answer = await client.tool(call, asking)
    except (TimeoutError, CallLogUnavailable):
        raise late from None
    except CallLogRefused as exc:
        raise ToolError(f"{tool.name} could not be asked ({exc}). Carry on without it.") from None
    if answer.error == "timeout":
        raise late
    if answer.error is not None:
        raise ToolError(f"{tool.name} failed: {answer.error}")
    if isinstance(answer.result, str):
        return answer.result
    return msgspec.json.encode(answer.result).decode()


def app_tools(client: CallLogClient, call: str, tools: Sequence[AgentTool]) -> list[AppTool]:
    """``tools`` as function tools of ``call``, each answered by the app (:func:`ask_app`)."""
    return [_app_tool(client, call, tool) for tool in tools]


def _app_tool(client: CallLogClient, call: str, tool: AgentTool) -> AppTool:
    async def asked(raw_arguments: dict[str, Any], context: RunContext[Any]) -> str:
        return await ask_app(client, call, tool, context.function_call.call_id, raw_arguments)

    schema = {"name": tool.name, "description": tool.description, "parameters": tool.parameters}
    return function_tool(asked, raw_schema=schema)
