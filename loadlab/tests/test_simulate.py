"""``lab simulate`` (issue 23): the production rules on a virtual clock.

What the simulator imports of the services is their ``domain`` (the graph says so); a rule's
constant swapped moves its result; bad input is a usage error naming its option; a small day's
totals add up and both modes see the same callers.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import grimp
import msgspec
import pytest
from click.testing import CliRunner

from pinecall_dispatcher import domain as dispatch
from pinecall_loadlab.commands.simulate import simulate
from pinecall_loadlab.simulate import engine, experiments
from pinecall_loadlab.simulate.day import DayError, load_day, seed_day
from pinecall_loadlab.simulate.engine import simulate_day
from pinecall_loadlab.simulate.params import Params
from pinecall_roster import domain as roster
from pinecall_worker import domain as worker_rules

SERVICES = ("pinecall_dispatcher", "pinecall_roster", "pinecall_worker")
SMALL = ("--calls", "1500", "--most", "3", "--seed", "7")
"""A day small enough for a test: 1 500 callers, a peak of ~20 at once, 3 scaled workers."""


def totals(result: object, mode: str) -> experiments.Totals:
    assert isinstance(result, list)
    [found] = [m.totals for m in result if m.mode == mode]
    return found


# --- the production rules, imported -------------------------------------------------------------


def test_the_simulator_imports_the_services_domain_rules_and_nothing_else_of_them() -> None:
    """The import contracts (.importlinter's simulator-imports-only-domains, the Pants rules'
    LAB_SIMULATOR_IMPORTS) forbid the simulator every module of a service but its domain; only
    this graph says it does import the dispatcher's, the roster's and the worker's."""
    graph = grimp.build_graph("pinecall_loadlab", *SERVICES)
    simulator = {m for m in graph.modules if m.startswith("pinecall_loadlab.simulate")}
    imported = {
        (imported)
        for m in simulator
        for imported in graph.find_modules_directly_imported_by(m)
        if imported.split(".")[0] in SERVICES
    }
    assert imported == {f"{s}.domain" for s in SERVICES}


