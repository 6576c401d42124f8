"""Random search for jobs that bags of tasks shrink for and that then wait past the preemption time.

Each case is a small random environment (one to three clusters of 4-16 processors, 4-12 rigid
jobs, one to three bags, a preemption time P of 5-60 s) run with an allocation policy and SEP
(its default walk); a case is printed, one line, when a job named by a shrink starts more than P
after the first shrink naming it: `(cluster sizes, P, jobs [(id, submit, size, runtime)], bags
[(submit, task runtime, tasks)]) {job: wait}`. The last line counts them.

    .venv/bin/python scripts/bag_overrun_search.py --allocation easy --cases 3000

(docs/experiments/koala-cs.md, "What remains": 7 of 3,000 for EASY, 0 for FCFS and First-Fit.)
"""

from __future__ import annotations

import argparse
import random

from isthmus.engine.bags import BagSettings
from isthmus.model.environment import Environment, PolicyChoice
from isthmus.model.events import EventKind
from isthmus.model.job import Job, JobKind, PriorityClass
from isthmus.model.site import Site
from isthmus.sim.runner import simulate

Case = tuple[list[int], float, list[tuple[int, float, int, float]], list[tuple[float, float, int]]]


def random_case(seed: int) -> Case:
    """The case of `seed`."""
    rng = random.Random(seed)
    sites = rng.choice([[8], [4, 4], [6], [4, 4, 4], [16]])
    preemption = rng.choice([5.0, 10.0, 20.0, 30.0, 60.0])
    t = 0.0
    jobs = []
    for i in range(rng.randint(4, 12)):
        t += rng.randint(0, 30)
        jobs.append((i + 1, t, rng.randint(1, max(sites)), float(rng.randint(5, 60))))
    bags = [
        (float(rng.randint(0, 60)), float(rng.randint(5, 100)), rng.randint(5, 60)) for _ in range(rng.randint(1, 3))
    ]
    return sites, preemption, jobs, bags


def overruns(case: Case, allocation: str) -> dict[int, float]:
    """Job id -> wait from the first shrink naming it to its start, for the jobs waiting past P."""
    sites, preemption, jobs, bags = case
    env = Environment("search", tuple(Site(f"s{i}", nodes=n) for i, n in enumerate(sites)), round_interval=None)
    rigid = [Job(i, s, n, r) for i, s, n, r in jobs]
    malleable = [
        Job(100 + k, s, 1, r, user=f"u{k}", kind=JobKind.MALLEABLE, tasks=n, priority=PriorityClass.SUPER_LOW)
        for k, (s, r, n) in enumerate(bags)
    ]
    result = simulate(
        env,
        rigid,
        allocation,
        "none",
        bags=malleable,
        fairshare=PolicyChoice("sep", {}),
        bag_settings=BagSettings(preemption_time=preemption),
    )
    first: dict[int, float] = {}
    start: dict[int, float] = {}
    for e in result.log:
        if e.kind is EventKind.SHRINK and e.task >= 0:
            first.setdefault(e.task, e.time)
        elif e.kind is EventKind.START:
            start[e.job] = e.time
    waits = {j: start.get(j, float("inf")) - t for j, t in first.items()}
    return {j: w for j, w in waits.items() if w > preemption + 1e-9}


def main() -> None:
    """Run the search and print the cases with a named job waiting past P."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--allocation", default="easy", help="allocation policy (default easy)")
    parser.add_argument("--cases", type=int, default=3000, help="number of random cases (default 3000)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the first case (default 0)")
    args = parser.parse_args()
    bad = 0
    for seed in range(args.seed, args.seed + args.cases):
        case = random_case(seed)
        found = overruns(case, args.allocation)
        if found:
            bad += 1
            print(repr(case), found, flush=True)
    print(f"{bad} of {args.cases} cases with a job waiting past P after the first shrink naming it")


if __name__ == "__main__":
    main()
