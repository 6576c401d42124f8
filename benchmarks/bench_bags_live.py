"""KOALA-CS chapter 4 live: the fairness of GEP and SEP (Tables 4.4-4.5, Fig. 4.2) and the delay
bags add to grid jobs (Table 4.3), through a real `isthmus server` with local sites and pilot
processes, each beside the simulator's figure for the same setup, measured in the same run.

Sites (first-fit order): `busy` 2 nodes x 3 cores, `quiet` 1 x 3, `small` 1 x 3 (12 processors).

(a) Fairness: three bags of `sleep 1` tasks submitted together (periodic rounds of 1 s, so that
    they arrive in one round, as the thesis's three runners did); once they hold every processor,
    a seeded stream of local rigid jobs (1-3 processors, `sleep` 2-6 s, about 60% of `busy`; first
    fit puts them on `busy`) runs beside them; each bag's throughput (tasks per minute) and the
    processors it held are measured over a window from the event log, for SEP, GEP and GEP
    without rebalancing (the thesis's GEP, docs/experiments/koala-cs.md). The simulator runs the
    same environment, bags and background, with the launchers' preemption time set to what the
    pilots took in the live run and the task runtime to the live mean.
(b) Grid jobs: with no bags, then while three bags hold every processor (event rounds, the
    server's preemption time PREEMPT s), rigid jobs of 3 processors, of a whole site (6) and a
    grid job over every site (components of 6, 3 and 3 submitted together) wait from submission
    to start (of the last component); the simulator's wait for the same is the preemption time.

Usage: python benchmarks/bench_bags_live.py [WINDOW_SECONDS=40] [REPEATS=2]
"""

from __future__ import annotations

import random
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass

from _live import manager
from bench_bags_slurm import until
from isthmus.config import environment_from_text
from isthmus.engine.bags import BagSettings
from isthmus.live.client import Client
from isthmus.metrics.bags import BagWindow, bag_windows, preemption_delays, spread, start_times
from isthmus.model.events import EventKind, EventLog
from isthmus.model.job import Job, JobKind, PriorityClass
from isthmus.sim.runner import simulate

ENV = """
name = "bench-bags-live"
round_interval = {rounds}
[[sites]]
name = "busy"
nodes = 2
cores_per_node = 3
[[sites]]
name = "quiet"
nodes = 1
cores_per_node = 3
[[sites]]
name = "small"
nodes = 1
cores_per_node = 3
[policies]
allocation = "ff"
provisioning = "none"
fairshare = {{ name = "{policy}", params = {{ rebalance = {rebalance} }} }}
"""
PROCESSORS = 12
BAGS = 3
TASKS = 5000  # per bag: more than any window uses
TASK = 1.0  # seconds each task sleeps
WARMUP = 5.0  # s from the bags holding every processor to the window's start
PREEMPT = 10.0  # the server's --preemption-time in (b)
#: the thesis's figures: SEP's largest spread (Table 4.4(c)); GEP's "almost triple" (Table 4.5(a))
SEED_SEP = 0.186
SEED_GEP = 3.0
POLICIES = (("sep", "true"), ("gep", "true"), ("gep", "false"))


def env_text(policy: str, rebalance: str, rounds: str) -> str:
    """The environment of both parts."""
    return ENV.format(policy=policy, rebalance=rebalance, rounds=rounds)


def background(seed: int, until: float, load: float = 0.6) -> list[tuple[float, int, int]]:
    """The local jobs: (offset s, processors 1-3, sleep 2-6 s), Poisson arrivals at `load` of `busy`'s 6."""
    rng = random.Random(seed)
    rate = load * 6 / (2.0 * 4.0)  # mean size 2, mean runtime 4 s
    out = []
    t = rng.expovariate(rate)
    while t < until:
        out.append((round(t, 2), rng.randint(1, 3), rng.randint(2, 6)))
        t += rng.expovariate(rate)
    return out