def test_a_swapped_dispatch_constant_moves_the_ghost_result(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One offer a room (not the seed's three): the rooms offered to the ghost before it was
    unheard go to the overflow instead of the other worker."""
    before = totals(experiments.ghost(), "runtime_choosing")
    monkeypatch.setattr(dispatch, "SEED", dispatch.Rules(most_offers=1))
    after = totals(experiments.ghost(), "runtime_choosing")
    assert (before.answered, before.overflow) == (16, 0)
    assert after.overflow > 0
    assert after.answered == 16 - after.overflow


def test_a_swapped_load_threshold_moves_livekit_s_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """LiveKit's line at 0.5 instead of the installed framework's 0.7: 4 of 8 seats, not 6."""
    assert totals(experiments.capacity(), "livekit_choosing").answered == 12
    monkeypatch.setattr(worker_rules, "load_threshold", lambda: 0.5)
    assert totals(experiments.capacity(), "livekit_choosing").answered == 8


def test_a_swapped_wanted_target_moves_the_pod_hours(monkeypatch: pytest.MonkeyPatch) -> None:
    day, params = seed_day(3000), Params(most=10)
    seated = simulate_day(day, params, seed=3, modes=("runtime_choosing",), minutes=False)
    monkeypatch.setattr(roster, "WANTED_TARGET", 0.9)
    fuller = simulate_day(day, params, seed=3, modes=("runtime_choosing",), minutes=False)
    assert fuller.modes[0].pod_hours < seated.modes[0].pod_hours
    assert fuller.modes[0].totals.placed == seated.modes[0].totals.placed


# --- a day ------------------------------------------------------------------------------------


def test_a_small_day_through_both_dispatchers(tmp_path: Path) -> None:
    plot = tmp_path / "day.png"
    run = CliRunner().invoke(simulate, [*SMALL, "--json", "--plot", str(plot)])
    assert run.exit_code == 0, run.output
    found = json.loads(run.stdout)
    assert plot.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    livekit, runtime = found["modes"]
    assert (livekit["mode"], runtime["mode"]) == ("livekit_choosing", "runtime_choosing")
    for mode in found["modes"]:
        t = mode["totals"]
        assert t["placed"] == found["callers"] > 1000
        assert t["placed"] == t["answered"] + t["overflow"] + t["silent"] + t["ringing"]
        assert t["ringing"] == 0
        assert sum(m["arrived"] for m in mode["minutes"]) == t["placed"]
        assert [m["minute"] for m in mode["minutes"]] == list(range(len(mode["minutes"])))
        assert mode["pod_hours"] > 0
    assert runtime["totals"]["silent"] == 0  # the runtime leaves nobody silent
    assert runtime["totals"]["answered"] >= livekit["totals"]["answered"]


def test_a_node_lost_costs_silence_under_livekit_and_a_sentence_under_the_runtime() -> None:
    run = CliRunner().invoke(simulate, [*SMALL, "--json", "--node-lost", "11:30"])
    assert run.exit_code == 0, run.output
    modes = json.loads(run.stdout)["modes"]
    assert [m["nodes_lost"] for m in modes] == [1, 1]
    assert "lost nothing" not in run.output
    livekit, runtime = (m["totals"] for m in modes)
    assert runtime["lost"] > 0
    assert runtime["sentenced"] == runtime["lost"]
    assert livekit["lost"] > 0
    assert livekit["silent_after_loss"] == livekit["lost"]


def test_a_node_lost_before_any_scaled_node_is_up_says_so() -> None:
    """At 07:05 a day of 1 000 calls runs on the core node alone: LOST 0, and a line on stderr
    says the fault found no scaled worker's node (not an error: exit 0)."""
    run = CliRunner().invoke(simulate, ["--calls", "1000", "--node-lost", "07:05", "--json"])
    assert run.exit_code == 0, run.output
    for mode in json.loads(run.stdout)["modes"]:
        assert (mode["nodes_lost"], mode["totals"]["lost"]) == (0, 0)
    assert (
        "--node-lost 07:05 lost nothing (livekit_choosing, runtime_choosing): no scaled worker's"
        " node was up then" in run.stderr
    )


def test_the_table(tmp_path: Path) -> None:
    run = CliRunner().invoke(simulate, [*SMALL, "--mode", "runtime"])
    assert run.exit_code == 0, run.output
    assert "runtime_choosing" in run.output
    assert "livekit_choosing" not in run.output
    assert "POD-HOURS" in run.output


# --- bad input --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("{not json", "not a day file"),
        ('{"per_hour": [1, 2]}', "per_hour holds 2 hours, not 24"),
        (json.dumps({"per_hour": [1] * 23 + [-5]}), "hour 23 has -5 calls"),
        (json.dumps({"per_hour": [1] * 24, "calls": -1}), "calls is -1 (1 to 1 500 000, finite)"),
        (json.dumps({"per_hour": [1] * 24, "calls": 1e300}), "calls is 1e+300 (1 to 1 500 000"),
        (json.dumps({"per_hour": [1] * 24, "calls": 0}), "calls is 0 (1 to 1 500 000"),
        (json.dumps({"per_hour": [1] * 3 + [1e308] + [1] * 20}), "hour 3 has 1e+308 calls"),
        (json.dumps({"per_hour": [1] * 3 + [1e308] + [1] * 20, "calls": 9}), "hour 3 has 1e+308"),
        (json.dumps({"per_hour": [0] * 24}), "per_hour holds 0 calls (a day holds 1 to 1 500 000)"),
        (json.dumps({"per_hour": [1e6] * 24}), "per_hour holds 2.4e+07 calls"),
        (json.dumps({"per_hour": [0] * 24, "calls": 10}), "all 0"),
        (json.dumps({"per_hour": [1] * 24, "rate": 3}), "not a day file"),
    ],
)
def test_a_malformed_day_file_is_a_usage_error(tmp_path: Path, text: str, says: str) -> None:
    day = tmp_path / "day.json"
    day.write_text(text)
    run = CliRunner().invoke(simulate, ["--day", str(day)])
    assert run.exit_code == 2, run.output
    assert "Invalid value for '--day'" in run.output
    assert says in run.output
    with pytest.raises(DayError, match=re.escape(says)):
        load_day(day)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--calls", "-10"], "'--calls'"),
        (["--cell", "-1"], "'--cell'"),
        (["--burst", "10:00", "--burst-rate", "-3"], "'--burst-rate'"),
        (["--release", "25:00"], "'--release'"),
        (["--node-lost", "noon"], "'--node-lost'"),
        (["--day", "/nonexistent/day.json"], "'--day'"),
        (["--plot", "/nonexistent/folder/day.png"], "'--plot'"),
        (["--calls", "10", "--cell", "10"], "give one"),
    ],
)
def test_bad_input_is_a_usage_error_naming_it(args: list[str], says: str) -> None:
    run = CliRunner().invoke(simulate, args)
    assert run.exit_code == 2, run.output
    assert says in run.output


