"""What a stamina retry logs: one line that says what is retried, the attempt, the cause and the
wait. stamina's own logging hook says only ``stamina.retry_scheduled``, its details in fields that
a text log drops, and a ``retry_context`` block is named ``<context block>``. Light on purpose (no
OpenTelemetry): a worker's job process installs it too (``pinecall_worker.settings.JobSetup``).
"""

from __future__ import annotations

import logging

from stamina.instrumentation import PrometheusOnRetryHook, RetryDetails, set_on_retry_hooks

_RECORD = frozenset(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {"message"}
"""The names a log record has of itself: an ``extra`` may not take them."""

_retries = logging.getLogger("stamina")

POLL = "waiting for "
"""How a poll's name starts (``retry_context(...).with_name("waiting for X: GET", ...)``): each
look that finds X not there yet is no fault, so its line is DEBUG, not WARNING."""


def said_retry(details: RetryDetails) -> None:
    """stamina's retry hook: one WARNING (DEBUG for a :data:`POLL`) on the ``stamina`` logger
    that names what failed, the attempt, the cause, the next attempt's wait and the wait so far,
    e.g.
    ``call-log POST /v1/calls/call_1/seal (call=call_1): attempt 1 failed (ConnectError(...));
    attempt 2 in 0.52 s, 0.00 s waited so far``. What is retried is the retry's name and
    arguments: a function's own for ``stamina.retry``; a ``retry_context`` block is nameless
    unless its iterator is given one (``retry_context(...).with_name(name, args, kwargs)``).
    The same facts go as fields for the JSON log (``retried``, ``attempt``, ``wait_s``,
    ``waited_s``, ``cause``, and each keyword argument a log record's own names leave free)."""
    given = [repr(a) for a in details.args] + [f"{k}={v}" for k, v in details.kwargs.items()]
    what = details.name + (f" ({', '.join(given)})" if given else "")
    _retries.log(
        logging.DEBUG if details.name.startswith(POLL) else logging.WARNING,
        "%s: attempt %d failed (%r); attempt %d in %.2f s, %.2f s waited so far",
        what,
        details.retry_num,
        details.caused_by,
        details.retry_num + 1,
        details.wait_for,
        details.waited_so_far,
        extra={
            "retried": details.name,
            "attempt": details.retry_num,
            "wait_s": round(details.wait_for, 2),
            "waited_s": round(details.waited_so_far, 2),
            "cause": repr(details.caused_by),
            **{k: str(v) for k, v in details.kwargs.items() if k not in _RECORD},
        },
    )


def say_retries() -> None:
    """Make this process's stamina retries log through :func:`said_retry` (and count on
    stamina's Prometheus counter, as by default). Per process: a forked or spawned child (a
    worker's job process) calls it again."""
    set_on_retry_hooks([PrometheusOnRetryHook, said_retry])
