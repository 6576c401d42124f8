"""Simulator speed and memory against the peer simulators (../shared/peers/README.md).

Run: `.venv/bin/python benchmarks/bench_sim.py` (add `--quick` to skip the growth series, the
full-LCG section, the koala-c-limits sample and EASY's long queue; `--only N` runs section N alone; `--repeat R`
the runs of section 6's comparison, default 5).
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
# The stated bar for the peers (pyss "about 7,700 jobs/s FCFS and 4,200 jobs/s EASY here").
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
    if "scan_queue_max" in case:  # section 8: EASY's plain scan of the queue, forced
        from isthmus.policies.allocation import easy

        easy.SCAN_QUEUE_MAX = int(case["scan_queue_max"])  # type: ignore[call-overload]
    t1, c1 = time.perf_counter(), time.process_time()
    result = simulate(env, jobs, str(case["policy"]), "none" if case.get("cluster") else None)
    t_sim, c_sim = time.perf_counter() - t1, time.process_time() - c1
    import resource

    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # before the figures below
    figures: dict[str, object] = {
        "jobs": len(jobs),
        "read_s": t_read,
        "sim_s": t_sim,
        "sim_cpu_s": c_sim,
        "unfinished": len(result.unfinished),
        "rss_mb": rss_mb,
    }
    if case.get("queue_stats"):  # section 8
        import numpy as np

        from isthmus.model.events import EventKind

        cols = result.log.columns()
        kind, at = np.asarray(cols["kind"]), np.asarray(cols["time"])
        waited = float(at[kind == int(EventKind.START)].sum() - at[kind == int(EventKind.SUBMIT)].sum())
        span = float(np.max(at) - np.min(at)) if at.size else 0.0
        # Little's law: the time-averaged number of queued jobs (every job started once)
        figures["mean_queue"] = waited / span if span else 0.0
        figures["wait_sum"] = waited
    return figures


def phases_child(case: dict[str, object]) -> dict[str, object]:
    """CPU seconds of each step `isthmus simulate --cluster P -w FILE -p POLICY -o DIR --no-plots`
    takes, through the same calls in this process: start-up imports, reading, simulating,
    and the metrics with the records files, streamed as the command computes them (where the
    remaining time of section 6 goes)."""
    t = [time.process_time()]
    from isthmus.cli import main as cli_main

    cli_main.load_commands("simulate_cmd")  # what `isthmus simulate` imports before it runs
    from isthmus.config import single_cluster
    from isthmus.metrics.records import JobColumns
    from isthmus.metrics.run import stream_run
    from isthmus.model.jobtable import JobTable
    from isthmus.sim.runner import simulate
    from isthmus.workloads import resolve_workload

    t.append(time.process_time())
    jobs = resolve_workload(str(case["workload"]), lazy=True).jobs  # a JobTable, as the command reads it
    columns = JobColumns.from_table(jobs) if isinstance(jobs, JobTable) else JobColumns.from_jobs(jobs)
    t.append(time.process_time())
    env = single_cluster(int(case["cluster"]))  # type: ignore[call-overload]
    result = simulate(env, jobs, str(case["policy"]), None, round_interval=None)
    t.append(time.process_time())
    base = Path(str(case["out"])) / str(case["policy"])
    log, end = result.log, result.end_time
    del result
    stream_run(log, columns, env, end, f"{base}.jobs.csv", f"{base}.jobs.parquet", series=False, consume_log=True)
    t.append(time.process_time())
    names = ("startup_s", "read_s", "sim_s", "metrics_s")
    return {name: t[i + 1] - t[i] for i, name in enumerate(names)}


def round_child(case: dict[str, object]) -> dict[str, object]:
    """Time one scheduling round of `case["policy"]` with `case["queued"]` jobs waiting over
    `case["sites"]` 32-processor clusters, each with 3 processors free (a 29-processor job runs on
    it), and a bare Python scan of the same queue (one size test per job) for the ratio. The
    garbage of building the queue is collected first, so that neither timing pays for a full
    collection of the setup's objects (Python's collector runs one when allocations pass its
    threshold, at whatever call that happens: 100-500 ms here, not a cost of the round)."""
    import gc
    import random

    from isthmus.model.environment import Environment, PolicyChoice
    from isthmus.model.job import Job
    from isthmus.model.site import Site
    from isthmus.sim.harness import Harness

    n_sites, n_queued = int(case["sites"]), int(case["queued"])  # type: ignore[call-overload]
    env = Environment(name="round", sites=tuple(Site(f"c{i}", nodes=32) for i in range(n_sites)), round_interval=30.0)
    h = (
        Harness(env, PolicyChoice(str(case["policy"])), now=10_000.0, predictor=PolicyChoice(str(case["predictor"])))
        if case.get("predictor")
        else Harness(env, PolicyChoice(str(case["policy"])), now=10_000.0)
    )
    rng = random.Random(1)
    for i in range(n_sites):
        h.running(Job(id=i + 1, submit=0.0, size=29, runtime=50_000.0, user="r"), i, 0.0)
    queue = []
    for k in range(n_queued):
        job = Job(
            id=n_sites + k + 1,
            submit=float(k) / 10,
            size=rng.randint(1, 32),
            runtime=rng.uniform(10, 20_000),
            user=f"u{k % 50}",
        )
        h.queue(job, queued_at=job.submit)
        queue.append(job)
    gc.collect()
    t0 = time.perf_counter()
    fits = sum(1 for j in queue if j.size <= 3)
    bare = time.perf_counter() - t0
    t0 = time.perf_counter()
    outcomes = h.decide()
    round_s = time.perf_counter() - t0
    started = sum(1 for o in outcomes if o.status.accepted)
    return {"round_s": round_s, "bare_s": bare, "started": started, "fits": fits}


def run_case(case: dict[str, object], timeout: float | None = None) -> dict[str, object]:
    """Run `case` in a child process; add its whole-process wall time and peak RSS. A case still
    running after `timeout` seconds is stopped: its figures are {"timeout": timeout}."""
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, __file__, "--child", json.dumps(case)], stdout=subprocess.PIPE, text=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return {"timeout": timeout}
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
    ap.add_argument("--quick", action="store_true", help="skip the growth series and the full LCG trace")
    ap.add_argument("--only", type=int, choices=range(1, 9), help="run only this section")
    ap.add_argument(
        "--repeat",
        type=int,
        default=5,
        help="section 6: runs of the bare loop and of the command, alternated (default 5)",
    )
    args = ap.parse_args()
    if args.child:
        case = json.loads(args.child)
        run = round_child if "queued" in case else phases_child if "out" in case else child
        print(json.dumps(run(case)))
        return
    if not PEERS.exists():
        raise SystemExit(f"peer workloads not found at {PEERS}")

    def want(section: int) -> bool:
        return args.only == section if args.only else not (args.quick and section in (3, 4, 7, 8))

    if want(1):
        section_peers()
    ctc = TRACES / "CTC-SP2-1996-3.1-cln.swf.gz"
    if want(2) and ctc.exists():
        section_ctc(ctc)
    if want(3):
        section_growth()
    lcg = TRACES / "LCG.swf.gz"
    if want(4) and lcg.exists():
        section_lcg(lcg)
    if want(5):
        section_round()
    if want(6):
        section_bare_loop(max(1, args.repeat))
    if want(7):
        section_limits()
    if want(8) and ctc.exists():
        section_long_queue(ctc)


def section_peers() -> None:
    """1. FCFS and EASY against pyss on the peers' generated workload."""
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


