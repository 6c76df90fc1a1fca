"""The Graph API's messages endpoint, as the chat service sends a thread's replies through it.

``POST {graph_url}/{version}/{phone_number_id}/messages`` with the number's access token
(``Authorization: Bearer``) and ``{"messaging_product": "whatsapp", "recipient_type":
"individual", "to", "type": "text", "text": {"body"}}``; a 200 names the message's ``wamid``
(``messages[0].id``). A refusal is Graph's ``{"error": {"code", "message", …}}``
(``shared/reference/app-socket.md`` §2): 131047 the window closed, 131056 the pair rate, 190 the
token. Sends to one contact are paced :data:`~pinecall_chat.whatsapp_wire.PAIR_INTERVAL_S` apart
(:func:`~pinecall_chat.whatsapp_wire.send_at`), so a backlog answered at once keeps Meta's pace;
a 131056 all the same is waited out once and tried again.

Errors: :class:`GraphRefused` (Graph's code and message); :class:`GraphUnavailable` (no answer,
or a 5xx, after the retries).
"""

from __future__ import annotations

import asyncio
import time

import httpx
import msgspec
import stamina

from pinecall_chat.whatsapp_wire import send_at
from pinecall_clients.tls import TLS

PAIR_RATE = 131056


class GraphRefused(Exception):
    def __init__(self, status: int, code: int | None, message: str) -> None:
        super().__init__(f"Graph {status} ({code}): {message}")
        self.status, self.code, self.message = status, code, message


class GraphUnavailable(Exception):
    """Graph did not answer, or answered 5xx, within the retries."""


class _Error(msgspec.Struct, frozen=True):
    code: int | None = None
    message: str = ""


class _Refusal(msgspec.Struct, frozen=True):
    error: _Error = msgspec.field(default_factory=_Error)


class _Id(msgspec.Struct, frozen=True):
    id: str


class _Sent(msgspec.Struct, frozen=True):
    messages: list[_Id]


class _Retry(Exception):
    pass


class Graph:
    """Sends text; one instance per replica (its pace is per number and contact)."""

    def __init__(
        self, base_url: str, version: str, pair_interval_s: float, timeout_s: float = 10.0
    ) -> None:
        self.http = httpx.AsyncClient(base_url=base_url, timeout=timeout_s, verify=TLS)
        self.version = version
        self.pair_interval_s = pair_interval_s
        self._last: dict[tuple[str, str], float] = {}
        self._locks: dict[tuple[str, str], asyncio.Lock] = {}

    async def aclose(self) -> None:
        await self.http.aclose()

    async def send_text(self, number: str, token: str, to: str, text: str) -> str:
        """Send ``text`` to ``to`` from ``number``, paced; returns its wamid."""
        key = (number, to)
        async with self._locks.setdefault(key, asyncio.Lock()):
            for attempt in range(2):
                wait = send_at(self._last.get(key), time.monotonic(), self.pair_interval_s)
                await asyncio.sleep(max(0.0, wait - time.monotonic()))  # Meta's pace
                try:
                    return await self._post(number, token, to, text)
                except GraphRefused as exc:  # a 131056 waits a whole interval, then once more
                    if exc.code != PAIR_RATE or attempt:
                        raise
            raise AssertionError("unreachable")

    async def _post(self, number: str, token: str, to: str, text: str) -> str:
        body = {"messaging_product": "whatsapp", "recipient_type": "individual", "to": to,
                "type": "text", "text": {"body": text}}  # fmt: skip
        path = f"/{self.version}/{number}/messages"
        headers = {"Authorization": f"Bearer {token}"}
        try:
            async for attempt in stamina.retry_context(
                on=(_Retry, httpx.TransportError), attempts=4, wait_initial=0.2, wait_max=2.0
            ):
                with attempt:
                    response = await self.http.post(path, json=body, headers=headers)
                    if response.status_code >= 500:
                        raise _Retry(response.status_code)
        except (_Retry, httpx.TransportError) as exc:
            raise GraphUnavailable(f"Graph did not take a message to {to}: {exc!r}") from exc
        self._last[(number, to)] = time.monotonic()
        if response.status_code != 200:
            try:
                said = msgspec.json.decode(response.content, type=_Refusal).error
            except msgspec.MsgspecError:
                said = _Error(message=response.text[:200])
            raise GraphRefused(response.status_code, said.code, said.message)
        return msgspec.json.decode(response.content, type=_Sent).messages[0].id
