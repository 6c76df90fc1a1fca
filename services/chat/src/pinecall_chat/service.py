"""One chat replica: its key ring (the app keys that mint chat tokens), its call-log clients (one
per environment, each with that environment's fleet key), the model, and the written calls'
engine (:class:`~pinecall_chat.conversation.Conversations`)."""

from __future__ import annotations

from dataclasses import dataclass

from pinecall_chat.conversation import Conversations
from pinecall_chat.settings import ChatSettings
from pinecall_servicekit.keys import KeyRing


@dataclass(slots=True)
class ChatService:
    settings: ChatSettings
    keyring: KeyRing
    conversations: Conversations
    sockets: int = 0
    """Sockets served now."""
    refused: int = 0
    """Dials and frames refused with a close code (nothing written)."""