def section_ctc(ctc: Path) -> None:
    """2. The KOALA-C environment on the full CTC-SP2 trace."""
    print("\n2. KOALA-C multicluster and multicloud environment, full CTC-SP2 (jobs <= 32 processors)")
    for pol in ("ff", "sjf"):
        f = run_case({"workload": str(ctc), "env": "koala-c-multicloud", "policy": pol, "max_size": 32})
        print(
            f"{pol:<6} {f['jobs']:>7} jobs: simulation {f['sim_s']:.2f} s, whole process {f['wall_s']:.2f} s "
            f"(target < 5 s), peak {f['rss_mb']:.0f} MB"
        )


def section_growth() -> None:
    """3. EASY's cost per job as the workload grows."""
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


#: Target: each of these on the full LCG trace (jobs <= 32 processors) within 20 s.
LCG_TARGET_S = 20.0
LCG_STOP_S = 180.0
LCG_CASES = (
    ("ff", "koala-c-multicloud"),
    ("sjf", "koala-c-multicloud"),
    ("rr", "koala-c-multicloud"),
    ("hsdf", "koala-c-multicloud"),
    ("tags-sets", "koala-c-multicloud"),
    ("tags-chain", "koala-c-multicluster"),
)


def section_lcg(lcg: Path) -> None:
    """4. Rounds that do not grow with the queue: the full LCG trace, whose queue grows to tens of
    thousands of jobs on the KOALA-C environments."""
    print("\n4. Full LCG trace (188,041 jobs <= 32 processors), KOALA-C environments, whole process")
    ff_sim: float | None = None
    for pol, env in LCG_CASES:
        f = run_case({"workload": str(lcg), "env": env, "policy": pol, "max_size": 32}, timeout=LCG_STOP_S)
        if "timeout" in f:
            print(
                f"{pol:<10} on {env:<21} stopped after {LCG_STOP_S:.0f} s "
                f"(over {LCG_STOP_S / LCG_TARGET_S:.0f}x the target)"
            )
            continue
        sim = float(f["sim_s"])  # type: ignore[arg-type]
        ff_sim = sim if pol == "ff" else ff_sim
        # FF (queue order, no ranking) measured in the same run: what ranking the queue adds
        versus_ff = f", {sim / ff_sim:.2f}x FF's simulation" if ff_sim else ""
        print(
            f"{pol:<10} on {env:<21} simulation {sim:7.2f} s{versus_ff}, whole process {f['wall_s']:7.2f} s "
            f"({float(f['wall_s']) / LCG_TARGET_S:.2f}x the {LCG_TARGET_S:.0f} s target), peak {f['rss_mb']:.0f} MB"  # type: ignore[arg-type]
        )


