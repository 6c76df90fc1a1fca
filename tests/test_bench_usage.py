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
