"""``lab s3``: a real S3 server on loopback, the recordings' bucket (moto's server mode behind the
lab's faults, :mod:`pinecall_loadlab.vendors.s3`); and ``lab recordings``: what the lab checks of
recordings read from it (:mod:`pinecall_loadlab.vendors.recordings`), for ``up``'s report, which
imports nothing of the lab (issue 19, "In the lab and the main job")."""

from __future__ import annotations

from typing import IO

import click


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=0, type=click.IntRange(0, 65535), help="Port (0 picks a free one).")
@click.option(
    "--bucket",
    "buckets",
    multiple=True,
    default=("recordings",),
    show_default=True,
    help="A bucket made at the start (again for more).",
)
def s3(host: str, port: int, buckets: tuple[str, ...]) -> None:
    """Run moto's S3 server until SIGINT or SIGTERM.

    Any keys are taken (moto checks no signature), region us-east-1. Faults: POST /_lab/faults
    {"refuse": ["create" | "parts" | "complete", …], "status": 503}; GET /_lab/faults says them.
    """
    import signal
    import threading

    from pinecall_loadlab.vendors.s3 import S3Fake

    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    with S3Fake.started(host, port, buckets=buckets) as fake:
        click.echo(f"s3 fake listening on {fake.url}, buckets {', '.join(buckets) or '(none)'}")
        stop.wait()


@click.command()
@click.argument("asked", type=click.File("rb"), default="-")
def recordings(asked: IO[bytes]) -> None:
    """Measure recordings: read ASKED (JSON, default stdin) and print what each file holds.

    ASKED is a list of {"call", "url", "said": [line, …]}: where to read each recording (an
    HTTP URL: call-log's signed one) and the lab's recorded lines its caller said. Printed, a
    list in the same order of {"call", "bytes", "sha256", "channels", "seconds", "holds",
    "agent_voiced_s", "error"}: its size and SHA-256, its channels and length decoded,
    how much of the said lines' speech the caller's (left) channel holds (about 1.0 when it
    holds them; null when nothing was said), the agent's channel's voiced seconds, and what
    went wrong reading or decoding it (then the rest is null).
    """
    import hashlib

    import av
    import httpx
    import msgspec

    from pinecall_loadlab.vendors.recordings import decode, holds_lines, voiced_seconds

    class Asked(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
        call: str
        url: str
        said: list[str] = []

    try:
        wanted = msgspec.json.decode(asked.read(), type=list[Asked])
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise click.BadParameter(str(exc), param_hint="ASKED") from None
    out: list[dict[str, object]] = []
    with httpx.Client(timeout=30) as http:
        for one in wanted:
            found: dict[str, object] = {"call": one.call, "error": None}
            found |= dict.fromkeys(
                ("bytes", "sha256", "channels", "seconds", "holds", "agent_voiced_s")
            )
            try:
                answer = http.get(one.url)
                answer.raise_for_status()
                data = answer.content
                found |= {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
                decoded = decode(data)
                found |= {"channels": decoded.channels, "seconds": round(decoded.seconds, 3)}
                if decoded.channels >= 2:
                    caller, agent = decoded.samples[0], decoded.samples[1]
                    holds = holds_lines(caller, one.said) if one.said else None
                    found |= {
                        "holds": None if holds is None else round(holds, 3),
                        "agent_voiced_s": round(voiced_seconds(agent), 3),
                    }
            except (httpx.HTTPError, av.error.FFmpegError, KeyError, ValueError) as exc:
                found["error"] = repr(exc)[:300]
            out.append(found)
    click.echo(msgspec.json.encode(out).decode())
