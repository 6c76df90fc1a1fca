"""No secret in any log of a run (issue 21, acceptance 5): every secret ``up`` minted or handed a
process, looked for in every log and trace the run wrote.

What counts as a secret: the run's keys (operator, service, fleet, app; their secret part alone
too, since a key's id before it is public), each LiveKit's API secret, and every value of a
process's environment under a secret's name (``*SECRET*``, ``*PASSWORD*``, ``*TOKEN*``,
``*_KEY``, ``*_KEYS``: the app and chat token secrets, the S3 secret, the apps' keys) or a
password in a URL there (Postgres's, NATS's). A value shorter than :data:`SHORTEST` characters is
a stand-in's constant (the lab bucket's secret is ``lab``) that ordinary words would match: it is
left out, and counted as such.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from pinecall_runtime.up.stage import Run
from pinecall_runtime.up.supervise import Supervised
from pinecall_servicekit.keys import KEY_PATTERN

SHORTEST = 12
"""The shortest value looked for, in characters (a minted secret is 32 or more)."""
SECRET_NAME = re.compile(r"SECRET|PASSWORD|TOKEN|_KEYS?$")
"""An environment variable whose value is a secret (``LIVEKIT_API_KEY``'s key is public, but
looking for it costs nothing)."""


@dataclass(kw_only=True)
class Scan:
    """What :func:`scan` looked for and found: ``leaks`` are ``<file>:<line>: <what>``."""

    looked_for: int
    files: int
    too_short: int
    leaks: list[str] = field(default_factory=list)

    def line(self) -> str:
        """The terminal's line of it."""
        if self.leaks:
            return f"secrets: {len(self.leaks)} found in the logs: " + "; ".join(self.leaks[:5])
        return (
            f"secrets: none of {self.looked_for} in {self.files} logs"
            f" ({self.too_short} stand-in constants under {SHORTEST} characters not looked for)"
        )


def _url_passwords(value: str) -> Iterator[str]:
    for one in value.split(","):
        if "://" in one:
            try:
                password = urlsplit(one.strip()).password
            except ValueError:
                continue
            if password:
                yield password


def minted(run: Run, processes: Iterable[Supervised]) -> dict[str, str]:
    """Every secret of the run, by what it is (``operator key``, ``call-log-1
    PINECALL_LOG_TOKEN_SECRET``, ``nats password``, …) to its value."""
    found: dict[str, str] = {}
    keys = {"operator": run.operator_key, "service": run.service_key}
    keys |= {f"fleet-{e}": k for e, k in run.fleet_keys.items()}
    keys |= {f"app-{e}": k for e, k in run.app_keys.items()}
    for name, key in keys.items():
        found[f"{name} key"] = key
        match = KEY_PATTERN.match(key)
        if match:
            found[f"{name} key's secret"] = match[2]
    for environment, (_, secret) in run.livekit_keys.items():
        found[f"LiveKit {environment}'s API secret"] = secret
    for process in processes:
        for name, value in process.env.items():
            if os.environ.get(name) == value:
                continue  # the shell's own, not up's to hand out
            if SECRET_NAME.search(name) and not name.endswith("_URL"):
                found[f"{process.name} {name}"] = value
            for password in _url_passwords(value):
                found[f"{process.name} {name}'s password"] = password
    return {what: value for what, value in found.items() if value}


def scan(files: Iterable[Path], secrets: dict[str, str]) -> Scan:
    """Look for every value of ``secrets`` in ``files`` (each read as UTF-8, undecodable bytes
    replaced), line by line."""
    wanted: dict[str, str] = {}
    short = set()
    for what, value in secrets.items():
        if len(value) < SHORTEST:
            short.add(value)
        else:
            wanted.setdefault(value, what)
    result = Scan(looked_for=len(wanted), files=0, too_short=len(short))
    # longest first: a key's whole token is named before its secret part inside it
    anything = re.compile("|".join(re.escape(v) for v in sorted(wanted, key=len, reverse=True)))
    for path in files:
        if not path.is_file():
            continue
        result.files += 1
        with path.open(encoding="utf-8", errors="replace") as text:
            for number, line in enumerate(text, 1):
                for match in anything.finditer(line) if wanted else ():
                    result.leaks.append(f"{path.name}:{number}: {wanted[match[0]]}")
    return result
