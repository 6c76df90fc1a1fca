"""``pinecall-runtime load``: bad options are usage errors before anything starts; the workers of
a step are shared out whole; small steps against real replicas verify every log."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from pinecall_runtime.load import load
from pinecall_runtime.loaddrive import plans, quantile, worker_calls
from pinecall_runtime.processes import StepFailed, run_cli
from pinecall_servicekit.dburl import with_database

PNG = b"\x89PNG\r\n\x1a\n"

# scheduled first (the testing plugin); 600 s, past `load`'s own 300 s (at pytest-timeout's
# 300 s, pyproject.toml, its thread method would end the xdist worker first: os._exit)
pytestmark = [pytest.mark.long, pytest.mark.timeout(600)]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--calls", "0"], "each number of calls is 1 to 20000"),
        (["--calls", "20001"], "each number of calls is 1 to 20000"),
        (["--calls", "100,,200"], "is not a number of calls"),
        (["--calls", "abc"], "is not a number of calls"),
        (["--calls", "100,-5"], "each number of calls is 1 to 20000"),
        (["--duration", "0"], "--duration"),
        (["--duration", "-1"], "--duration"),
        (["--batch-every", "0"], "--batch-every"),
        (["--seats", "0"], "--seats"),
        (["--drivers", "0"], "--drivers"),
        (["--drivers", "65"], "--drivers"),
        (["--replicas", "9"], "--replicas"),
        (["--ramp", "-1"], "--ramp"),
        (["--db-pool-size", "0"], "--db-pool-size"),
        (["--target-p99-ms", "0"], "--target-p99-ms"),
        (["--warmup", "-1"], "--warmup"),
        (["--calls", "10", "--no-such-option"], "No such option"),
    ],
)
def test_a_bad_option_is_a_usage_error_and_starts_nothing(args: list[str], says: str) -> None:
    # had load got past its options it would go on to a platform (an embedded one for this URL)
    env = {"PINECALL_DATABASE_URL": "postgresql://nobody@127.0.0.1:9/none"}
    result = CliRunner().invoke(load, args, env=env)
    assert result.exit_code == 2, result.output
    assert says in result.output


@given(
    calls=st.integers(1, 3000),
    seats=st.integers(1, 64),
    drivers=st.integers(1, 16),
    replicas=st.integers(1, 8),
)
def test_every_call_is_held_by_one_worker_and_every_worker_by_one_driver(
    calls: int, seats: int, drivers: int, replicas: int
) -> None:
    urls = [f"http://replica-{r}" for r in range(replicas)]
    shared = plans(
        urls, "k", calls=calls, seats=seats, drivers=drivers, duration_s=1.0, every_s=1.0,
        per_entry=False, ramp_s=0.0,
    )  # fmt: skip
    workers = sorted(w for plan in shared for w in plan.workers)
    held = sorted(i for plan in shared for w in plan.workers for i in worker_calls(plan, w))
    assert held == list(range(calls))
    assert workers == list(range(len(workers)))
    assert all(len(worker_calls(shared[0], w)) <= seats for w in workers)
    assert len(shared) == min(drivers, len(workers))
    assert all(plan.workers for plan in shared)


def test_quantile_is_the_nearest_rank() -> None:
    assert quantile([], 0.99) == 0.0
    assert quantile([3.0, 1.0, 2.0], 0.5) == 2.0
    assert quantile([float(v) for v in range(100)], 0.99) == 99.0
    assert quantile([float(v) for v in range(1000)], 0.99) == 990.0


def test_small_steps_drive_real_replicas_and_verify_every_log(
    database_url: str, nats_url: str, tmp_path: Path
) -> None:
    """And ``--plot`` draws the steps (issue 22, acceptance 6)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PINECALL_")}
    env |= {"PINECALL_DATABASE_URL": database_url, "PINECALL_NATS_URL": nats_url}
    args = ["--calls", "3,5", "--duration", "1.5", "--replicas", "1", "--seats", "2"]
    args += ["--drivers", "2", "--ramp", "0.2", "--warmup", "0.5", "--target-p99-ms", "60000"]
    args += ["--plot", str(tmp_path / "load.png")]
    done = subprocess.run(
        [sys.executable, "-m", "pinecall_runtime", "load", *args, "--json"],
        env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)  # --json: the report and nothing else on stdout
    steps = report["steps"]
    assert [s["calls"] for s in steps] == [3, 5]
    assert [s["drivers"] for s in steps] == [2, 2]  # 2 and 3 workers of 2 seats
    assert all(s["verified"] and s["problems"] == [] for s in steps), steps
    # every call opened, wrote at least one batch, and sealed
    assert all(s["requests"] >= 3 * s["calls"] for s in steps)
    assert all(s["entries"] >= s["calls"] for s in steps)
    assert report["held"] == 5
    # each simulated worker's batches went through its relay: no more requests than batches
    assert all(s["mode"].endswith("a worker's together") for s in steps)
    assert all(s["batch_requests"] >= 1 and s["batches_a_request"] >= 1.0 for s in steps)
    assert (tmp_path / "load.png").read_bytes().startswith(PNG)


def test_a_run_on_the_unix_socket_url_the_embedded_postgres_hands_out_verifies_its_logs(
    socket_database_url: str, nats_url: str
) -> None:
    # the rig makes a database of its own beside this one: it must keep the socket folder
    env = {k: v for k, v in os.environ.items() if not k.startswith("PINECALL_")}
    env |= {"PINECALL_DATABASE_URL": socket_database_url, "PINECALL_NATS_URL": nats_url}
    args = ["--calls", "2", "--duration", "1.5", "--replicas", "1", "--seats", "2"]
    args += ["--ramp", "0", "--warmup", "0", "--target-p99-ms", "60000", "--json", "--alone"]
    done = subprocess.run(
        [sys.executable, "-m", "pinecall_runtime", "load", *args],
        env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    (step,) = json.loads(done.stdout)["steps"]
    assert step["verified"]
    # --alone: the wire before the relay, each batch a request of its own
    assert step["mode"].endswith("each alone")
    assert step["batch_requests"] >= 2
    assert step["batches_a_request"] == 1.0


def test_a_step_that_fails_says_what_its_process_printed(database_url: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PINECALL_")}
    env["PINECALL_DATABASE_URL"] = with_database(database_url, "no_such_database_here")
    with pytest.raises(StepFailed) as failed:
        run_cli("migrate", env=env)
    said = failed.value.format_message()
    assert said.startswith("pinecall-runtime migrate exited 69: ")
    assert "no_such_database_here" in said
    assert "Traceback" not in said
    assert failed.value.exit_code == 69
