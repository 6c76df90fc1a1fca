"""The processes ``up`` and ``load`` start: the CLI itself for one-off verbs, services until ready."""

from __future__ import annotations

import subprocess
import sys

import click
import httpx
import stamina

from pinecall_servicekit.lifecycle import ExitCode


class StepFailed(click.ClickException):
    """A one-off ``pinecall-runtime`` verb (``migrate``, ``keys create``) that exited non-zero,
    said as ``pinecall-runtime migrate exited 69: <what it printed>``. Its exit code is the
    child's where that names a kind (69 a dependency unanswered, 78 the settings), else 1."""

    def __init__(self, args: tuple[str, ...], returncode: int, printed: str) -> None:
        said = printed.strip()[-2000:] or "(it printed nothing)"
        super().__init__(f"pinecall-runtime {' '.join(args)} exited {returncode}: {said}")
        kinds = (ExitCode.UNAVAILABLE, ExitCode.CONFIG)
        self.exit_code = returncode if returncode in kinds else ExitCode.FAILED  # type: ignore[misc]


def run_cli(*args: str, env: dict[str, str]) -> str:
    """``pinecall-runtime ARGS`` in a child process; its standard output, stripped.

    Raises :class:`StepFailed` (what the child printed on stderr, else stdout) when it exits
    non-zero.
    """
    out = subprocess.run(
        [sys.executable, "-m", "pinecall_runtime", *args],
        env=env, check=False, capture_output=True, text=True,
    )  # fmt: skip
    if out.returncode != 0:
        raise StepFailed(args, out.returncode, out.stderr or out.stdout)
    return out.stdout.strip()


def wait_ready(
    url: str, proc: subprocess.Popen[bytes], deadline_s: float = 60, *, path: str = "/readyz"
) -> None:
    """Return once ``url`` + ``path`` answers 200 (a server gives no other sign it listens);
    with ``path`` empty, once ``url`` answers at all (a lab server with no probe).

    Raises ``click.ClickException`` when the process exits first or ``deadline_s`` passes.
    """

    class NotReady(Exception):
        pass

    try:
        for attempt in stamina.retry_context(
            on=NotReady,
            attempts=None,
            timeout=deadline_s,
            wait_initial=0.1,
            wait_max=0.5,
            wait_jitter=0.0,
        ):
            with attempt:
                if proc.poll() is not None:
                    raise click.ClickException(f"{url}: the process exited with {proc.returncode}")
                try:
                    if httpx.get(f"{url}{path}", timeout=1).status_code == 200 or not path:
                        return
                except httpx.HTTPError:
                    pass
                raise NotReady(url)
    except NotReady as exc:
        raise click.ClickException(f"{url} was not ready in {deadline_s:.0f} s") from exc
