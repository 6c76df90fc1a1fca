"""The chat service: written calls (seed 002, "A written call"; issue 17).

A written call is a call whose turns are written, not spoken: a web chat over ``WS /v1/chat`` or
a WhatsApp thread. It runs its agent (prompt, model, tools) exactly as a voice call does, in this
service's own process; a replica holds a call's *session* only while a socket or a thread is
served, and everything it needs again is on the call's log, so a restart ends the session, never
the call.

Layers: ``domain`` (pure rules: the chat token's claims, frames' bounds, the history from the
log's turns) ← ``conversation`` (the written-call engine: open or take up a call through
call-log, answer a message once per its id) and ``tokens`` (mint and verify chat tokens) ←
``socket`` (``WS /v1/chat``), ``api`` (``POST /v1/chat/tokens``) ← ``app`` (``/healthz``,
``/readyz``, ``/metrics``) ← ``main`` (``chat serve``). It owns no table: calls are call-log's.
"""
