"""The per-job objects of the simulator's hot path, built the fast way against the plain way, in
one process (docs/simulation.md, "Fast builders"): CPU seconds and their ratio, the two ways
alternating `--repeat` times, medians printed.

- `rigid_job` (slot writers) against `Job(...)` (the frozen dataclass's `__init__`) for every job
  of a workload table (what `isthmus simulate` builds, one a job as it arrives);
- `start_job` against `StartJob(...)`, one a job;
- `EventLog.add` without the vm column against the log of an older tree (`--base`, e.g. main's
  `src` extracted to /tmp/perjob-base), three events a job.

Run:

    git -C ../main archive HEAD src | tar -x -C /tmp/perjob-base
    .venv/bin/python benchmarks/bench_builders.py --base /tmp/perjob-base
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

from isthmus.decisions.start import StartJob, start_job
from isthmus.model import jobtable
from isthmus.model.events import EventLog
from isthmus.model.job import Job, rigid_job
from isthmus.workloads.workload import load_workload

ROOT = Path(__file__).resolve().parents[1]
SYNTH = ROOT.parent / "shared" / "peers" / "workloads" / "synth_100k.swf.gz"


def cpu(fn: Callable[[], object]) -> float:
    """CPU seconds `fn` takes."""
    c = time.process_time()
    fn()
    return time.process_time() - c


def load_event_log(tree: Path) -> type:
    """The EventLog class of `tree`'s model/events.py, loaded under another module name."""
    spec = importlib.util.spec_from_file_location("base_events", tree / "src" / "isthmus" / "model" / "events.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["base_events"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    cls: type = module.EventLog
    return cls


def main() -> None:
    """Measure each pair, alternating, and print medians and ratios."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", type=Path, help="an older isthmus tree whose EventLog.add takes a vm")
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--workload", type=Path, default=SYNTH)
    args = ap.parse_args()
    table = load_workload(args.workload, lazy=True).jobs
    if not isinstance(table, jobtable.JobTable):
        raise SystemExit(f"{args.workload}: not read as a job table")
    n = len(table)

    def rows(build: Callable[..., Job]) -> Callable[[], object]:
        def go() -> object:
            jobtable.rigid_job = build  # type: ignore[assignment]
            try:
                return table.to_list()
            finally:
                jobtable.rigid_job = rigid_job

        return go

    def starts_fast() -> None:
        for i in range(n):
            start_job(i, 0, None, "fcfs")

    def starts_plain() -> None:
        for i in range(n):
            StartJob(i, 0, None, by="fcfs")

    def log_new() -> None:
        add = EventLog().add
        for i in range(n):
            add(1.0, 0, i, -1, 4.0, -1, -1)
            add(2.0, 1, i, 0, 4.0, 1, 0)
            add(3.0, 2, i, 0, 0.0, 1, -1)

    pairs: list[tuple[str, Callable[[], object], Callable[[], object]]] = [
        ("Job per table row", rows(rigid_job), rows(Job)),
        ("StartJob per job", starts_fast, starts_plain),
    ]
    if args.base:
        base_log = load_event_log(args.base)

        def log_old() -> None:
            add = base_log().add
            for i in range(n):
                add(1.0, 0, i, -1, -1, 4.0, -1, -1)
                add(2.0, 1, i, 0, -1, 4.0, 1, 0)
                add(3.0, 2, i, 0, -1, 0.0, 1, -1)

        pairs.append(("EventLog.add, 3 per job", log_new, log_old))
    print(f"{n} jobs ({args.workload.name}), medians of {args.repeat} alternating runs, CPU s")
    print(f"{'what':26} {'fast':>7} {'plain':>7} {'ratio':>6}")
    for name, fast, plain in pairs:
        a, b = [], []
        for _ in range(args.repeat):
            a.append(cpu(fast))
            b.append(cpu(plain))
        fa, fb = statistics.median(a), statistics.median(b)
        print(f"{name:26} {fa:7.3f} {fb:7.3f} {fa / fb:5.2f}x")


if __name__ == "__main__":
    main()
