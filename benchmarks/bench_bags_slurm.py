"""How long a local Slurm user's job waits when a bag of tasks holds every node (KOALA-CS §3.2.1,
Tables 4.2-4.3: the seed detected local jobs every 10 s and measured 8-29 s).

A pilot-mode Slurm site with a position per node of the Slurm of scripts/start_slurm.sh
(`poll_interval` 0.3 s) beside a local cluster; a bag of one-second tasks grows on every
processor; then JOBS local jobs (`sbatch -N1`, one whole node), one after the other, each
submitted once the bag holds every Slurm processor again. Prints each job's wait (submission to
RUNNING as squeue shows it, polled every 20 ms).

Usage: python benchmarks/bench_bags_slurm.py [JOBS=3]
Uses $ISTHMUS_TEST_SLURM (a slurm.conf) if set, else starts and stops its own Slurm.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

from _live import manager
from bench_slurm_modes import slurm
from isthmus.live.client import Client

ENV = """
name = "bench-bags-slurm"
round_interval = "event"
[[sites]]
name = "fs1"
nodes = {nodes}
cores_per_node = 2
[sites.lrm]
driver = "slurm"
config = "{conf}"
poll_interval = 0.3
[[sites]]
name = "local"
nodes = 1
cores_per_node = 2
[policies]
allocation = "ff"
provisioning = "none"
fairshare = "sep"
"""


def until(pred: Callable[[], bool], timeout: float, what: str, interval: float = 0.02) -> None:
    """Poll `pred` until true; SystemExit naming `what` after `timeout` seconds."""
    deadline = time.time() + timeout
    while not pred():
        if time.time() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(interval)


def main() -> None:
    """Run the benchmark and print the waits."""
    jobs = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    with slurm() as conf:

        def sl(*args: str) -> str:
            env = {**os.environ, "SLURM_CONF": conf}
            return subprocess.run(list(args), env=env, capture_output=True, text=True, check=False).stdout.strip()

        nodes = len(set(sl("sinfo", "-h", "-N", "-o", "%N").split()))
        with manager(ENV.format(conf=conf, nodes=nodes)) as (url, token), Client(url, token) as c:
            bag = c.submit_bag(sweep={"template": "sleep 1 # {x}", "params": ["x=1..100000"]})
            waits = []
            for _ in range(jobs):
                until(lambda: c.job(bag)["bag"]["held"].get("fs1") == 2 * nodes, 120, "the bag on every Slurm node")
                t0 = time.time()
                job = sl("sbatch", "--parsable", "-N1", "--ntasks-per-node=2", "--wrap=sleep 1").split(";")[0]
                until(lambda j=job: sl("squeue", "-h", "-j", j, "-o", "%T") in ("RUNNING", "COMPLETED", ""), 120, "it")
                waits.append(time.time() - t0)
                until(lambda j=job: sl("squeue", "-h", "-j", j, "-o", "%T") == "", 120, "its end", 0.1)
            c.cancel(bag)
    print(f"bags on Slurm: a local job (one whole node) while a bag holds all {nodes} Slurm nodes")
    print(f"  waits: {', '.join(f'{w:.2f}' for w in waits)} s; mean {statistics.mean(waits):.2f} s")
    print("  the seed (KOALA-CS Tables 4.2-4.3): 8-29 s with local jobs detected every 10 s")


if __name__ == "__main__":
    main()