#: Target: one round with 100,000 queued jobs and 100 sites within 100 ms.
ROUND_TARGET_S = 0.100


def section_round() -> None:
    """5. One scheduling round with 100,000 queued jobs over 100 sites (sim.harness)."""
    print("\n5. One round, 100,000 queued jobs, 100 clusters of 32 processors with 3 free each")
    # HSDF ranks the heads of the queue's groups of equal (size, predicted runtime): with the
    # default predictor and no job finished yet every job is predicted alike (32 groups); with
    # `exact` every job has its own prediction (100,000 groups, the worst case)
    for pol, predictor in (("ff", None), ("sjf", None), ("rr", None), ("hsdf", None), ("hsdf", "exact")):
        f = run_case({"policy": pol, "queued": 100_000, "sites": 100, "predictor": predictor})
        round_s, bare = float(f["round_s"]), float(f["bare_s"])  # type: ignore[arg-type]
        label = f"{pol} ({predictor})" if predictor else pol
        print(
            f"{label:<12} round {round_s * 1000:8.1f} ms ({round_s / ROUND_TARGET_S:.2f}x the 100 ms target; "
            f"{round_s / bare:.1f}x a bare scan of the queue, {bare * 1000:.1f} ms), "
            f"{f['started']} jobs started of {f['fits']} that fit"
        )


def section_long_queue(ctc: Path) -> None:
    """8. EASY with a long queue: the CTC-SP2 trace (a 430-node machine's load) on one cluster of
    128 processors, so that thousands of jobs wait at once. The simulation step (CPU) of EASY
    through the queue's indexes, of EASY with its plain scan of the whole queue forced (the
    engine before the indexes; same decisions, checked by the total wait), and of FCFS, whose
    rounds look at the queue's head only, on the same jobs."""
    print("\n8. EASY with a long queue: CTC-SP2 on one 128-processor cluster (simulation step, CPU)")
    case = {"workload": str(ctc), "cluster": 128, "max_size": 128, "queue_stats": True}
    indexed = run_case({**case, "policy": "easy"})
    scanned = run_case({**case, "policy": "easy", "scan_queue_max": 10**9})
    fcfs = run_case({**case, "policy": "fcfs"})
    if indexed["wait_sum"] != scanned["wait_sum"]:
        raise SystemExit(f"EASY indexed and scanned differ: total wait {indexed['wait_sum']} and {scanned['wait_sum']}")
    ix, sc, fc = (float(f["sim_cpu_s"]) for f in (indexed, scanned, fcfs))  # type: ignore[arg-type]
    print(
        f"{indexed['jobs']} jobs, {float(indexed['mean_queue']):,.0f} queued on average (Little's law): "  # type: ignore[arg-type]
        f"EASY {ix:.2f} s through the indexes, {sc:.2f} s scanning the whole queue "
        f"({sc / ix:.1f}x; same schedule), FCFS {fc:.2f} s (EASY {ix / fc:.1f}x FCFS)"
    )


