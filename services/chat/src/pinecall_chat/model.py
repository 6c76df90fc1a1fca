"""The written calls' model: livekit-agents' Anthropic plugin, at this service's base URL (the
lab's fake under ``up``), one client for the process (a written call's turn is one request).

A reply is streamed: each text delta as the model makes it, then the tool calls it asked (as
``FunctionCall`` items, ready for the chat context).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from anthropic import AsyncAnthropic, DefaultAsyncHttpxClient
from livekit.agents.llm import ChatContext, FunctionCall
from livekit.plugins import anthropic

from pinecall_chat.conversation import ChatAgent
from pinecall_clients.tls import TLS
from pinecall_jobs.tools import AppTool


class AnthropicModel:
    """:class:`pinecall_chat.conversation.Model` on livekit-plugins-anthropic."""

    def __init__(self, *, base_url: str | None, api_key: str | None) -> None:
        self.api_key = api_key or "unset"
        self.client = AsyncAnthropic(
            api_key=self.api_key,
            base_url=base_url,
            max_retries=0,
            timeout=30.0,
            # the process's one TLS context: httpx builds one a client otherwise, on the loop
            http_client=DefaultAsyncHttpxClient(verify=TLS, timeout=30.0),
        )
        self._llms: dict[str, anthropic.LLM] = {}

    def _llm(self, model: str) -> anthropic.LLM:
        if model not in self._llms:
            # the key given too: the plugin refuses to start without one (its own env read)
            self._llms[model] = anthropic.LLM(model=model, client=self.client, api_key=self.api_key)
        return self._llms[model]

    async def stream(
        self, agent: ChatAgent, context: ChatContext, tools: list[AppTool]
    ) -> AsyncIterator[str | FunctionCall]:
        async with self._llm(agent.model).chat(chat_ctx=context, tools=list(tools)) as stream:
            async for chunk in stream:
                if chunk.delta is None:
                    continue
                if chunk.delta.content:
                    yield chunk.delta.content
                for asked in chunk.delta.tool_calls:
                    yield FunctionCall(
                        call_id=asked.call_id, name=asked.name, arguments=asked.arguments
                    )

    async def aclose(self) -> None:
        await self.client.close()
