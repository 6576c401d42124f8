"""Pilot dispatch efficiency (KOALA-CS Table 4.1): 1000 tasks of 1 s on local cluster slots.

Makespan (first start to last end, as the manager records them) against the ideal
ceil(tasks / slots) x 1 s. Target: within 2 % of the ideal. Two modes, each on a fresh manager:

* ``stream``: the tasks are submitted one by one while the first ones already run (submission
  competes with dispatch for the manager's time);
* ``bag``: a bag of tasks, as in the KOALA-CS experiment: every task is submitted before the
  clock starts (they queue behind a job holding every slot, which is then cancelled).

Usage: python benchmarks/bench_dispatch.py [TASKS] [NODES] [CORES] [stream|bag|both]
"""

from __future__ import annotations

import math
import sys
import time

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


def run(mode: str, tasks: int, nodes: int, cores: int) -> float:
    """One run; prints and returns the overhead over the ideal makespan in percent."""
    slots = nodes * cores
    with manager(ENV.format(nodes=nodes, cores=cores)) as (url, token), Client(url, token) as c:
        # wait for every pilot to register: one probe job per node-slot
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
        wanted = set(ids)
        while True:
            rows = c.jobs(all_=True, states=["completed", "failed"])
            done = [r for r in rows if r["id"] in wanted]
            if len(done) == tasks:
                break
            time.sleep(0.5)
        first = min(r["start_time"] for r in done)
        last = max(r["end_time"] for r in done)
    ideal = math.ceil(tasks / slots) * 1.0
    makespan = last - first
    over = (makespan / ideal - 1) * 100
    print(
        f"dispatch [{mode}]: {tasks} tasks x 1 s on {slots} slots ({nodes} pilots x {cores}); "
        f"submitted in {submit_s:.2f} s"
    )
    print(
        f"  makespan {makespan:.2f} s, ideal {ideal:.2f} s, overhead {over:+.2f} % (target: within 2 %)"
        f" -> {'OK' if over <= 2 else 'MISSED'}"
    )
    return over


def main() -> None:
    """Run the benchmark and print the figures and the target."""
    tasks = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    nodes = int(sys.argv[2]) if len(sys.argv) > 2 else 4
    cores = int(sys.argv[3]) if len(sys.argv) > 3 else 25
    mode = sys.argv[4] if len(sys.argv) > 4 else "both"
    for m in ("stream", "bag") if mode == "both" else (mode,):
        run(m, tasks, nodes, cores)


if __name__ == "__main__":
    main()
