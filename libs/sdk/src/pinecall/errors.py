"""What the SDK raises: one small tree, each error with a ``code`` and whether trying again can
help (``retryable``).

::

    PinecallError
    ├── BadURL              the URL is no app socket (its scheme, its host, an HTTP answer)
    ├── Refused             the server closed the socket with a code that a reconnect would get
    │   │                   again (``pinecall_contracts.appsocket.Close``): ``App.run`` raises it
    │   ├── BadKey              4001: no app key, one that is not good, or a key of another kind
    │   ├── NoCommonVersion     4002: the server speaks no version of ``pinecall.app.v1`` we do
    │   ├── AgentOutOfScope     4003: the org defines no such agent in the key's environment
    │   ├── Replaced            4009: another process connected saying this app's ``instance``
    │   └── ProtocolError       4000: a frame out of order (a defect of this SDK)
    └── CommandError        a ``call.command`` (say, end) not done
        ├── CommandRefused      the server answered ``error`` (``code``: not_held, conflict, …)
        └── CommandTimeout      no answer within the command's ``timeout_s``

A tool handler raises :class:`ToolError` to answer the model with its message; it is not a
``PinecallError`` (nothing failed in the SDK).
"""

from __future__ import annotations

from pinecall_contracts.appsocket import Close


class PinecallError(Exception):
    """Every error the SDK raises."""

    code = "pinecall"
    retryable = False

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class BadURL(PinecallError):
    """The URL cannot be an app socket: not ``ws(s)://`` or ``http(s)://``, no host, or the
    server there answered the upgrade with an HTTP status (404: no app socket at that path)."""

    code = "bad_url"


class Refused(PinecallError):
    """The server closed the socket with ``close_code``, which a reconnect would get again."""

    code = "refused"
    close_code: int = 0

    def __init__(self, message: str, close_code: int | None = None) -> None:
        super().__init__(message)
        if close_code is not None:
            self.close_code = close_code


class BadKey(Refused):
    """Close 4001: the app key is missing, not good, or of another kind (a fleet key)."""

    code = "bad_key"
    close_code = Close.BAD_KEY


class NoCommonVersion(Refused):
    """Close 4002: the server speaks none of this SDK's versions of ``pinecall.app.v1``."""

    code = "no_common_version"
    close_code = Close.NO_COMMON_VERSION


class AgentOutOfScope(Refused):
    """Close 4003: an agent the org does not define in the key's environment (``agents put``
    it first)."""

    code = "agent_out_of_scope"
    close_code = Close.AGENT_OUT_OF_SCOPE


class Replaced(Refused):
    """Close 4009: another process connected with this app's ``instance`` id (two processes must
    not share one: each would replace the other)."""

    code = "replaced"
    close_code = Close.REPLACED


class ProtocolError(Refused):
    """Close 4000: the server read a frame out of order (a defect of this SDK: report it)."""

    code = "protocol"
    close_code = Close.PROTOCOL


REFUSED: dict[int, type[Refused]] = {
    kind.close_code: kind
    for kind in (BadKey, NoCommonVersion, AgentOutOfScope, Replaced, ProtocolError)
}
"""The close codes the app does not reconnect after, and what ``App.run`` raises for each."""


class CommandError(PinecallError):
    """A ``call.command`` (``say``, ``end``) not done."""

    code = "command"


class CommandRefused(CommandError):
    """The server answered the command with an ``error`` frame: ``code`` is the frame's
    (``not_held``: this app does not hold the call; ``conflict``: the call is over, or the id was
    used for another command; ``invalid``: the text is missing or cannot be kept)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class CommandTimeout(CommandError):
    """No acknowledgement within the command's ``timeout_s``: the socket was down, or the call
    went to another app process. Sending it again with the same ``id`` is safe."""

    code = "command_timeout"
    retryable = True


class ToolError(Exception):
    """Raised by a tool handler: the model is answered with this message as the tool's error,
    a sentence it can speak around (at most 2000 characters)."""
