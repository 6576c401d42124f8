"""`isthmus simulate` with bags of tasks beside a rigid workload, end to end through the CLI."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from isthmus.cli.main import app

runner = CliRunner()

# one rigid job: submitted at 15, 20 s on 2 processors
SWF = "; MaxProcs: 4\n1 15 0 20 2 -1 -1 2 20 -1 1 1 1 -1 -1 -1 -1 -1\n"


def test_a_bag_beside_a_rigid_job_reports_its_makespan_and_the_delay_it_added(tmp_path: Path) -> None:
    trace = tmp_path / "one.swf"
    trace.write_text(SWF)
    out = tmp_path / "out"
    args = ["simulate", "--cluster", "4", "-w", str(trace), "-p", "fcfs", "--no-plots", "-o", str(out)]
    bag = ["--bag", "tasks=8,runtime=10,user=alice", "--preemption-time", "5"]
    result = runner.invoke(app, [*args, *bag, "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout[result.stdout.index("{") :])
    assert [p["policy"] for p in report["policies"]] == ["fcfs", "fcfs + bags"]
    info = report["bags"]["fcfs + bags"]
    assert (info["fairshare"], info["preemption_time"], info["pull_latency"]) == ("sep", 5.0, 0.0)
    (rec,) = info["bags"]
    # the hand-computed schedule of tests/sim/test_bags.py: done at 30, two tasks preempted 5 s in
    assert (rec["bag"], rec["user"], rec["tasks"], rec["done"], rec["repeated"]) == (2, "alice", 8, 8, 0)
    assert (rec["makespan"], rec["preemptions"], rec["wasted_seconds"]) == (30.0, 2, 10.0)
    delay = info["rigid_delay"]
    assert (delay["wait_mean_without_bags"], delay["wait_mean_with_bags"], delay["delay_max"]) == (0.0, 5.0, 5.0)
    assert info["shrink_waits"] == {"jobs": 1, "wait_mean": 5.0, "wait_max": 5.0, "not_started": []}
    assert json.loads((out / "comparison.json").read_text())["bags"] == report["bags"]
    # the rigid job's records leave the bag out
    assert (out / "fcfs_bags.jobs.csv").read_text().count("\n") == 2

    text = runner.invoke(app, [*args, *bag], env={"COLUMNS": "200"})
    assert text.exit_code == 0, text.output
    assert "fcfs + bags: bags of tasks, fair share sep" in text.output
    assert "delay added per job: mean 5 s, p95 5 s, max 5 s (1 of 1 jobs delayed; preemption time 5 s)" in text.output
    assert "bags gave processors back for 1 jobs; from the shrink to the job's start: mean 5 s, max 5 s" in text.output

    gep = runner.invoke(app, [*args, *bag, "--fairshare", "gep:prefer_between_tasks=true", "--json"])
    assert gep.exit_code == 0, gep.output
    assert json.loads(gep.stdout[gep.stdout.index("{") :])["bags"]["fcfs + bags"]["fairshare"] == (
        "gep[prefer_between_tasks=True]"
    )


def test_bags_file_and_errors_name_the_option_file_line_and_field(tmp_path: Path) -> None:
    trace = tmp_path / "one.swf"
    trace.write_text(SWF)
    args = ["simulate", "--cluster", "4", "-w", str(trace), "-p", "fcfs", "--no-plots", "-o", str(tmp_path / "o")]
    bags = tmp_path / "bags.txt"
    bags.write_text("# two sweeps\ntasks=6,runtime=5,user=a\n\ntasks=4,runtime=5,user=b,submit=3\n")
    ok = runner.invoke(app, [*args, "--bags", str(bags), "--json"])
    assert ok.exit_code == 0, ok.output
    recs = json.loads(ok.stdout[ok.stdout.index("{") :])["bags"]["fcfs + bags"]["bags"]
    assert [(r["user"], r["tasks"], r["done"]) for r in recs] == [("a", 6, 6), ("b", 4, 4)]

    def error(*extra: str) -> str:
        result = runner.invoke(app, [*args, *extra])
        assert result.exit_code == 2, result.output
        return result.stderr.strip()

    assert error("--bag", "tasks=x,runtime=10") == (
        "error: --bag 'tasks=x,runtime=10': field 'tasks': expected an integer >= 1, got 'x'"
    )
    assert error("--bag", "tasks=3,runtime=0") == (
        "error: --bag 'tasks=3,runtime=0': field 'runtime': expected a number > 0, got '0'"
    )
    assert error("--bag", "tasks=3") == "error: --bag 'tasks=3': field 'runtime' is required"
    bags.write_text("tasks=3,runtime=1\ntasks=3,runtme=1\n")
    assert error("--bags", str(bags)) == (
        f"error: {bags}:2: unknown field 'runtme'; expected one of tasks, runtime, user, submit, id"
    )
    assert error("--bag", "tasks=3,runtime=1,id=1") == "error: bag id 1 is already the id of a job or another bag"
    assert error("--fairshare", "gep") == "error: --fairshare applies to bags of tasks: add --bag or --bags"
    assert error("--preemption-time", "3") == "error: --preemption-time applies to bags of tasks: add --bag or --bags"
    assert "unknown fairshare policy 'fair'; valid names: gep, sep" in error(
        "--bag", "tasks=1,runtime=1", "--fairshare", "fair"
    )