def full_at(log: EventLog, bags: Sequence[int]) -> float:
    """The first time the bags held every processor together (GROW and BAG_RELEASE events)."""
    held = 0.0
    for t, kind, job, _site, _vm, value in log.rows():
        if job in bags and kind == EventKind.GROW:
            held += value
        elif job in bags and kind == EventKind.BAG_RELEASE:
            held -= 1
        if held >= PROCESSORS:
            return t
    raise SystemExit("the bags never held every processor")


def held(c: Client) -> int:
    """Processors the bags hold now."""
    return sum(sum(b["progress"]["held"].values()) for b in c.bags())


def submit_bags(c: Client) -> list[int]:
    """Three bags of TASKS `sleep` tasks, one right after the other."""
    return [
        c.submit_bag(sweep={"template": f"sleep {TASK} # {{x}}", "params": [f"x=1..{TASKS}"]}, name=f"runner{k + 1}")
        for k in range(BAGS)
    ]


def sim_bags(runtime: float, at: float = 0.0) -> list[Job]:
    """The three bags for the simulator (ids 1,000,000 on)."""
    return [
        Job(1_000_000 + k, at, 1, runtime, user=f"runner{k + 1}", kind=JobKind.MALLEABLE, tasks=TASKS,
            priority=PriorityClass.SUPER_LOW)
        for k in range(BAGS)
    ]  # fmt: skip


@dataclass
class Fairness:
    """One policy's windows, live and simulated."""

    label: str
    live: list[BagWindow]
    sim: list[BagWindow]
    preempt_live: float
    runtime_live: float


def fairness(policy: str, rebalance: str, window: float, jobs: list[tuple[float, int, int]]) -> Fairness:
    """Part (a) for one policy: live, then the simulator on the same setup."""
    text = env_text(policy, rebalance, "1.0")
    with manager(text) as (url, token), Client(url, token) as c:
        bags = submit_bags(c)
        until(lambda: held(c) >= PROCESSORS, 60, "the bags to hold every processor", 0.05)
        t0 = time.time()
        for offset, size, runtime in jobs:
            time.sleep(max(0.0, t0 + offset - time.time()))
            c.submit(command="sleep", args=[str(runtime)], size=size, name="local")
        time.sleep(max(0.0, t0 + WARMUP + window - time.time()) + 0.5)
        log = c.event_log()
    full = full_at(log, bags)
    live = bag_windows(log, bags, full + WARMUP, full + WARMUP + window)
    delays = preemption_delays(log)
    ends = [v for _t, k, j, _s, _v, v in log.rows() if k == EventKind.TASK_END and j in bags]
    p_live = statistics.mean(delays) if delays else 0.0
    r_live = statistics.mean(ends)
    env = environment_from_text(text, "toml", file="<bench_bags_live>")
    settings = BagSettings(preemption_time=p_live)
    probe = simulate(env, [], bags=sim_bags(r_live), bag_settings=settings, until=10.0)
    s_full = full_at(probe.log, [b.id for b in sim_bags(r_live)])
    rigid = [Job(i + 1, s_full + off, size, float(rt), user="local") for i, (off, size, rt) in enumerate(jobs)]
    res = simulate(env, rigid, bags=sim_bags(r_live), bag_settings=settings, until=s_full + WARMUP + window + 1)
    sim = bag_windows(res.log, [b.id for b in sim_bags(r_live)], s_full + WARMUP, s_full + WARMUP + window)
    label = policy.upper() + ("" if rebalance == "true" else " (no rebalancing)")
    return Fairness(label, live, sim, p_live, r_live)


GRID_PROBES: tuple[tuple[str, tuple[int, ...]], ...] = (
    ("3 processors", (3,)),
    ("a whole site (6)", (6,)),
    ("the grid: 6 + 3 + 3", (6, 3, 3)),
)


