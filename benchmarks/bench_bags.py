"""Live bag of tasks against the same tasks submitted as rigid jobs (KOALA-CS thesis Table 4.1:
launchers against direct submission), on one local cluster of 2 nodes x 2 cores.

Prints the makespan of N short tasks (``true``) run as one bag (launchers pulling from a local
list of `--bag-prefetch` tasks; 1 and 0 are measured) and as N rigid jobs submitted in one batch,
and the ratios, all measured in this run.
Usage: python benchmarks/bench_bags.py [TASKS]
"""

from __future__ import annotations

import sys
import time

from _live import manager
from isthmus.live.client import Client

ENV = """
name = "bench-bags"
round_interval = "event"
[[sites]]
name = "c1"
nodes = 2
cores_per_node = 2
[policies]
allocation = "fcfs"
provisioning = "none"
fairshare = "sep"
"""


def bag_makespan(tasks: int, prefetch: int) -> float:
    """Seconds from submitting a bag of `tasks` tasks until it completed."""
    with manager(ENV, extra=["--bag-prefetch", str(prefetch)]) as (url, token), Client(url, token) as c:
        t0 = time.perf_counter()
        bag = c.submit_bag(sweep={"template": "true {x}", "params": [f"x=1..{tasks}"]})
        while c.job(bag)["state"] not in ("completed", "failed"):
            time.sleep(0.05)
        return time.perf_counter() - t0


def rigid_makespan(tasks: int) -> float:
    """Seconds from submitting `tasks` one-processor jobs in one batch until all ended."""
    with manager(ENV) as (url, token), Client(url, token) as c:
        t0 = time.perf_counter()
        ids = c.submit_many([{"command": "true", "args": [str(i)]} for i in range(tasks)])
        last = max(ids)
        while c.job(last)["state"] != "completed" or c.jobs():
            time.sleep(0.05)
        return time.perf_counter() - t0


def main() -> None:
    """Run the benchmark and print the figures and ratios."""
    tasks = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    bag1 = bag_makespan(tasks, 1)
    bag0 = bag_makespan(tasks, 0)
    rigid = rigid_makespan(tasks)
    print(f"bags: {tasks} tasks of `true` on 4 local processors")
    print(f"  bag, prefetch 1 (local list):      {bag1:6.2f} s  {tasks / bag1:7.1f} tasks/s")
    print(f"  bag, prefetch 0 (round trip each): {bag0:6.2f} s  {tasks / bag0:7.1f} tasks/s")
    print(f"  {tasks} rigid jobs (one batch):     {rigid:6.2f} s  {tasks / rigid:7.1f} tasks/s")
    print(f"  ratios: rigid / bag(prefetch 1) = {rigid / bag1:.2f}, ", end="")
    print(f"bag(prefetch 0) / bag(prefetch 1) = {bag0 / bag1:.2f}")


if __name__ == "__main__":
    main()
