"""Pilot mode against direct submission on a real Slurm (KOALA-CS thesis §4.2, Table 4.1).

The thesis ran 1,000 tasks of 30 s on 68 nodes: direct submission took 152.2 % of the ideal
makespan, launchers (pilot jobs) 105.5 %. Here: TASKS tasks of 1 s on the private Slurm of
scripts/start_slurm.sh (4 emulated nodes x 2 CPUs, 8 slots), through `isthmus server` with one
Slurm site, once in each mode. As in bench_dispatch.py's "bag": every task is queued behind a
job holding every slot, which is then cancelled; the clock runs from that cancellation to the
last end the manager records; the ideal is ceil(TASKS / 8) x 1 s. In pilot mode the pilots are
registered before the clock starts (KOALA-CS's launchers are in place, §4.2.2).
Target: pilot mode within 3 % of the ideal.

Usage: python benchmarks/bench_slurm_modes.py [TASKS=1000] [direct|pilot|all] [REPEAT=1]
Uses $ISTHMUS_TEST_SLURM (a slurm.conf) if set, else starts and stops its own Slurm.
"""

from __future__ import annotations

import contextlib
import math
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from _live import manager
from isthmus.live.client import Client

ROOT = Path(__file__).resolve().parent.parent
SLOTS = 8  # scripts/start_slurm.sh: 4 nodes x 2 CPUs
TARGET = 3.0  # percent over the ideal makespan, pilot mode (the target)
SEED = {"direct": 152.2, "pilot": 105.5}  # KOALA-CS Table 4.1(a), percent of the ideal

ENV = """
name = "bench-slurm-{mode}"
round_interval = "event"
[[sites]]
name = "slurm"
nodes = 4
cores_per_node = 2
[sites.lrm]
driver = "slurm"
mode = "{mode}"
config = "{conf}"
poll_interval = 0.5
[policies]
allocation = "fcfs"
provisioning = "none"
"""


@contextlib.contextmanager
def slurm() -> Iterator[str]:
    """The slurm.conf to use: $ISTHMUS_TEST_SLURM, else a private Slurm started for this run."""
    given = os.environ.get("ISTHMUS_TEST_SLURM")
    if given:
        yield given
        return
    out = subprocess.run(
        ["bash", str(ROOT / "scripts" / "start_slurm.sh")], capture_output=True, text=True, check=True
    ).stdout
    conf = out.strip().splitlines()[-1]
    try:
        yield conf
    finally:
        subprocess.run(["bash", str(ROOT / "scripts" / "stop_slurm.sh"), str(Path(conf).parent)], check=False)


def run(mode: str, tasks: int, conf: str) -> float:
    """One run on a fresh manager; prints and returns the makespan in percent of the ideal."""
    with manager(ENV.format(mode=mode, conf=conf)) as (url, token), Client(url, token) as c:
        deadline = time.time() + 120
        while c.request("GET", "/sites")[0]["online"] < SLOTS:
            if time.time() > deadline:
                raise SystemExit(f"[{mode}] the site did not reach {SLOTS} online processors")
            time.sleep(0.2)
        blocker = c.submit(command="sleep", args=["600"], size=SLOTS)
        while c.job(blocker)["state"] != "running":
            time.sleep(0.05)
        ids = [c.submit(command="sleep", args=["1"]) for _ in range(tasks)]
        t0 = time.time()
        c.cancel(blocker)  # the clock starts: every task is queued
        time.sleep(max(0.0, math.ceil(tasks / SLOTS) - 1.0))
        while c.jobs(all_=True, states=["queued", "starting", "running"], limit=1):
            time.sleep(0.2)
        rows = [c.job(i) for i in ids]
    bad = [r["id"] for r in rows if r["state"] != "completed"]
    if bad:
        raise SystemExit(f"[{mode}] tasks did not complete: {bad[:10]}")
    makespan = max(r["end_time"] for r in rows) - t0
    ideal = math.ceil(tasks / SLOTS) * 1.0
    pct = makespan / ideal * 100
    print(f"  [{mode}] makespan {makespan:.2f} s, ideal {ideal:.2f} s: {pct:.1f} % of the ideal", flush=True)
    return pct


def main() -> None:
    """Run the benchmark and print the figures next to the thesis's."""
    tasks = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    which = sys.argv[2] if len(sys.argv) > 2 else "all"
    repeat = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    if which not in ("direct", "pilot", "all"):
        raise SystemExit(f"mode {which!r}: expected direct, pilot or all")
    print(f"slurm modes: {tasks} tasks x 1 s on {SLOTS} Slurm slots (4 nodes x 2 CPUs), {repeat} run(s) per mode")
    results = {}
    with slurm() as conf:
        for mode in ("direct", "pilot") if which == "all" else (which,):
            results[mode] = statistics.fmean(run(mode, tasks, conf) for _ in range(repeat))
    for mode, pct in results.items():
        verdict = ""
        if mode == "pilot":
            verdict = f"; target within {TARGET:g} % -> {'OK' if pct <= 100 + TARGET else 'MISSED'}"
        print(f"slurm [{mode}]: {pct:.1f} % of the ideal makespan (KOALA-CS Table 4.1: {SEED[mode]} %){verdict}")
    if len(results) == 2:
        print(f"slurm: direct / pilot makespan ratio {results['direct'] / results['pilot']:.2f}")


if __name__ == "__main__":
    main()
