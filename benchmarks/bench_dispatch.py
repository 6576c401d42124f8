"""Pilot dispatch efficiency (KOALA-CS thesis §4.2, Table 4.1): 1000 tasks of 1 s on local cluster slots.

Makespan (first start to last end, as the manager records them) against the ideal; target:
within 2 % of the ideal. As in the thesis, each experiment runs several times (default 5) on a
fresh manager and the mean is the result. Two modes:

* ``bag``: the thesis's experiment, a bag of tasks: every task is submitted before the clock
  starts (they queue behind a job holding every slot, which is then cancelled); the ideal is
  ceil(tasks / slots) x 1 s.
* ``stream``: the tasks are submitted one by one while the first ones already run, so
  submission competes with dispatch for the manager's time; the ideal is the zero-overhead
  greedy schedule of the tasks at the times the manager received them (the client's own
  submission rate is not dispatch overhead).

* ``bare``: the machine's floor, for reference: one Python process runs the same tasks with no
  manager, database or network (spawn `slots` tasks, start the next one whenever one exits,
  one output file per task), as close to "direct" starting as this machine allows.

The client stays idle while the tasks run (it polls only near the ideal end), and each run
prints where the time went: decision to start on the pilot, process start to the end of the
1 s sleep beyond 1 s, and the end on the pilot to the manager recording it.

Usage: python benchmarks/bench_dispatch.py [TASKS=1000] [NODES=4] [CORES=25] [bag|stream|bare|all] [REPEAT=5]
"""

from __future__ import annotations

import heapq
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

from _live import manager
from isthmus.live.client import Client

ENV = """
name = "bench-dispatch"
round_interval = "event"
[[sites]]
name = "slots"
nodes = {nodes}
cores_per_node = {cores}
[policies]
allocation = "fcfs"
provisioning = "none"
"""

TARGET = 2.0  # percent over the ideal makespan (the target)


def greedy_makespan(arrivals: list[float], slots: int, runtime: float) -> float:
    """Makespan from the first arrival of tasks of `runtime` s placed at once on the first free slot."""
    first = min(arrivals)
    free = [first] * slots
    end = first
    for t in sorted(arrivals):
        start = max(t, heapq.heappop(free))
        heapq.heappush(free, start + runtime)
        end = max(end, start + runtime)
    return end - first


def _state_time(row: dict[str, Any], state: str) -> float:
    return float(next(h["time"] for h in reversed(row["history"]) if h["state"] == state))


def run_bare(tasks: int, slots: int) -> float:
    """The floor: a bare local loop starting the tasks; prints and returns its overhead in percent."""
    with tempfile.TemporaryDirectory(prefix="isthmus-bench-bare-") as tmp:
        running: dict[int, subprocess.Popen[bytes]] = {}

        def spawn(i: int) -> None:
            with open(os.path.join(tmp, f"{i}.out"), "wb") as out:
                p = subprocess.Popen(["sleep", "1"], stdout=out, stderr=out, cwd=tmp, start_new_session=True)
            running[p.pid] = p

        t0 = time.time()
        started = 0
        while started < min(slots, tasks):
            spawn(started)
            started += 1
        last = t0
        for _ in range(tasks):
            pid, status = os.wait()
            running.pop(pid).returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
            last = time.time()
            if started < tasks:
                spawn(started)
                started += 1
    ideal = math.ceil(tasks / slots) * 1.0
    over = ((last - t0) / ideal - 1) * 100
    print(f"  [bare] makespan {last - t0:.3f} s, ideal {ideal:.3f} s, overhead {over:+.2f} %", flush=True)
    return over


def run(mode: str, tasks: int, nodes: int, cores: int) -> float:
    """One run on a fresh manager; prints and returns the overhead over the ideal makespan in percent."""
    slots = nodes * cores
    with manager(ENV.format(nodes=nodes, cores=cores)) as (url, token), Client(url, token) as c:
        # wait for every pilot to register: one probe job per slot
        time.sleep(1.0)
        probe = [c.submit(command="true") for _ in range(slots)]
        while any(c.job(i)["state"] != "completed" for i in probe[-5:]):
            time.sleep(0.2)
        blocker = None
        if mode == "bag":
            blocker = c.submit(command="sleep", args=["600"], size=slots)
            while c.job(blocker)["state"] != "running":
                time.sleep(0.05)
        t0 = time.time()
        ids = [c.submit(command="sleep", args=["1"]) for _ in range(tasks)]
        submit_s = time.time() - t0
        if blocker is not None:
            c.cancel(blocker)  # the clock starts: every task is already queued
        time.sleep(max(0.0, math.ceil(tasks / slots) - 0.5 - (time.time() - t0) * (blocker is None)))
        while c.jobs(all_=True, states=["queued", "starting", "running"], limit=1):
            time.sleep(0.1)
        rows = [c.job(i) for i in ids]
    bad = [r["id"] for r in rows if r["state"] != "completed"]
    if bad:
        raise SystemExit(f"tasks did not complete: {bad[:10]}")
    first = min(r["start_time"] for r in rows)
    makespan = max(r["end_time"] for r in rows) - first
    if mode == "bag":
        ideal = math.ceil(tasks / slots) * 1.0
    else:
        ideal = greedy_makespan([r["submit_time"] for r in rows], slots, 1.0)
    over = (makespan / ideal - 1) * 100
    start_lat = [_state_time(r, "running") - _state_time(r, "starting") for r in rows]
    run_over = [r["runtime"] - 1.0 for r in rows]
    end_lat = [r["end_time"] - _state_time(r, "running") - r["runtime"] for r in rows]
    ms = 1000.0
    print(
        f"  [{mode}] makespan {makespan:.3f} s, ideal {ideal:.3f} s, overhead {over:+.2f} %"
        f" (submitted in {submit_s:.2f} s); per task, mean/max ms: decision->start "
        f"{statistics.fmean(start_lat) * ms:.1f}/{max(start_lat) * ms:.0f}, process "
        f"{statistics.fmean(run_over) * ms:.1f}/{max(run_over) * ms:.0f}, end->manager "
        f"{statistics.fmean(end_lat) * ms:.1f}/{max(end_lat) * ms:.0f}",
        flush=True,
    )
    return over


def main() -> None:
    """Run the benchmark and print the figures against the target."""
    tasks = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    nodes = int(sys.argv[2]) if len(sys.argv) > 2 else 4
    cores = int(sys.argv[3]) if len(sys.argv) > 3 else 25
    mode = sys.argv[4] if len(sys.argv) > 4 else "all"
    repeat = int(sys.argv[5]) if len(sys.argv) > 5 else 5
    if mode not in ("bag", "stream", "bare", "all"):
        raise SystemExit(f"mode {mode!r}: expected bag, stream, bare or all")
    print(f"dispatch: {tasks} tasks x 1 s on {nodes * cores} slots ({nodes} pilots x {cores}), {repeat} runs per mode")
    for m in ("bag", "stream", "bare") if mode == "all" else (mode,):
        if m == "bare":
            overs = [run_bare(tasks, nodes * cores) for _ in range(repeat)]
            verdict = "the machine's floor, for reference"
        else:
            overs = [run(m, tasks, nodes, cores) for _ in range(repeat)]
            verdict = f"target within {TARGET:g} % -> {'OK' if statistics.fmean(overs) <= TARGET else 'MISSED'}"
        print(
            f"dispatch [{m}]: mean overhead {statistics.fmean(overs):+.2f} % over the ideal makespan "
            f"(runs {min(overs):+.2f} .. {max(overs):+.2f} %); {verdict}",
            flush=True,
        )


if __name__ == "__main__":
    main()
