"""What the vendor fakes do: their latencies, pacing and the faults they inject.

A `VendorsConfig` holds one `VendorConfig` per vendor (``deepgram``, ``anthropic``,
``cartesia``). It is plain data (frozen msgspec Structs), read from a JSON or TOML file by
`load_config`, or built by `pinecall-runtime lab vendors` from its flags.

Faults are a plan, consumed in order: each new *attempt* against a vendor — a WebSocket
handshake (Deepgram, Cartesia), an HTTP request (Anthropic, Cartesia's bytes endpoint) or a new
synthesis context on a Cartesia socket — takes the next `Fault` of that vendor's list, and runs
clean once the list is spent. So ``[Fault("status", 503), Fault("status", 503)]`` fails two
attempts and lets the third through, which is how a test sees the plugin's retries run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import msgspec

DEFAULT_PORT = 7890
"""Where `pinecall-runtime lab vendors` and `VendorsConfig` listen unless told otherwise."""

Seconds = Annotated[float, msgspec.Meta(ge=0)]
Positive = Annotated[float, msgspec.Meta(gt=0)]

FaultKind = Literal["status", "stall", "drop", "malformed", "error_event"]
"""- ``status``: refuse the attempt with HTTP `status` (5xx, 429 with ``retry-after``, 401…);
- ``stall``: accept, then say nothing more until the client gives up (or the fake stops);
- ``drop``: accept, send `after` results/chunks, then cut the TCP connection with no goodbye;
- ``malformed``: accept, send `after` results/chunks, then a message that is not the vendor's
  JSON, then carry on as if nothing happened;
- ``error_event``: the vendor's in-stream error message (Anthropic's ``event: error``
  overloaded_error, Cartesia's ``{"type": "error", "done": true}``); Deepgram has none and
  treats it as ``drop``."""


class Fault(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One injected failure, applied to one attempt."""

    kind: FaultKind
    status: Annotated[int, msgspec.Meta(ge=100, le=599)] = 503
    """HTTP status for ``status`` (and the status said in an ``error_event``)."""
    after: Annotated[int, msgspec.Meta(ge=0)] = 0
    """Results (Deepgram), text deltas (Anthropic) or audio chunks (Cartesia) sent before a
    ``drop`` or ``malformed``."""


class VendorConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One vendor's timing and faults. Seconds throughout."""

    first_s: Seconds = 0.0
    """Time to first result / token / byte: Deepgram's delay from the end of an utterance to its
    final transcript, Anthropic's from the request to the first text delta, Cartesia's from a
    transcript to its first audio chunk."""
    chunk_s: Seconds = 0.0
    """Pacing between later chunks (Anthropic deltas, Cartesia audio chunks)."""
    faults: tuple[Fault, ...] = ()


class DeepgramConfig(VendorConfig, frozen=True, kw_only=True):
    """The speech-to-text fake's ear: how it finds utterances in the audio it receives."""

    first_s: Seconds = 0.15
    interim_every_s: Seconds = 0.5
    """An interim result at most this often while an utterance goes on."""
    silence_s: Seconds = 0.4
    """Quiet for this long ends an utterance (Deepgram's own endpointer; the plugin's
    ``endpointing`` is the floor)."""
    threshold_dbfs: float = -40.0
    """A 10 ms window louder than this (RMS, dB full scale) is speech."""


class AnthropicConfig(VendorConfig, frozen=True, kw_only=True):
    first_s: Seconds = 0.35
    chunk_s: Seconds = 0.03
    tool_share: Annotated[float, msgspec.Meta(ge=0, le=1)] = 0.0
    """The share of turns (a caller spoke, no reply scripted) offering a tool that takes
    arguments on which the model asks one, spread evenly from the first
    (``pinecall_loadlab.vendors.turns``); 0: never."""


class CartesiaConfig(VendorConfig, frozen=True, kw_only=True):
    first_s: Seconds = 0.1
    chunk_s: Seconds = 0.02
    chunk_audio_s: Positive = 0.1
    """Audio per chunk message."""
    chars_per_s: Positive = 15.0
    """Speaking rate: a transcript of n characters lasts n / chars_per_s seconds (≈ 150 words a
    minute)."""
    max_chars: Annotated[int, msgspec.Meta(ge=1)] = 5000
    """The longest transcript one context (or one ``/tts/bytes`` request) may carry; longer is
    a 400, as a bad request to Cartesia is (5000 characters ≈ 5½ minutes of speech)."""


class VendorsConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Every fake, on one loopback server. A key it does not know is an error (a typo would
    otherwise be ignored silently)."""

    host: str = "127.0.0.1"
    port: Annotated[int, msgspec.Meta(ge=0, le=65535)] = DEFAULT_PORT
    """0 picks a free port (tests)."""
    deepgram: DeepgramConfig = msgspec.field(default_factory=DeepgramConfig)
    anthropic: AnthropicConfig = msgspec.field(default_factory=AnthropicConfig)
    cartesia: CartesiaConfig = msgspec.field(default_factory=CartesiaConfig)


def load_config(path: Path) -> VendorsConfig:
    """Read a ``.json`` or ``.toml`` file shaped like `VendorsConfig`;
    `msgspec.ValidationError` names the bad or unknown field, `msgspec.DecodeError` says where
    the file is not JSON or TOML."""
    data = path.read_bytes()
    if path.suffix == ".toml":
        return msgspec.toml.decode(data, type=VendorsConfig)
    return msgspec.json.decode(data, type=VendorsConfig)
