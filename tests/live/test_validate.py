"""`isthmus validate`: the same reduced workload live and simulated agrees (KOALA-C Fig. 7).

Tolerance of the small case (25 Lublin jobs x 0.0005 on the bundled `local` environment, FF +
On-Demand, rounds every second, about 50 s live): mean wait within 2 s or 25 %, mean slowdown
and mean bounded slowdown within 25 %, makespan within 5 s. Measured: wait -0.04 s (-1 %),
slowdown -3 %, bounded slowdown +0.2 %, makespan +2 s (docs/live.md, "Simulation vs live").
"""

from __future__ import annotations

import json
from pathlib import Path

from livekit import tagged_pids
from typer.testing import CliRunner

from isthmus.cli.main import app
from isthmus.config import load_environment
from isthmus.live.validate import prepare_case, validate
from isthmus.model.environment import PolicyChoice
from isthmus.model.events import EventKind
from isthmus.workloads import resolve_workload

SMALL = "lublin:jobs=25,procs=6,max_size=4,load=0.9"


def _row(rows: list[dict], metric: str) -> dict:  # type: ignore[type-arg]
    return next(r for r in rows if r["metric"] == metric)


def test_small_case_live_agrees_with_simulation(tmp_path: Path, tag: str) -> None:
    env = load_environment("local")
    case = prepare_case(env, resolve_workload(SMALL, seed=3), scale=0.0005)
    assert len(case.jobs) == 25 and not case.dropped
    assert min(j.runtime for j in case.jobs) == 2.5 and case.floored > 0
    report = validate(case, [PolicyChoice("ff")], out=tmp_path / "out", work_dir=tmp_path / "work", tag=tag)
    (pv,) = report.policies
    live, sim = pv.live.metrics.summary, pv.simulated.metrics.summary
    assert live["jobs_completed"] == sim["jobs_completed"] == 25, pv.live.notes
    assert not pv.live.notes
    # the live side really ran: every run lasted at least its sleep, and not much longer
    assert pv.live.run_overhead_mean is not None and 0 < pv.live.run_overhead_mean < 0.5
    assert pv.live.submit_lag_mean is not None and 0 <= pv.live.submit_lag_mean < 0.5
    # the live log is the manager's persisted engine log, with the workload's job ids
    kinds = [e.kind for e in pv.live.log]
    assert kinds.count(EventKind.SUBMIT) == kinds.count(EventKind.END) == 25
    assert {e.job for e in pv.live.log if e.job >= 0} == {j.id for j in case.jobs}

    wait = _row(pv.rows, "wait_mean")
    assert abs(wait["abs_diff"]) <= 2.0 or abs(wait["rel_diff"]) <= 0.25, wait
    for metric in ("slowdown_mean", "bounded_slowdown_mean"):
        r = _row(pv.rows, metric)
        assert abs(r["rel_diff"]) <= 0.25, r
    assert abs(_row(pv.rows, "makespan")["abs_diff"]) <= 5.0, pv.rows

    doc = json.loads((tmp_path / "out" / "validation.json").read_text())
    assert doc["case"]["jobs"] == 25 and doc["policies"][0]["policy"] == "ff"
    for side in ("sim", "live"):
        assert (tmp_path / "out" / f"ff.{side}.jobs.csv").exists()
        assert (tmp_path / "out" / f"ff.{side}.events.csv").exists()
    assert tagged_pids(tag) == []  # manager, pilots and sleeps all gone


def test_cli_runs_with_a_policy_and_drops_too_large_jobs(tmp_path: Path, tag: str, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import types

    import isthmus.live.launch as launch

    # the manager the CLI starts gets the test's tag, so leftovers would be found
    monkeypatch.setattr(launch, "uuid", types.SimpleNamespace(uuid4=lambda: types.SimpleNamespace(hex=tag)))
    trace = tmp_path / "t.swf"
    # id submit wait runtime procs cpu mem req_procs req_time req_mem status user group app queue part prev think
    trace.write_text(
        "; MaxProcs: 8\n"
        "1 0 -1 300 1 -1 -1 1 600 -1 1 1 1 -1 1 -1 -1 -1\n"
        "2 100 -1 400 2 -1 -1 2 600 -1 1 2 1 -1 1 -1 -1 -1\n"
        "3 150 -1 300 8 -1 -1 8 600 -1 1 1 1 -1 1 -1 -1 -1\n"
        "4 200 -1 100 1 -1 -1 1 600 -1 1 2 1 -1 1 -1 -1 -1\n"
    )
    out = tmp_path / "out"
    result = CliRunner().invoke(
        app,
        ["validate", "--workload", str(trace), "--scale", "0.01", "-p", "rr", "--out", str(out), "--json"],
    )
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout[result.stdout.index("{") :])
    assert doc["case"]["dropped_too_large"] == [3]
    assert doc["case"]["jobs"] == 3 and doc["case"]["runtimes_floored"] == 1  # 100 s x 0.01 = 1 s -> 2.5 s
    (entry,) = doc["policies"]
    assert entry["policy"] == "rr"
    assert entry["live"]["jobs_completed"] == entry["simulated"]["jobs_completed"] == 3
    assert "dropped 1 jobs larger than the largest site" in result.stderr
    assert (out / "validation.json").exists()
    assert tagged_pids(tag) == []
