"""Live bag of tasks against the same tasks submitted as rigid jobs (KOALA-CS thesis Table 4.1:
launchers against direct submission), on one local cluster of 2 nodes x 2 cores.

Prints the makespan of N short tasks (``true``) run as one bag (launchers pulling from a local
list of `--bag-prefetch` tasks; 1 and 0 are measured) and as N rigid jobs submitted in one batch,
and the ratios, all measured in this run; then the wait of rigid jobs arriving while a bag holds
every processor (the delay a bag adds to other jobs).
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


def rigid_waits(jobs: int) -> list[float]:
    """Waits (start - submit, s) of `jobs` rigid jobs of 3 of the 4 processors submitted one after
    the other while a bag of one-second tasks holds every processor: the delay bags add."""
    waits = []
    with manager(ENV) as (url, token), Client(url, token) as c:
        c.submit_bag(sweep={"template": "sleep 1 # {x}", "params": ["x=1..1000"]})
        for _ in range(jobs):
            while sum(c.bags()[0]["progress"]["held"].values()) < 4:
                time.sleep(0.05)
            rigid = c.submit(command="true", size=3)
            while (j := c.job(rigid))["state"] != "completed":
                time.sleep(0.05)
            waits.append(j["start_time"] - j["submit_time"])
    return waits


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
    waits = rigid_waits(5)
    print(f"bags: {tasks} tasks of `true` on 4 local processors")
    print(f"  bag, prefetch 1 (local list):      {bag1:6.2f} s  {tasks / bag1:7.1f} tasks/s")
    print(f"  bag, prefetch 0 (round trip each): {bag0:6.2f} s  {tasks / bag0:7.1f} tasks/s")
    print(f"  {tasks} rigid jobs (one batch):     {rigid:6.2f} s  {tasks / rigid:7.1f} tasks/s")
    print(f"  ratios: rigid / bag(prefetch 1) = {rigid / bag1:.2f}, ", end="")
    print(f"bag(prefetch 0) / bag(prefetch 1) = {bag0 / bag1:.2f}")
    print(
        f"  a rigid job of 3 processors arriving while a bag holds all 4 waits {sum(waits) / len(waits):.3f} s "
        f"on average, at most {max(waits):.3f} s ({len(waits)} jobs; preemption time 10 s, the seed: < 30 s)"
    )


if __name__ == "__main__":
    main()
