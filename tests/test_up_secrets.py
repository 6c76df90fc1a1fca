"""``up``'s scan of its logs for every secret it minted (issue 21, acceptance 5): found where a
log holds one, named by what it is and where, never by its value."""

from __future__ import annotations

from pathlib import Path

from pinecall_runtime.up.secretscan import SHORTEST, minted, scan
from pinecall_runtime.up.stage import Run
from pinecall_runtime.up.supervise import Supervised

OPERATOR = "pck_0123456789ab_" + "o" * 43
FLEET = "pck_ba9876543210_" + "f" * 43
TOKEN_SECRET = "t" * 43
NATS_PASSWORD = "n" * 32


def a_run(tmp_path: Path) -> tuple[Run, list[Supervised]]:
    run = Run(
        token="ab12cd34", database_url="postgresql://postgres@127.0.0.1:5432/pcup_ab12cd34",
        nats_url="nats://127.0.0.1:4222", namespace="upab12cd34", logs=tmp_path, sockets=tmp_path,
        livekit_keys={"production": ("up-production", "l" * 43)}, operator_key=OPERATOR,
        fleet_keys={"production": FLEET},
    )  # fmt: skip
    env = {
        "PINECALL_LOG_TOKEN_SECRET": TOKEN_SECRET,
        "PINECALL_NATS_URL": f"nats://upab12cd34-services:{NATS_PASSWORD}@127.0.0.1:4222",
        "PINECALL_RECORDINGS_SECRET_ACCESS_KEY": "lab",
        "PINECALL_NATS_NAMESPACE": "upab12cd34",
    }
    log = tmp_path / "call-log-1.log"
    return run, [Supervised(name="call-log-1", args=[], env=env, log=log)]


def test_every_secret_up_handed_out_is_looked_for(tmp_path: Path) -> None:
    run, processes = a_run(tmp_path)
    secrets = minted(run, processes)
    assert secrets == {
        "operator key": OPERATOR,
        "operator key's secret": "o" * 43,
        "fleet-production key": FLEET,
        "fleet-production key's secret": "f" * 43,
        "LiveKit production's API secret": "l" * 43,
        "call-log-1 PINECALL_LOG_TOKEN_SECRET": TOKEN_SECRET,
        "call-log-1 PINECALL_NATS_URL's password": NATS_PASSWORD,
        "call-log-1 PINECALL_RECORDINGS_SECRET_ACCESS_KEY": "lab",
    }
    clean = tmp_path / "roster-1.log"
    clean.write_text("INFO key 0123456789ab made\nINFO nats://127.0.0.1:4222 connected\n")
    found = scan([clean, tmp_path / "gone.log"], secrets)
    assert (found.leaks, found.files, found.looked_for, found.too_short) == ([], 1, 7, 1)
    assert found.line() == (
        f"secrets: none of 7 in 1 logs (1 stand-in constants under {SHORTEST} characters not "
        "looked for)"
    )


def test_a_secret_in_a_log_is_named_by_what_and_where_never_by_its_value(tmp_path: Path) -> None:
    run, processes = a_run(tmp_path)
    leaky = tmp_path / "dispatcher-1.log"
    leaky.write_text(
        "INFO started\n"
        f"ERROR auth failed for Bearer {OPERATOR}\n"
        f"WARNING nats://upab12cd34-services:{NATS_PASSWORD}@127.0.0.1:4222 down; {TOKEN_SECRET}\n"
    )
    found = scan([leaky], minted(run, processes))
    assert found.leaks == [
        "dispatcher-1.log:2: operator key",
        "dispatcher-1.log:3: call-log-1 PINECALL_NATS_URL's password",
        "dispatcher-1.log:3: call-log-1 PINECALL_LOG_TOKEN_SECRET",
    ]
    assert OPERATOR not in found.line()
    assert found.line().startswith("secrets: 3 found in the logs")
