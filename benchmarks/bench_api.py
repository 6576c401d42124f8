"""API submission throughput on SQLite: jobs accepted per second through POST /jobs.

Target: >= 1,000 jobs/s. Jobs queue behind a one-slot cluster held by a long job, so the
figure is the API + engine + database path, not process start-up.
Usage: python benchmarks/bench_api.py [JOBS] [CLIENT THREADS]
"""

from __future__ import annotations

import sys
import threading
import time

from _live import manager
from isthmus.live.client import Client

ENV = """
name = "bench-api"
round_interval = "event"
[[sites]]
name = "one"
nodes = 1
cores_per_node = 1
[policies]
allocation = "fcfs"
provisioning = "none"
"""


def main() -> None:
    """Run the benchmark and print the figure and the target."""
    jobs = int(sys.argv[1]) if len(sys.argv) > 1 else 3000
    threads = int(sys.argv[2]) if len(sys.argv) > 2 else 8
    with manager(ENV) as (url, token):
        with Client(url, token) as c:
            c.submit(command="sleep", args=["600"])
        per = jobs // threads
        errors: list[BaseException] = []

        def work() -> None:
            try:
                with Client(url, token) as cl:
                    for _ in range(per):
                        cl.submit(command="true", args=["x"], requested_runtime=60)
            except BaseException as exc:
                errors.append(exc)

        ts = [threading.Thread(target=work) for _ in range(threads)]
        t0 = time.perf_counter()
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        dt = time.perf_counter() - t0
    rate = per * threads / dt
    print(f"api: {per * threads} submissions from {threads} clients in {dt:.2f} s, errors {len(errors)}")
    print(
        f"  throughput {rate:,.0f} jobs/s on SQLite (target: >= 1,000 jobs/s) -> {'OK' if rate >= 1000 else 'MISSED'}"
    )


if __name__ == "__main__":
    main()
