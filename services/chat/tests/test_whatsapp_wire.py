"""The WhatsApp rules as pure functions: the signature over the raw bytes, a thread's call id,
the 24-hour window, the pair rate's pace, Meta's body read (``shared/reference/app-socket.md``
§2)."""

from __future__ import annotations

import hashlib
import hmac
import json

import msgspec
import pytest

from pinecall_chat.whatsapp_wire import parse, send_at, signed, thread_call, window_open

BODY = json.dumps({"object": "whatsapp_business_account", "entry": [{"id": "1", "changes": [
    {"field": "messages", "value": {"messaging_product": "whatsapp",
     "metadata": {"display_phone_number": "15550783881", "phone_number_id": "106"},
     "contacts": [{"profile": {"name": "Ana"}, "wa_id": "346"}],
     "messages": [{"from": "346", "id": "wamid.A", "timestamp": "1700000000", "type": "text",
                   "text": {"body": "¿Mesa? 🍷"}, "future_field": 1}]}}]}]},
    ensure_ascii=False).encode()  # fmt: skip


def _sig(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def test_the_signature_is_over_the_raw_bytes() -> None:
    assert signed("s3cret", BODY, _sig("s3cret", BODY))
    assert signed("s3cret", BODY, _sig("s3cret", BODY).upper().replace("SHA256=", "sha256="))
    reserialised = json.dumps(json.loads(BODY)).encode()  # \\u escapes: other bytes
    assert not signed("s3cret", reserialised, _sig("s3cret", BODY))
    assert not signed("other", BODY, _sig("s3cret", BODY))
    for header in (None, "", _sig("s3cret", BODY).removeprefix("sha256="), "sha1=abc"):
        assert not signed("s3cret", BODY, header)


def test_a_body_is_read_with_its_numbers_and_fields_meta_adds_ignored() -> None:
    notification = parse(BODY)
    assert notification.numbers() == ["106"]
    [message] = notification.entry[0].changes[0].value.messages
    assert (message.from_, message.id, message.text and message.text.body) == (
        "346", "wamid.A", "¿Mesa? 🍷",
    )  # fmt: skip
    for bad in (b"[]", b'{"object": "page", "entry": []}', b"{", b'{"object": "x"}'):
        with pytest.raises(msgspec.MsgspecError):
            parse(bad)


def test_a_threads_call_id_is_a_call_id() -> None:
    import re

    from pinecall_contracts.calls import CallIdField  # the grammar calls are held to

    call = thread_call("106540352242922", "34600111222", 3)
    assert call == "wa:106540352242922:34600111222:3"
    pattern = CallIdField.__metadata__[0].pattern  # type: ignore[attr-defined]
    assert re.match(pattern, thread_call("9" * 32, "9" * 20, 10**6))
    assert re.match(pattern, call)


def test_the_window_and_the_pace() -> None:
    assert window_open(1000.0, 1000.0 + 86_400, 86_400)
    assert not window_open(1000.0, 1000.0 + 86_400.5, 86_400)
    assert send_at(None, 50.0, 6.0) == 50.0
    assert send_at(48.0, 50.0, 6.0) == 54.0
    assert send_at(40.0, 50.0, 6.0) == 50.0
