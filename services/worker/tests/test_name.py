"""A worker's name is one the roster takes and can cordon (issue 14, item 8): a host part that
would make another is a settings error before the worker starts (exit 78), never a heartbeat the
roster lists and no cordon reaches."""

from __future__ import annotations

import asyncio
import os
import sys

import pytest

from pinecall_servicekit.lifecycle import ExitCode
from pinecall_servicekit.settings import SettingsError
from pinecall_worker.settings import WorkerSettings


def test_the_name_is_built_by_the_one_grammar() -> None:
    settings = WorkerSettings.from_env({}, worker_host="worker-a")
    assert settings.worker_name(1791067258) == "pinecall/worker-a.1791067258"


@pytest.mark.parametrize(
    ("host", "says"),
    [("w.1", "holds a '.'"), ("overflow", "the overflow's name"), ("w a", "A-Z a-z 0-9 _ -")],
)
def test_a_host_part_that_makes_no_name_is_a_settings_error(host: str, says: str) -> None:
    settings = WorkerSettings.from_env({}, worker_host=host)
    with pytest.raises(SettingsError, match=f"PINECALL_WORKER_HOST.*{says}"):
        settings.worker_name(1791067258)


async def test_worker_start_with_a_dotted_host_exits_78_and_says_why() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PINECALL_")} | {
        "PINECALL_WORKER_HOST": "w.1",
        "PINECALL_MAX_JOBS": "1",
    }
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "pinecall_runtime", "worker", "start",
        env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    async with asyncio.timeout(120):
        _, err = await proc.communicate()
    assert proc.returncode == ExitCode.CONFIG, err.decode()
    assert "error [settings]: PINECALL_FLEET='pinecall' and the worker part from " in err.decode()
    assert "PINECALL_WORKER_HOST make no worker name" in err.decode()
    assert "worker part 'w.1' holds a '.'" in err.decode()