def probe_wait(c: Client, sizes: Sequence[int]) -> float:
    """Submit one job per size together; seconds from submission to the last one's start, after all ended."""
    ids = c.submit_many([{"command": "sleep", "args": ["1"], "size": s, "name": "grid"} for s in sizes])
    for i in ids:
        until(lambda i=i: c.job(i)["state"] in ("completed", "failed"), 60, f"grid job {i}", 0.05)
    jobs = [c.job(i) for i in ids]
    if any(j["state"] != "completed" for j in jobs):
        raise SystemExit(f"a grid job failed: {jobs}")
    return max(j["start_time"] for j in jobs) - min(j["submit_time"] for j in jobs)


def grid(repeats: int) -> dict[str, tuple[list[float], list[float], float]]:
    """Part (b): for each probe, (waits without bags, waits with bags, the simulator's wait with bags)."""
    text = env_text("sep", "true", '"event"')
    out: dict[str, tuple[list[float], list[float], float]] = {}
    with (
        manager(text, extra=["--preemption-time", str(PREEMPT)]) as (url, token),
        Client(url, token) as c,
    ):
        alone = {name: [probe_wait(c, sizes) for _ in range(repeats)] for name, sizes in GRID_PROBES}
        submit_bags(c)
        busy: dict[str, list[float]] = {name: [] for name, _ in GRID_PROBES}
        for _ in range(repeats):
            for name, sizes in GRID_PROBES:
                until(lambda: held(c) >= PROCESSORS, 60, "the bags to hold every processor again", 0.05)
                busy[name].append(probe_wait(c, sizes))
    env = environment_from_text(text, "toml", file="<bench_bags_live>")
    for name, sizes in GRID_PROBES:
        jobs = [Job(i + 1, 5.0, s, 1.0, user="grid") for i, s in enumerate(sizes)]
        res = simulate(env, jobs, bags=sim_bags(TASK), bag_settings=BagSettings(preemption_time=PREEMPT), until=30.0)
        starts = start_times(res.log)
        out[name] = (alone[name], busy[name], max(starts[j.id] for j in jobs) - 5.0)
    return out


def show(label: str, windows: Sequence[BagWindow]) -> str:
    """One line: each bag's tasks/min and mean processors held, and the spread."""
    rates = [w.per_minute for w in windows]
    bags = "  ".join(f"{w.per_minute:6.1f}/min ({w.mean_held:.2f} procs, {w.preemptions} preempted)" for w in windows)
    return f"    {label:9s} {bags}  spread {spread(rates):7.1%}  max/min {max(rates) / min(rates):.2f}x"


def main() -> None:
    """Run both parts and print the figures beside the thesis's and the simulator's."""
    window = float(sys.argv[1]) if len(sys.argv) > 1 else 40.0
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    jobs = background(seed=1, until=WARMUP + window)
    runs = [fairness(p, r, window, jobs) for p, r in POLICIES]
    waits = grid(repeats)
    print("KOALA-CS live: sites busy 6, quiet 3, small 3 processors; three bags of `sleep 1` tasks")
    print(f"(a) fairness over a {window:.0f} s window, {len(jobs)} local jobs (1-3 procs, 2-6 s) on `busy`:")
    for r in runs:
        print(f"  {r.label}: live preemption {r.preempt_live:.3f} s, task {r.runtime_live:.3f} s")
        print(show("live", r.live))
        print(show("simulated", r.sim))
    print(f"  the thesis: SEP spread at most {SEED_SEP:.1%} (Table 4.4); GEP up to ~{SEED_GEP:.0f}x (Table 4.5(a))")
    print(f"(b) grid jobs (`sleep 1`) while three bags hold all {PROCESSORS} processors, preemption {PREEMPT:.0f} s:")
    for name, (alone, busy, sim) in waits.items():
        extra = statistics.mean(busy) - statistics.mean(alone)
        print(
            f"  {name:20s} wait without bags {statistics.mean(alone):.3f} s, with bags "
            f"{', '.join(f'{w:.3f}' for w in busy)} s (+{extra:.3f} s); simulated {sim:.1f} s"
        )
    print("  the thesis (Table 4.3): grid jobs +8.5, -0.1, +8.2 s (less than 10 s); local jobs +7.9-29.2 s (Table 4.2)")


if __name__ == "__main__":
    main()