def _nothing_runs(*args: object, **kwargs: object) -> None:
    raise AssertionError("the day ran")


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--calls", "nan"], "'--calls': nan is not a number in the range 1<=x<=1500000"),
        (["--calls", "inf"], "'--calls': inf is not in the range 1<=x<=1500000"),
        (["--calls", "-inf"], "'--calls': -inf is not in the range 1<=x<=1500000"),
        (["--calls", "1e300"], "'--calls': 1e+300 is not in the range 1<=x<=1500000"),
        (["--calls", "1500001"], "'--calls': 1500001.0 is not in the range 1<=x<=1500000"),
        (["--calls", "0"], "'--calls': 0.0 is not in the range 1<=x<=1500000"),
        (["--cell", "nan"], "'--cell': nan is not a number in the range 1<=x<=20000"),
        (["--cell", "inf"], "'--cell': inf is not in the range 1<=x<=20000"),
        (["--cell", "20001"], "'--cell': 20001.0 is not in the range 1<=x<=20000"),
        (["--cell", "0"], "'--cell': 0.0 is not in the range 1<=x<=20000"),
        (["--burst", "11:00", "--burst-rate", "inf"], "'--burst-rate': inf is not in the range"),
        (["--burst", "11:00", "--burst-rate", "nan"], "'--burst-rate': nan is not a number"),
        (["--burst", "11:00", "--burst-minutes", "nan"], "'--burst-minutes': nan is not a number"),
        (["--burst", "11:00", "--burst-minutes", "inf"], "'--burst-minutes': inf is not in the"),
        (["--burst", "11:00", "--burst-minutes", "1441"], "not in the range 0<=x<=1440"),
        (
            ["--burst", "11:00", "--burst-rate", "1400000"],
            "'--burst-rate': the day and its burst hold 14 050 000 calls, past the 1 500 000",
        ),
        (["--node-delay", "nan"], "'--node-delay': nan is not a number in the range 0<=x<=86400"),
        (["--node-delay", "inf"], "'--node-delay': inf is not in the range 0<=x<=86400"),
        (["--node-delay", "86401"], "'--node-delay': 86401.0 is not in the range 0<=x<=86400"),
        (["--down-window", "nan"], "'--down-window': nan is not a number in the range"),
        (["--down-window", "inf"], "'--down-window': inf is not in the range 0<=x<=86400"),
        (["--down-window", "-1"], "'--down-window': -1.0 is not in the range 0<=x<=86400"),
        (["--seed", "-1"], "'--seed': -1 is not in the range x>=0"),
        (["--most", "2001"], "'--most': 2001 is not in the range 0<=x<=2000"),
        (["--least", "100000"], "'--least': 100000 is not in the range 0<=x<=2000"),
        (
            ["--core-workers", "10000000"],
            "'--core-workers': 10000000 is not in the range 0<=x<=2000",
        ),
        (["--most", "5", "--least", "10"], "'--least': 10 is past --most 5"),
        (["--burst-rate", "100"], "--burst-rate shapes a burst: it needs --burst HH:MM"),
        (["--burst-minutes", "3"], "--burst-minutes shapes a burst: it needs --burst HH:MM"),
    ],
)
def test_a_number_out_of_its_range_is_a_usage_error_before_anything_runs(
    monkeypatch: pytest.MonkeyPatch, args: list[str], says: str
) -> None:
    """NaN, infinities, zero calls and days past what the simulator runs: exit 2, the option and
    its range named, and no day simulated."""
    monkeypatch.setattr(engine, "simulate_day", _nothing_runs)
    run = CliRunner().invoke(simulate, args)
    assert run.exit_code == 2, run.output
    assert says in run.output
    assert "Traceback" not in run.output
    assert "a day of" not in run.output


def test_a_day_file_scaled(tmp_path: Path) -> None:
    day = tmp_path / "day.json"
    day.write_text(json.dumps({"per_hour": [0] * 9 + [1, 3, 1] + [0] * 12, "calls": 500}))
    loaded = load_day(day)
    assert loaded.calls == pytest.approx(500)
    assert loaded.per_minute().sum() == pytest.approx(500)
    assert msgspec.json.decode(msgspec.json.encode(loaded))["per_hour"][10] == pytest.approx(300)


def test_the_readme_s_synopsis_names_every_option() -> None:
    """loadlab/README.md's ``lab simulate`` synopsis holds each of the command's options (it left
    out --least, which its own question 1 uses)."""
    readme = (Path(__file__).parents[1] / "README.md").read_text()
    synopsis = readme.split("pinecall-runtime lab simulate ", 1)[1].split("```", 1)[0]
    options = {o for p in simulate.params for o in p.opts if o.startswith("--")}
    assert sorted(o for o in options if f"[{o}" not in synopsis and f" {o} " not in synopsis) == []
