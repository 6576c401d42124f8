"""Bags of tasks from the event log: makespan, throughput, tasks done, work lost; and the delay
bags add to the other jobs.

Definitions (KOALA-CS thesis §4.1): a bag's makespan is the time from its submission to the
completion of its last task; its throughput the tasks completed per second of makespan (per
second from its submission to the horizon while unfinished). Work lost (wasted seconds) is the
sum of the run times of the preempted task runs (TASK_PREEMPT values); processor-seconds are
those the bag held (from each GROW to each BAG_RELEASE). The delay bags add to a rigid job is
its start time in the run with bags less its start time in the same run without them (§4.3
measures it as makespans with and without the CS load).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from isthmus.metrics.tables import EventColumns
from isthmus.model.events import EventKind, EventLog
from isthmus.model.job import Job


@dataclass(frozen=True, slots=True)
class BagRecord:
    """One bag's figures, from the log."""

    bag: int
    user: str
    submit: float
    tasks: int
    done: int
    #: task completions beyond the first of the same task (0 unless a task completed twice)
    repeated: int
    first_start: float
    end: float
    makespan: float
    throughput: float
    preemptions: int
    wasted_seconds: float
    processor_seconds: float
    peak_processors: int

    def to_dict(self) -> dict[str, Any]:
        """A JSON-friendly view (NaN as None)."""
        return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in asdict(self).items()}


def bag_records(log: EventLog, bags: Mapping[int, Job] | None = None, horizon: float | None = None) -> list[BagRecord]:
    """One record per bag that arrived (BAG_SUBMIT), in arrival order. `bags` gives users;
    `horizon` (default: the last event) closes what is still open."""
    c = log.columns()
    time = np.frombuffer(c["time"], dtype=np.float64)
    kind = np.frombuffer(c["kind"], dtype=np.int8)
    job = np.frombuffer(c["job"], dtype=np.int64)
    value = np.frombuffer(c["value"], dtype=np.float64)
    task = np.frombuffer(c["task"], dtype=np.int64)
    end_of_log = float(time[-1]) if len(time) else 0.0
    h = end_of_log if horizon is None else max(horizon, end_of_log)
    out = []
    for i in np.flatnonzero(kind == int(EventKind.BAG_SUBMIT)):
        bag_id = int(job[i])
        mine = job == bag_id
        submit = float(time[i])
        ends = mine & (kind == int(EventKind.TASK_END))
        done_tasks = task[ends]
        starts = time[mine & (kind == int(EventKind.TASK_START))]
        finished = time[mine & (kind == int(EventKind.BAG_END))]
        end = float(finished[0]) if finished.size else math.nan
        span = (end if finished.size else h) - submit
        pre = mine & (kind == int(EventKind.TASK_PREEMPT))
        grow = mine & (kind == int(EventKind.GROW))
        rel = mine & (kind == int(EventKind.BAG_RELEASE))
        held_s = float(np.sum(value[grow] * (h - time[grow])) - np.sum(value[rel] * (h - time[rel])))
        steps = np.where(grow, value, 0.0)[grow | rel] - np.where(rel, value, 0.0)[grow | rel]
        peak = int(np.max(np.cumsum(steps))) if steps.size else 0
        unique = int(np.unique(done_tasks).size)
        job_info = bags.get(bag_id) if bags is not None else None
        out.append(
            BagRecord(
                bag=bag_id,
                user=job_info.user if job_info is not None else "",
                submit=submit,
                tasks=int(value[i]),
                done=unique,
                repeated=int(done_tasks.size - unique),
                first_start=float(starts.min()) if starts.size else math.nan,
                end=end,
                makespan=span if finished.size else math.nan,
                throughput=unique / span if span > 0 else math.nan,
                preemptions=int(np.count_nonzero(pre)),
                wasted_seconds=float(np.sum(value[pre])),
                processor_seconds=held_s,
                peak_processors=peak,
            )
        )
    return out


def shrink_waits(log: EventLog) -> dict[str, Any]:
    """How long the rigid jobs that bags gave processors back for waited from the first such
    shrink (a SHRINK event naming the job in its task column) to their start: the wait bags
    caused them directly, which unobtrusiveness keeps within the preemption time. Returns the
    number of such jobs, the mean and max of that wait, and the jobs not started by the end."""
    c = log.columns()
    kind = np.frombuffer(c["kind"], dtype=np.int8)
    time = np.frombuffer(c["time"], dtype=np.float64)
    task = np.frombuffer(c["task"], dtype=np.int64)
    first: dict[int, float] = {}
    for i in np.flatnonzero((kind == int(EventKind.SHRINK)) & (task >= 0)):
        first.setdefault(int(task[i]), float(time[i]))
    starts = start_times(log)
    waits = np.array([starts[j] - t for j, t in first.items() if j in starts], dtype=np.float64)
    return {
        "jobs": len(first),
        "wait_mean": float(waits.mean()) if waits.size else None,
        "wait_max": float(waits.max()) if waits.size else None,
        "not_started": sorted(j for j in first if j not in starts),
    }


