"""`isthmus validate` as the dissertation validates its simulator (§6.6, Figs 6.9-6.11): the FIU
testbed time-scaled, a workload model drawn with several seeds and simulated each time, and the
live run placed among those runs, for Startup, OD-S and OD-ExecTime."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from isthmus.cli.main import app
from isthmus.config import load_environment
from isthmus.live.validate import compare_summaries, prepare_case, repeat_summaries, scale_environment, simulate_case
from isthmus.metrics.stats import mean_ci95
from isthmus.model.environment import PolicyChoice
from isthmus.workloads import resolve_workload

FIU = "villegas-fiu"
STEADY = "uniform:procs=7"


def test_scaling_an_environment_keeps_its_costs():
    env = load_environment(FIU)
    scaled = scale_environment(env, 0.02)
    (site,) = scaled.sites
    (orig,) = env.sites
    assert scaled.round_interval == pytest.approx(20 * 0.02)
    assert (site.boot_time, site.shutdown_time, site.idle_release_time) == pytest.approx((12.0, 1.2, 6.0))
    assert site.billing_increment == pytest.approx(72.0)
    assert site.price_per_increment == pytest.approx(orig.price_per_increment)
    with pytest.raises(ValueError, match="positive"):
        scale_environment(env, 0)
    # the same hour-long workload costs what it costs unscaled (Startup: every VM, whole increments)
    wl = resolve_workload(STEADY, seed=1)
    full = simulate_case(prepare_case(env, wl, scale=1.0, min_runtime=0), PolicyChoice("fcfs"), PolicyChoice("startup"))
    small = simulate_case(
        prepare_case(scaled, wl, scale=0.02, min_runtime=0), PolicyChoice("fcfs"), PolicyChoice("startup")
    )
    assert small.metrics.summary["cost_charged"] == pytest.approx(full.metrics.summary["cost_charged"])


def test_repeated_simulations_give_mean_interval_and_range():
    env = scale_environment(load_environment(FIU), 0.02)
    cases = [prepare_case(env, resolve_workload(STEADY, seed=s), scale=0.02, jobs=40) for s in range(4)]
    rep = repeat_summaries(cases, PolicyChoice("fcfs"), PolicyChoice("od-s"))
    waits = [simulate_case(c, PolicyChoice("fcfs"), PolicyChoice("od-s")).metrics.summary["wait_mean"] for c in cases]
    mean, ci = mean_ci95(waits)
    assert rep["wait_mean"] == {"mean": mean, "ci95": ci, "min": min(waits), "max": max(waits), "n": 4}
    rows = compare_summaries({"wait_mean": waits[0]}, {"wait_mean": max(waits)}, ("wait_mean",), rep)
    assert rows[0]["live_in_range"] is True
    assert rows[0]["live_in_ci95"] is (abs(max(waits) - mean) <= ci)
    far = compare_summaries({"wait_mean": 1.0}, {"wait_mean": max(waits) + 1e6}, ("wait_mean",), rep)
    assert far[0]["live_in_range"] is False and far[0]["live_in_ci95"] is False


def test_dissertation_validation_live_for_startup_od_s_and_od_exectime(tmp_path: Path, tag: str) -> None:
    out = tmp_path / "out"
    args = [
        "validate",
        "--env",
        FIU,
        "--scale-environment",
        "--workload",
        STEADY,
        "--scale",
        "0.02",
        "--jobs",
        "30",
        "--repeat",
        "8",
        "--seed",
        "1",
        "-p",
        "fcfs",
        "--out",
        str(out),
        "--json",
    ]
    for provisioning in ("startup", "od-s", "od-exectime"):
        res = CliRunner().invoke(app, [*args, "--provisioning", provisioning, "--out", str(out / provisioning)])
        assert res.exit_code == 0, res.output
        doc = json.loads((out / provisioning / "validation.json").read_text())
        assert doc["environment_scaled"] is True and doc["repeat"] == {"runs": 8, "seeds": [1, 8]}
        assert doc["case"]["round_interval"] == pytest.approx(0.4)
        (entry,) = doc["policies"]
        assert entry["live"]["jobs_completed"] == 30, entry["live"]["notes"]
        rows = {r["metric"]: r for r in entry["comparison"]}
        for metric in ("slowdown_mean", "cost_charged"):
            rep = rows[metric]["repeated"]
            assert rep["n"] == 8 and rep["mean"] is not None and rep["ci95"] is not None
            assert rep["min"] <= rep["mean"] <= rep["max"]
        # the live run agrees with the simulation of the same draw (seed 1): within a round or two
        wait = rows["wait_mean"]
        assert abs(wait["abs_diff"]) <= 2.0 or abs(wait["rel_diff"]) <= 0.25, (provisioning, wait)
        slowdown = rows["slowdown_mean"]
        assert abs(slowdown["rel_diff"]) <= 0.25, (provisioning, slowdown)
        if provisioning == "startup":  # every VM leased at once, for whole increments: costs are equal
            assert math.isclose(rows["cost_charged"]["live"], rows["cost_charged"]["simulated"], rel_tol=1e-9)
        else:  # OD-ExecTime reads the runtimes known a priori: the live manager is told them too
            assert abs(rows["cost_charged"]["rel_diff"]) <= 0.5, (provisioning, rows["cost_charged"])


def test_validate_refuses_repeat_on_a_trace_file(tmp_path: Path) -> None:
    trace = tmp_path / "t.swf"
    trace.write_text("1 0 0 10 1 -1 -1 1 10 -1 1 1 -1 -1 -1 -1 -1 -1\n")
    res = CliRunner().invoke(app, ["validate", "--workload", str(trace), "--repeat", "3", "-o", str(tmp_path / "o")])
    assert res.exit_code == 2 and "is a file" in res.output


def _commands_under(path: Path) -> dict[int, str]:
    """Command lines (by pid) that name `path`: the validation, its managers and their pilots."""
    found = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # ended while we looked
            continue
        if str(path) in cmd:
            found[int(proc.name)] = cmd
    return found


def test_a_terminated_validation_stops_its_manager_and_pilots(tmp_path: Path) -> None:
    """SIGTERM (a scheduler's or an operator's kill) ends the validation like Ctrl-C: nothing it started lives on."""
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    isthmus = Path(sys.executable).parent / "isthmus"
    cmd = [str(isthmus), "validate", "--env", "local", "-o", str(tmp_path / "out")]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 90
        while time.time() < deadline and not any("live_entry" in c for c in _commands_under(tmp_path).values()):
            time.sleep(0.2)
        assert any("live_entry" in c for c in _commands_under(tmp_path).values()), "no manager was started"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 143
        deadline = time.time() + 30
        while time.time() < deadline and _commands_under(tmp_path):
            time.sleep(0.2)
        assert not _commands_under(tmp_path), f"left running: {_commands_under(tmp_path)}"
    finally:
        if proc.poll() is None:
            proc.kill()
