"""A WhatsApp thread under ``up`` (the fresh user's first defect): ``up`` runs Meta's WhatsApp
Cloud API fake and points the chat replicas' Graph URL at it, so a contact who writes is
answered through the fake; and Ctrl-C with the thread still open stops ``up`` at once, exit 0,
the thread named as left open (only the reaper ends a thread, quiet 2 h), never as a call
"never sealed"."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import pytest
import stamina

from pinecall_servicekit.platform import Endpoints
from pinecall_testkit.up import platform_env

pytestmark = [pytest.mark.long, pytest.mark.timeout(600)]  # a whole platform up and down

NUMBER = "106540352242922"
"""The fake's business number (``WhatsAppConfig.numbers``), +1 555 078 3881."""
CONTACT = "34600111222"


class NotYet(Exception):
    """The contact has no reply yet."""


def test_a_thread_under_up_is_answered_through_the_fake_and_ctrl_c_leaves_it_open(
    tmp_path: Path, platform_endpoints: Endpoints
) -> None:
    state, report = tmp_path / "state", tmp_path / "report.json"
    env = platform_env(platform_endpoints) | {"PINECALL_STATE_DIR": str(state)}
    with (tmp_path / "stderr").open("w") as stderr:
        up = subprocess.Popen(
            [sys.executable, "-m", "pinecall_runtime", "up", "--calls", "0", "--every", "2",
             "--report", str(report)],
            env=env, stdout=subprocess.PIPE, stderr=stderr, text=True,
        )  # fmt: skip
    try:
        assert up.stdout is not None
        said = []
        for line in up.stdout:  # its own word that it is ready, then up.json says where
            said.append(line)
            if line.startswith("up: ready"):
                break
        else:
            pytest.fail(f"up exited before it was ready: {''.join(said)[-3000:]}")
        # the table goes on every 2 s: read, so that up never blocks on a full pipe
        reading = threading.Thread(target=lambda: said.extend(up.stdout or ()), daemon=True)
        reading.start()
        urls = json.loads((state / "up.json").read_text())["urls"]
        keys = json.loads((state / "keys.json").read_text())
        assert "whatsapp" in urls, urls
        with httpx.Client(timeout=10) as http:
            put = http.put(
                f"{urls['call-log']}/v1/whatsapp/numbers/{NUMBER}?org=org_up",
                json={"agent": "booking", "display_phone_number": "15550783881",
                      "verify_token": "lab-verify-token", "app_secret": "lab-app-secret",
                      "access_token": "lab-access-token"},
                headers={"Authorization": f"Bearer {keys['app-production']}"},
            )  # fmt: skip
            assert put.status_code == 200, put.text
            wrote = http.post(
                f"{urls['whatsapp']}/lab/whatsapp/contacts/{CONTACT}/messages",
                json={"text": "Do you have a table tonight?", "number": NUMBER},
            )
            assert wrote.status_code == 200, wrote.text
            # the reply reaches the fake only if the chat replicas' Graph URL is the fake's
            for attempt in stamina.retry_context(on=NotYet, attempts=None, timeout=120,
                                                 wait_initial=0.2, wait_max=1.0):  # fmt: skip
                with attempt:
                    received = http.get(
                        f"{urls['whatsapp']}/lab/whatsapp/contacts/{CONTACT}/messages"
                    ).json()["received"]
                    if not received:
                        raise NotYet
        up.send_signal(signal.SIGINT)
        up.wait(timeout=240)
        reading.join()
        out = "".join(said)
    finally:
        if up.poll() is None:
            up.kill()
            up.wait()
        if up.stdout is not None:
            up.stdout.close()  # else collected in a later test: an unclosed-file warning there
    errors = (tmp_path / "stderr").read_text()
    assert up.returncode == 0, f"{out[-3000:]}\n{errors[-3000:]}"
    result = json.loads(report.read_text())
    assert result["problems"] == []
    [thread] = result["written"]["threads_open"]
    assert thread.startswith(f"wa:{NUMBER}:{CONTACT}:")
    assert "1 WhatsApp threads left open" in errors
    assert "to be sealed" not in errors  # nothing waited for