def timed_process(argv: list[str]) -> tuple[float, float, float, str]:
    """Run a command to completion: its wall time (s), CPU time (s, user + system), peak RSS
    (MB, of that process alone) and standard output."""
    import os

    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    out = proc.stdout.read()
    _pid, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit(f"{' '.join(argv)} failed with exit code {proc.returncode}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, out


def _same_wait(out_dir: str, loop_out: str, what: str) -> float:
    """The mean wait of isthmus's run in `out_dir`; SystemExit unless it equals the bare loop's."""
    rows = json.loads((Path(out_dir) / "comparison.json").read_text())["policies"]
    ours = float(rows[0]["wait_mean"])
    jobs, theirs = loop_out.split()
    if abs(ours - float(theirs)) > 1e-9 * max(1.0, abs(ours)) or int(rows[0]["jobs_total"]) != int(jobs):
        raise SystemExit(f"{what}: isthmus mean wait {ours} over {rows[0]['jobs_total']} jobs, bare loop {loop_out}")
    return ours


def section_bare_loop(repeat: int = 5) -> None:
    """6. The whole `isthmus simulate` command (read, simulate, write records; with and without
    the default plots) against a bare loop reading the same file and simulating the same policy
    (benchmarks/bare_loop.py; the bench stops unless its mean wait equals isthmus's), and peak
    memory with 300k jobs (targets: within 2x; < 150 MB). The bare loop and the command
    `--no-plots` run `repeat` times each, one after the other, and the ratios are of their
    fastest and of their median runs, in CPU time (user + system; less sensitive than wall time
    to other load on a shared machine): one run each swung the ratio by 0.5 here."""
    isthmus = str(Path(sys.executable).with_name("isthmus"))
    bare = str(Path(__file__).with_name("bare_loop.py"))
    synth100k = str(PEERS / "workloads" / "synth_100k.swf.gz")
    print("\n6. Whole command against a bare 80-line loop, 1 cluster of 128, generated 100k jobs")
    compiled = compile_isthmus()
    print(
        f"   (isthmus's {compiled} modules compiled to bytecode first, as an installed package has them: "
        "with PYTHONDONTWRITEBYTECODE=1 an editable install compiles them at every run, 0.1 s of CPU; "
        f"{repeat} alternated runs of the bare loop and of the command --no-plots, CPU seconds)"
    )

    def median(xs: list[float]) -> float:
        xs = sorted(xs)
        return (xs[(len(xs) - 1) // 2] + xs[len(xs) // 2]) / 2

    with tempfile.TemporaryDirectory() as tmp:
        for pol in ("fcfs", "easy"):
            loops: list[float] = []
            runs: list[float] = []
            for k in range(repeat):
                _, loop_cpu, loop_mb, loop_out = timed_process([sys.executable, bare, synth100k, "128", pol])
                loops.append(loop_cpu)
                out = f"{tmp}/{pol}-{k}"
                cmd = [isthmus, "simulate", "--cluster", "128", "-w", synth100k, "-p", pol, "-o", out, "--no-plots"]
                _, cmd_cpu, cmd_mb, _ = timed_process(cmd)
                _same_wait(out, loop_out, f"{pol} --no-plots")
                runs.append(cmd_cpu)
            print(
                f"{pol:<6} bare loop CPU {min(loops):5.2f} s fastest, {median(loops):5.2f} s median "
                f"({loop_mb:.0f} MB), mean wait {loop_out.split()[1]} s"
            )
            print(
                f"       isthmus simulate -o DIR --no-plots CPU {min(runs):5.2f} s fastest, "
                f"{median(runs):5.2f} s median ({cmd_mb:.0f} MB): {min(runs) / min(loops):.1f}x fastest, "
                f"{median(runs) / median(loops):.1f}x median (target 2x), same mean wait"
            )
            out = f"{tmp}/{pol}--plots"
            cmd = [isthmus, "simulate", "--cluster", "128", "-w", synth100k, "-p", pol, "-o", out, "--plots"]
            _, cmd_cpu, cmd_mb, _ = timed_process(cmd)
            _same_wait(out, loop_out, f"{pol} --plots")
            print(
                f"       isthmus simulate -o DIR --plots    CPU {cmd_cpu:5.2f} s, one run ({cmd_mb:.0f} MB): "
                f"{cmd_cpu / median(loops):.1f}x the bare loop's median"
            )
            f = run_case({"workload": synth100k, "cluster": 128, "policy": pol, "out": f"{tmp}/{pol}-phases"})
            steps = ("startup", "read", "sim", "metrics")  # metrics: with the records files
            print(
                "       CPU by step (--no-plots, same calls in one process, one run): "
                + ", ".join(f"{k.replace('metrics', 'metrics+records')} {float(f[k + '_s']):.2f} s" for k in steps)  # type: ignore[arg-type]
            )
        big = generated(300_000, Path(tmp))
        for plots in ("--no-plots", "--plots"):
            cmd_s, cmd_cpu, cmd_mb, _ = timed_process(
                [
                    isthmus,
                    "simulate",
                    "--cluster",
                    "128",
                    "-w",
                    str(big),
                    "-p",
                    "easy",
                    "-o",
                    f"{tmp}/big{plots}",
                    plots,
                ]
            )
            print(
                f"300k generated jobs, EASY, records written, {plots:<10}: {cmd_s:.2f} s (CPU {cmd_cpu:.2f} s), "
                f"peak {cmd_mb:.0f} MB (target < 150 MB)"
            )


def compile_isthmus() -> int:
    """Compile the imported `isthmus` package's modules to bytecode (`__pycache__`), as pip does
    when it installs a package, and return how many modules it has. An editable install in an
    environment with PYTHONDONTWRITEBYTECODE=1 (this project's machine) has no bytecode and
    compiles every module it imports at every start: 0.1 s of CPU of `isthmus simulate`'s
    start-up that an installed package does not pay."""
    import compileall
    import importlib.util

    spec = importlib.util.find_spec("isthmus")
    assert spec is not None and spec.submodule_search_locations
    root = Path(next(iter(spec.submodule_search_locations)))
    compileall.compile_dir(str(root), quiet=1)
    return sum(1 for _ in root.rglob("*.py"))


#: Target: `isthmus experiment koala-c-limits` (2,880 simulations) within 20 minutes on 2 cores.
LIMITS_TARGET_S = 20 * 60.0
LIMITS_POINTS = 2880
#: a sample of the sweep: every trace and dispatch, chains 1, 4, 7, 10 of 1-10 and limits 5, 40,
#: ..., 180 of 5-180 min (same means as the full grids): 192 points
LIMITS_SAMPLE = ("--chains", "1,4,7,10", "--limits", "5-180/35")


def section_limits() -> None:
    """7. `isthmus experiment koala-c-limits` on 2 workers, a sample of its points scaled up to the
    whole sweep, against what its simulations alone take (the sum of the points' simulation
    times over the two workers, measured in the same run)."""
    import csv
    import os

    isthmus = str(Path(sys.executable).with_name("isthmus"))
    print("\n7. isthmus experiment koala-c-limits, 2 workers, a sample of the sweep")
    with tempfile.TemporaryDirectory() as tmp:
        argv = [isthmus, "experiment", "koala-c-limits", *LIMITS_SAMPLE, "--workers", "2", "-o", tmp]
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL)
        _pid, status, usage = os.wait4(proc.pid, 0)  # usage includes the worker processes
        wall = time.perf_counter() - t0
        if os.waitstatus_to_exitcode(status):
            raise SystemExit(f"{' '.join(argv)} failed")
        with open(Path(tmp) / "koala-c-limits.csv", newline="") as fh:
            rows = list(csv.DictReader(fh))
    cpu = usage.ru_utime + usage.ru_stime
    simulations = sum(float(r["simulation_seconds"]) for r in rows) / 2
    scale = LIMITS_POINTS / len(rows)
    # the whole sweep: the sample's simulations scaled up, its start-up (workers, reading the
    # traces, plots) once; and its CPU time scaled up over two cores
    estimate = (wall - simulations) + simulations * scale
    print(
        f"{len(rows)} of {LIMITS_POINTS} points: {wall:.0f} s wall, {cpu:.0f} s CPU; the simulations alone "
        f"{simulations:.0f} s on two workers ({wall / simulations:.2f}x)\n"
        f"whole sweep: {estimate / 60:.0f} min wall ({estimate / LIMITS_TARGET_S:.2f}x the 20 min target; "
        f"the sample's simulations x {scale:.0f}, its start-up once), {cpu * scale / 2 / 60:.0f} min of CPU "
        f"per core ({cpu * scale / 2 / LIMITS_TARGET_S:.2f}x)"
    )


if __name__ == "__main__":
    main()
