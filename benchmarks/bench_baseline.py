"""Simulation speed of this tree against an older isthmus tree, measured in the same run.

A change to the core should keep `bench_sim.py`'s figures within 10% of the tree before it.
This runs the same cases with both trees' source (PYTHONPATH), each case in
a fresh child process, the two trees alternating (A B A B ...) so that the machine's load drifts
over both alike, and prints median simulation times and their ratio: wall time, and the child's CPU time (on a loaded
machine wall time stretches with the other processes; CPU time much less).

Run (make the other tree once, from the commit to compare with):

    git worktree add /tmp/baseline COMMIT
    .venv/bin/python benchmarks/bench_baseline.py /tmp/baseline --repeat 5

Both trees must be importable with this interpreter's packages.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"

CHILD = """
import json, sys, time
case = json.loads(sys.argv[1])
from isthmus.config import load_environment, single_cluster
from isthmus.sim.runner import simulate
from isthmus.workloads import resolve_workload
jobs = resolve_workload(case["workload"]).jobs
if case.get("max_size"):
    jobs = [j for j in jobs if j.size <= case["max_size"]]
env = single_cluster(case["cluster"]) if case.get("cluster") else load_environment(case["env"])
t, c = time.perf_counter(), time.process_time()
result = simulate(env, jobs, case["policy"], "none" if case.get("cluster") else None)
sim, cpu = time.perf_counter() - t, time.process_time() - c
ends = sorted(result.log.columns()["time"])[-1:]
print(json.dumps({"sim_s": sim, "cpu_s": cpu, "jobs": len(jobs), "unfinished": len(result.unfinished), "last": ends}))
"""


def cases() -> list[dict[str, object]]:
    """The cases of bench_sim.py sections 1 and 2, plus RR, TAGS-sets and TAGS-chain on the same trace."""
    out: list[dict[str, object]] = []
    synth = SHARED / "peers" / "workloads" / "synth_100k.swf.gz"
    if synth.exists():
        out += [{"workload": str(synth), "cluster": 128, "policy": p} for p in ("fcfs", "easy")]
    ctc = SHARED / "traces" / "CTC-SP2-1996-3.1-cln.swf.gz"
    if ctc.exists():
        out += [
            {"workload": str(ctc), "env": "koala-c-multicloud", "policy": p, "max_size": 32}
            for p in ("ff", "sjf", "rr", "tags-sets")
        ]
        # the policy of `isthmus experiment koala-c-limits` (its default 25-minute limit)
        out.append({"workload": str(ctc), "env": "koala-c-multicluster", "policy": "tags-chain", "max_size": 32})
    return out


def run(tree: Path, case: dict[str, object]) -> dict[str, object]:
    """One case with `tree`'s source, in a fresh process."""
    env = {**os.environ, "PYTHONPATH": str(tree / "src")}
    out = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(case)], env=env, capture_output=True, text=True, check=False
    )
    if out.returncode:
        raise SystemExit(f"{tree}: case {case} failed:\n{out.stderr[-2000:]}")
    result: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    """Run every case with both trees, alternating, and print medians and ratios."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("baseline", type=Path, help="the older isthmus tree (a git worktree)")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each case with each tree (default 3)")
    ap.add_argument("--tree", type=Path, default=ROOT, help="the tree measured against the baseline (default: this)")
    ap.add_argument("--only", default="", help="comma-separated policies to run (default: every case)")
    args = ap.parse_args()
    if not (args.baseline / "src" / "isthmus").is_dir():
        raise SystemExit(f"{args.baseline} holds no isthmus source (src/isthmus)")
    todo = cases()
    if args.only:
        todo = [c for c in todo if c["policy"] in args.only.split(",")]
    if not todo:
        raise SystemExit(f"no workload found under {SHARED} (peers/workloads, traces)")
    print(
        f"{'case':<28} {'jobs':>6} {'baseline s':>11} {'now s':>8} {'ratio':>6}"
        f" {'baseline cpu s':>15} {'now cpu s':>10} {'ratio':>6}"
    )
    for case in todo:
        base: list[dict[str, object]] = []
        now: list[dict[str, object]] = []
        for _ in range(args.repeat):
            b = run(args.baseline, case)
            figures = run(args.tree, case)
            base.append(b)
            now.append(figures)
            if (b["jobs"], b["unfinished"]) != (figures["jobs"], figures["unfinished"]):
                raise SystemExit(f"the trees disagree on case {case}: {b} vs {figures}")

        def med(runs: list[dict[str, object]], key: str) -> float:
            return statistics.median(float(r[key]) for r in runs)  # type: ignore[arg-type]

        name = f"{case['policy']} {'cluster 128' if case.get('cluster') else case['env']}"
        mb, mn, cb, cn = med(base, "sim_s"), med(now, "sim_s"), med(base, "cpu_s"), med(now, "cpu_s")
        print(
            f"{name:<28} {now[0]['jobs']:>6} {mb:>11.2f} {mn:>8.2f} {mn / mb:>5.2f}x"
            f" {cb:>15.2f} {cn:>10.2f} {cn / cb:>5.2f}x",
            flush=True,
        )


if __name__ == "__main__":
    main()
