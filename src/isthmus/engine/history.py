"""The runtime history the predictors read, rebuilt from an event log after a restart.

An engine keeps, per user, the runtimes of the user's last two completed runs
(`Engine.history`) and the sum and count of every completed run's runtime (`runtime_sum`,
`runtime_count`): the runtime predictors (`isthmus.policies.prediction`) read them through the
view, and SJF and HSDF order their queues by the predictions made when each job arrived. A
restarted live manager starts a new engine; without this its predictors would predict from
nothing. The log a live manager stores holds what is needed: each completed run is an END
event, its runtime is the time from its run's START to its END (what the engine measured), and
each job's SUBMIT event marks what had completed when it arrived.

`HistoryReplay` feeds the completed runs into a new engine in completion order. Recovery asks
it to catch up to each job's arrival before restoring that job, so that the job is predicted
from the history it arrived to (as it was before the restart), then to finish.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from isthmus.engine.runs import record_completion
from isthmus.model.events import EventKind, EventLog

if TYPE_CHECKING:
    from isthmus.engine.engine import Engine

__all__ = ["CompletedRun", "HistoryReplay", "arrivals", "completed_runs"]

_START = int(EventKind.START)
_END = int(EventKind.END)
_SUBMIT = int(EventKind.SUBMIT)


class CompletedRun(NamedTuple):
    """One run that completed: the position of its END in the log, its job's user and its runtime (s)."""

    position: int
    user: str
    runtime: float


def completed_runs(log: EventLog, users: Mapping[int, str]) -> list[CompletedRun]:
    """Every run of a job that completed in `log` (an END event), in completion order, with the
    user of its job (from `users`, by job id) and its runtime: its END's time minus the time of
    the START of the same run. A run whose START or whose job's user is missing from the log or
    from `users` cannot be measured and is left out."""
    cols = log.columns()
    kind = np.frombuffer(cols["kind"], dtype=np.int8)
    time, job, run = cols["time"], cols["job"], cols["run"]
    started: dict[tuple[int, int], float] = {}
    out: list[CompletedRun] = []
    for i in np.flatnonzero((kind == _START) | (kind == _END)).tolist():
        key = (job[i], run[i])
        if kind[i] == _START:
            started[key] = time[i]
            continue
        start = started.pop(key, None)
        user = users.get(job[i])
        if start is not None and user is not None:
            out.append(CompletedRun(i, user, time[i] - start))
    return out


def arrivals(log: EventLog) -> dict[int, int]:
    """Where each job's (first) SUBMIT is in `log`, by job id."""
    kind = np.frombuffer(log.columns()["kind"], dtype=np.int8)
    job = log.columns()["job"]
    out: dict[int, int] = {}
    for i in np.flatnonzero(kind == _SUBMIT).tolist():
        out.setdefault(job[i], i)
    return out


class HistoryReplay:
    """Feeds completed runs into `engine`'s runtime history in completion order: up to a job's
    arrival (`before_arrival`), then all of them (`finish`). The history only moves forward: a
    job restored after another that arrived later is predicted from the later history."""

    def __init__(self, engine: Engine, runs: Iterable[CompletedRun], arrival: Mapping[int, int]) -> None:
        self.engine = engine
        self.runs = list(runs)
        #: where each job arrived in the log, by job id
        self.arrival = arrival
        #: how many of `runs` were fed so far
        self.fed = 0

    @classmethod
    def from_log(cls, engine: Engine, log: EventLog, users: Mapping[int, str]) -> HistoryReplay:
        """The replay of the completed runs of `log` (jobs' users from `users`) into `engine`."""
        return cls(engine, completed_runs(log, users), arrivals(log))

    def until(self, position: int) -> None:
        """Feed the runs that completed before `position` in the log."""
        runs, k = self.runs, self.fed
        while k < len(runs) and runs[k].position < position:
            record_completion(self.engine, runs[k].user, runs[k].runtime)
            k += 1
        self.fed = k

    def before_arrival(self, job_id: int) -> None:
        """Feed the runs that had completed when job `job_id` arrived (nothing more when its
        arrival is not in the log)."""
        index = self.arrival.get(job_id)
        if index is not None:
            self.until(index)

    def finish(self) -> None:
        """Feed every run left."""
        for run in self.runs[self.fed :]:
            record_completion(self.engine, run.user, run.runtime)
        self.fed = len(self.runs)
