"""Client of the lab-room transport: join a LiveKit stand-in's room with a real access token and
exchange 16-bit PCM audio (48 kHz mono, 20 ms frames). `pinecall_labroom.agents` wires a
livekit-agents `AgentSession` to a lab room. Imports nothing of ``pinecall_loadlab``."""

from .client import (
    CHANNELS,
    FRAME_SAMPLES,
    SAMPLE_RATE,
    AudioChunk,
    JoinError,
    LabRoom,
    lab_url,
)

__all__ = [
    "CHANNELS",
    "FRAME_SAMPLES",
    "SAMPLE_RATE",
    "AudioChunk",
    "JoinError",
    "LabRoom",
    "lab_url",
]
