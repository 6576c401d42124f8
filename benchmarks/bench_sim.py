"""Simulator speed and memory against the peer simulators (../shared/peers/README.md).

Run: `.venv/bin/python benchmarks/bench_sim.py` (add `--quick` to skip the growth series).
Each case runs in a fresh child process so that its peak memory (max RSS of the whole
process, as /usr/bin/time -v reports for the peers) is its own.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
PEERS = SHARED / "peers"
TRACES = SHARED / "traces"

# Whole-process figures measured for the fastest Python peer (pyss) on this kind of machine.
PYSS = {"fcfs": {"jobs_s": 13_300, "rss_mb": 307}, "easy": {"jobs_s": 4_100, "rss_mb": 316}}
# The issue's stated bar (pyss "about 7,700 jobs/s FCFS and 4,200 jobs/s EASY here").
ISSUE_BAR = {"fcfs": 7_700, "easy": 4_200}


def child(case: dict[str, object]) -> dict[str, object]:
    """Run one case in this process and return its figures."""
    t0 = time.perf_counter()
    from isthmus.config import load_environment, single_cluster
    from isthmus.sim.runner import simulate
    from isthmus.workloads import resolve_workload

    wl = resolve_workload(str(case["workload"]))
    jobs = wl.jobs
    if case.get("max_size"):
        jobs = [j for j in jobs if j.size <= int(case["max_size"])]  # type: ignore[call-overload]
    t_read = time.perf_counter() - t0
    env = single_cluster(int(case["cluster"])) if case.get("cluster") else load_environment(str(case["env"]))  # type: ignore[call-overload]
    t1 = time.perf_counter()
    result = simulate(env, jobs, str(case["policy"]), "none" if case.get("cluster") else None)
    t_sim = time.perf_counter() - t1
    import resource

    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {
        "jobs": len(jobs),
        "read_s": t_read,
        "sim_s": t_sim,
        "unfinished": len(result.unfinished),
        "rss_mb": rss_mb,
    }


def run_case(case: dict[str, object]) -> dict[str, object]:
    """Run `case` in a child process; add its whole-process wall time and peak RSS."""
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, __file__, "--child", json.dumps(case)], stdout=subprocess.PIPE, text=True)
    out, _ = proc.communicate()
    wall = time.perf_counter() - t0
    if proc.returncode:
        raise SystemExit(f"case {case} failed with exit code {proc.returncode}")
    figures: dict[str, object] = json.loads(out.strip().splitlines()[-1])
    figures["wall_s"] = wall
    return figures


def generated(n: int, workdir: Path) -> Path:
    """The peers' generator run with the peers' parameters (N jobs, 128 processors, load 0.8, seed 1)."""
    path = workdir / f"synth_{n}.swf"
    if not path.exists():
        subprocess.run(
            [
                sys.executable,
                str(PEERS / "workloads" / "gen_swf.py"),
                str(n),
                str(path),
                "--procs",
                "128",
                "--load",
                "0.8",
                "--seed",
                "1",
            ],
            check=True,
            stdout=subprocess.DEVNULL,
        )
    return path


def main() -> None:
    """Run every benchmark case and print the figures next to the peers'."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--quick", action="store_true", help="skip the growth series")
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(json.loads(args.child))))
        return
    if not PEERS.exists():
        raise SystemExit(f"peer workloads not found at {PEERS}")
    synth100k = str(PEERS / "workloads" / "synth_100k.swf.gz")
    print("1. One 128-processor cluster, generated 100k-job workload (peers/README.md)")
    print(
        f"{'policy':<6} {'jobs':>7} {'sim s':>7} {'sim jobs/s':>11} {'process s':>10} {'process jobs/s':>15} "
        f"{'peak MB':>8} {'vs pyss':>8} {'vs issue bar':>13}"
    )
    for pol in ("fcfs", "easy"):
        f = run_case({"workload": synth100k, "cluster": 128, "policy": pol})
        n = int(f["jobs"])  # type: ignore[call-overload]
        sim_rate = n / float(f["sim_s"])  # type: ignore[arg-type]
        proc_rate = n / float(f["wall_s"])  # type: ignore[arg-type]
        print(
            f"{pol:<6} {n:>7} {f['sim_s']:>7.2f} {sim_rate:>11,.0f} {f['wall_s']:>10.2f} {proc_rate:>15,.0f} "
            f"{f['rss_mb']:>8.0f} {proc_rate / PYSS[pol]['jobs_s']:>7.1f}x {proc_rate / ISSUE_BAR[pol]:>12.1f}x"
        )
    print(
        f"   pyss (whole process): FCFS {PYSS['fcfs']['jobs_s']:,} jobs/s, {PYSS['fcfs']['rss_mb']} MB; "
        f"EASY {PYSS['easy']['jobs_s']:,} jobs/s, {PYSS['easy']['rss_mb']} MB. Targets: 10x jobs/s, < 150 MB."
    )
    ctc = TRACES / "CTC-SP2-1996-3.1-cln.swf.gz"
    if ctc.exists():
        print("\n2. KOALA-C multicluster and multicloud environment, full CTC-SP2 (jobs <= 32 processors)")
        for pol in ("ff", "sjf"):
            f = run_case({"workload": str(ctc), "env": "koala-c-multicloud", "policy": pol, "max_size": 32})
            print(
                f"{pol:<6} {f['jobs']:>7} jobs: simulation {f['sim_s']:.2f} s, whole process {f['wall_s']:.2f} s "
                f"(target < 5 s), peak {f['rss_mb']:.0f} MB"
            )
    if not args.quick:
        print("\n3. Growth (EASY, generated workloads as in peers/README.md)")
        with tempfile.TemporaryDirectory() as tmp:
            base = None
            for n in (10_000, 50_000, 100_000, 240_000):
                f = run_case({"workload": str(generated(n, Path(tmp))), "cluster": 128, "policy": "easy"})
                per_job = float(f["sim_s"]) / n * 1e6  # type: ignore[arg-type]
                base = base or per_job
                print(
                    f"{n:>8} jobs: simulation {f['sim_s']:.2f} s ({per_job:.1f} µs/job, {per_job / base:.2f}x "
                    f"the 10k cost per job), process {f['wall_s']:.2f} s, peak {f['rss_mb']:.0f} MB"
                )


if __name__ == "__main__":
    main()