def start_times(log: EventLog) -> dict[int, float]:
    """The start time of the last run of each rigid job that started (START events)."""
    c = log.columns()
    kind = np.frombuffer(c["kind"], dtype=np.int8)
    idx = np.flatnonzero(kind == int(EventKind.START))
    job = np.frombuffer(c["job"], dtype=np.int64)[idx]
    time = np.frombuffer(c["time"], dtype=np.float64)[idx]
    return dict(zip(job.tolist(), time.tolist(), strict=True))


def rigid_delay(without: EventLog, with_bags: EventLog, jobs: Mapping[int, Job]) -> dict[str, Any]:
    """How much the bags delayed the rigid jobs `jobs`: each job's start with bags less its start
    without (the same workload, policies and environment). Returns the jobs compared (started in
    both runs), the mean wait without and with bags, the delay added per job (mean, 95th
    percentile, max, and how many jobs were delayed at all), and the jobs that started without
    bags but not with them."""
    a = start_times(without)
    b = start_times(with_bags)
    both = [j for j in jobs if j in a and j in b]
    delays = np.array([b[j] - a[j] for j in both], dtype=np.float64)
    waits_a = np.array([a[j] - jobs[j].submit for j in both], dtype=np.float64)
    waits_b = np.array([b[j] - jobs[j].submit for j in both], dtype=np.float64)

    def stat(x: np.ndarray[Any, np.dtype[np.float64]], f: str) -> float | None:
        if not x.size:
            return None
        return float(getattr(np, f)(x)) if f != "p95" else float(np.percentile(x, 95))

    return {
        "jobs": len(both),
        "wait_mean_without_bags": stat(waits_a, "mean"),
        "wait_mean_with_bags": stat(waits_b, "mean"),
        "delay_mean": stat(delays, "mean"),
        "delay_p95": stat(delays, "p95"),
        "delay_max": stat(delays, "max"),
        "jobs_delayed": int(np.count_nonzero(delays > 1e-9)),
        "not_started_with_bags": sorted(j for j in jobs if j in a and j not in b),
    }


@dataclass(frozen=True, slots=True)
class BagWindow:
    """One bag's figures over a window of time [start, end) (KOALA-CS thesis §4.4: throughput and
    preemptions of runners measured side by side)."""

    bag: int
    #: task runs that completed in the window (TASK_END events)
    done: int
    #: `done` per minute of the window
    per_minute: float
    #: task runs preempted in the window (TASK_PREEMPT events)
    preemptions: int
    #: the processors the bag held, averaged over the window
    mean_held: float


def bag_windows(log: EventLog, bags: Sequence[int], start: float, end: float) -> list[BagWindow]:
    """The figures of each bag of `bags` (job ids, in that order) over [start, end): task ends
    and preemptions counted in it, and the processors held (GROW adds its value, BAG_RELEASE
    takes one) averaged over it. ValueError when the window is empty."""
    if not end > start:
        raise ValueError(f"the window must end after it starts, got [{start}, {end})")
    c = EventColumns.from_log(log, copy=False)
    time, kind, job, value = c.time, c.kind, c.job, c.value
    inside = (time >= start) & (time < end)
    out = []
    for bag in bags:
        mine = job == bag
        done = int(np.count_nonzero(mine & inside & (kind == int(EventKind.TASK_END))))
        pre = int(np.count_nonzero(mine & inside & (kind == int(EventKind.TASK_PREEMPT))))
        steps = mine & ((kind == int(EventKind.GROW)) | (kind == int(EventKind.BAG_RELEASE)))
        t = time[steps]
        d = np.where(kind[steps] == int(EventKind.GROW), value[steps], -1.0)
        level = np.cumsum(d)  # the processors held from each step on (the log is in time order)
        before = level[t < start]
        held_at_start = float(before[-1]) if before.size else 0.0
        within = (t >= start) & (t < end)
        edges = np.concatenate([[start], t[within], [end]])
        levels = np.concatenate([[held_at_start], level[within]])
        mean_held = float(np.sum(levels * np.diff(edges)) / (end - start))
        out.append(BagWindow(bag, done, done * 60.0 / (end - start), pre, mean_held))
    return out


def spread(values: Sequence[float]) -> float:
    """(largest − smallest) / smallest of `values` (KOALA-CS §4.4: the difference in throughput
    as a fraction of the slowest bag's); inf when the smallest is 0, nan when there are none."""
    if not values:
        return math.nan
    low, high = min(values), max(values)
    return (high - low) / low if low > 0 else math.inf


def preemption_delays(log: EventLog) -> list[float]:
    """Seconds from each preempted task run (TASK_PREEMPT on a bag's processor) to the release
    of that processor (its next BAG_RELEASE): how long launchers took to give processors back.
    In simulation this is the preemption time; live, the pilot's confirmation (at most that)."""
    c = EventColumns.from_log(log, copy=False)
    time, kind, job, slot = c.time, c.kind, c.job, c.vm
    pending: dict[tuple[int, int], float] = {}
    out = []
    for i in np.flatnonzero((kind == int(EventKind.TASK_PREEMPT)) | (kind == int(EventKind.BAG_RELEASE))):
        key = (int(job[i]), int(slot[i]))
        if kind[i] == int(EventKind.TASK_PREEMPT):
            pending.setdefault(key, float(time[i]))
        elif key in pending:
            out.append(float(time[i]) - pending.pop(key))
    return out
