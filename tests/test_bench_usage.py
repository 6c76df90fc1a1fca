"""The benchmarks' numbers out of range are usage errors naming the option, before any rig
starts (``bench/benchkit.py``'s ``bounded``): a zero, a negative, NaN or an infinity once ran a
whole rig into a ``ZeroDivisionError`` or printed negative costs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"


@pytest.mark.parametrize(
    ("script", "option", "value"),
    [
        ("dispatch_floor.py", "--ops", "0"),
        ("dispatch_floor.py", "--ops", "-5"),
        ("dispatch_floor.py", "--twirps", "-3"),
        ("ring_to_offer.py", "--seconds", "0"),
        ("ring_to_offer.py", "--rate", "nan"),
        ("ring_to_offer.py", "--hold", "inf"),
        ("roster_heartbeats.py", "--workers", "0"),
        ("simulate_day.py", "--calls", "nan"),
        ("request_floor.py", "--rate", "inf"),
        ("link_fault.py", "--delay", "nan"),
        ("whatsapp_webhooks.py", "--profile", "nan"),
        ("http_client.py", "--ops", "0"),
        ("http_client.py", "--concurrency", "-1"),
    ],
)
def test_a_number_out_of_range_is_a_usage_error_naming_its_option(
    script: str, option: str, value: str
) -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH / script), f"{option}={value}"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert f"error: argument {option}: {value} is not in [" in done.stderr
    assert done.stdout == ""  # nothing ran


def test_no_benchmark_takes_a_bare_float() -> None:
    """``type=float`` takes NaN and the infinities (``simulate_day.py --calls nan`` ended in a
    traceback): every number option is ``bounded``."""
    bare = [
        f"{path.name}:{n}"
        for path in sorted(BENCH.glob("*.py"))
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if "type=float" in line
    ]
    assert bare == []
