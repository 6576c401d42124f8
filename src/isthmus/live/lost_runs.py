"""Lost runs: killed before their job is requeued, and bounded per job (poison pills).

A run is *lost* when its pilot dies or forgets it (`PilotHub.lose`), also when that happened
while the manager was down (`isthmus.live.recovery`). "Killed (lost)" then means killed: its
process group is SIGKILLed wherever this machine can see it (by the pid its pilot reported, and
by a scan for the processes whose environment names the run, which finds a run whose pilot died
before reporting it), so that its rerun never runs beside it. A run on another machine (a pilot
of a batch system on a remote node) is ended by its batch system when the pilot's job is
cancelled.

A bag's tasks are found the same way: a task of a lane carries the bag, the pilot node it runs on
and the bag's output directory (a path in this manager's spool) in its environment, so that the
tasks a dead pilot left behind are killed (`kill_lost_tasks`) before they go back to their bag's
queue, whether the pilot died while the manager ran or while it was down.

A job whose runs keep being lost is taken for one that takes its pilot down (a poison pill): its
`max_lost_runs`-th lost run fails it, with the reason, instead of requeueing it, so that it does
not take down pilot after pilot. Lost runs are counted from the job's stored history, so the
count survives manager restarts.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path

from sqlalchemy import func, select

from isthmus.backends.local import kill_marked, kill_marked_runs, kill_run
from isthmus.store import tables as db

log = logging.getLogger("isthmus.live")

DEFAULT_MAX_LOST_RUNS = 3
"""Lost runs after which a job fails instead of being requeued (ManagerConfig.max_lost_runs)."""

LOST_DETAIL = "killed (lost)"
"""How the history line of a lost run begins (isthmus.store.projector)."""


def nodefile(spool: Path, job: int, run: int) -> str:
    """The node file of run `run` of job `job` (isthmus.live.pilots): its processes carry this
    path in ISTHMUS_NODEFILE, which no run of another job, run or manager carries."""
    return str(spool / str(job) / f"run{run}.nodes")


def kill_lost_run(spool: Path, job: int, run: int, pid: int = 0) -> int:
    """SIGKILL the processes of a lost run (see the module docstring); how many were found."""
    killed = 1 if pid and kill_run(pid, job, run) else 0
    return killed + kill_marked_runs([(job, run, nodefile(spool, job, run))])


def kill_lost_tasks(bags: Iterable[tuple[int, str]], node: str) -> int:
    """SIGKILL, with their process groups, the processes of the tasks that the pilot of `node`
    started for `bags` ((bag, its output directory) pairs: isthmus.live.bag_tasks.out_dir), found
    by their environment (see the module docstring); how many were found."""
    return kill_marked(
        (f"ISTHMUS_JOB_ID={bag}", f"ISTHMUS_PILOT_NODE={node}", f"ISTHMUS_BAG_DIR={bag_dir}")
        for bag, bag_dir in sorted(set(bags))
    )


def lost_before(store: db.Store, job: int) -> int:
    """How many runs of `job` the database records as lost."""
    h = db.job_history
    q = (
        select(func.count())
        .select_from(h)
        .where(h.c.job_id == job, h.c.state == "killed", h.c.detail.like(LOST_DETAIL + "%"))
    )
    try:
        with store.engine.connect() as conn:
            return int(conn.execute(q).scalar() or 0)
    except Exception as exc:  # the database does not answer: the run is requeued, as before
        log.warning("job %s: lost runs not counted: %s", job, exc)
        return 0


def poison_reason(count: int, limit: int, why: str) -> str | None:
    """Why the job fails now, if this lost run (lost because `why`, its `count`-th) reaches `limit`;
    else None."""
    if limit <= 0 or count < limit:
        return None
    return (
        f"its run was lost {count} times (the last: {why}): taken as a job that takes its pilot down, "
        f"it is not run again (the limit is {limit} lost runs)"
    )
