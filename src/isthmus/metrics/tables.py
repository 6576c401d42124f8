"""The event log as numpy tables: event columns, job runs and VM leases, built in one vectorized pass.

Everything else in `isthmus.metrics` is computed from a `LogTables`:

- `EventColumns`: a copy of the log's columns as numpy arrays (a copy, so that the engine may keep
  appending to the log afterwards);
- `RunTable`: one row per run of a job (a START and the event that ended it);
- `LeaseTable`: one row per VM lease (a VM_LEASE and its VM_RELEASE, or the horizon).

Jobs are numbered by *row*: the position of their id in `LogTables.job_ids` (sorted ids of every
job in the workload mapping or in the log). Per-job arrays elsewhere use the same rows.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from isthmus.model.events import EventKind, EventLog

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]
BoolArray = NDArray[np.bool_]

#: Outcome code of a run still going at the horizon (the other outcomes are `EventKind` values).
OPEN = -1

_JOB_KINDS = (
    EventKind.SUBMIT,
    EventKind.START,
    EventKind.END,
    EventKind.KILL,
    EventKind.REQUEUE,
    EventKind.CANCEL,
    EventKind.FAIL,
    EventKind.REJECT,
    EventKind.SHARED,
)
_RUN_KINDS = (EventKind.START, EventKind.END, EventKind.KILL, EventKind.CANCEL, EventKind.FAIL)


def kind_mask(kind: NDArray[np.int8], kinds: Iterable[int]) -> BoolArray:
    """Mask of the events whose kind is one of `kinds` (a table lookup, faster than np.isin)."""
    table = np.zeros(256, dtype=np.bool_)
    table[np.asarray(list(kinds), dtype=np.uint8)] = True
    mask: BoolArray = table[kind.view(np.uint8)]
    return mask


def _column(col: object, dtype: type[np.generic], copy: bool) -> NDArray[np.generic]:
    """One `array.array` column as a numpy array: a copy (no buffer stays exported), or a
    read-only view of it."""
    view = np.frombuffer(col, dtype=dtype)  # type: ignore[call-overload]
    return view.copy() if copy else view  # type: ignore[no-any-return]


@dataclass(frozen=True, eq=False, slots=True)
class EventColumns:
    """The log's columns as numpy arrays (copies): time, kind, job, site, vm, value."""

    time: FloatArray
    kind: NDArray[np.int8]
    job: IntArray
    site: NDArray[np.int16]
    vm: NDArray[np.int32]
    value: FloatArray

    @classmethod
    def from_log(cls, log: EventLog, copy: bool = True) -> EventColumns:
        """The columns of `log`: copies, or with `copy=False` read-only views of the log's own
        buffers (no memory added; the log cannot grow while the views live: appending raises
        BufferError)."""
        c = log.core_columns()
        return cls(
            time=_column(c["time"], np.float64, copy),  # type: ignore[arg-type]
            kind=_column(c["kind"], np.int8, copy),  # type: ignore[arg-type]
            job=_column(c["job"], np.int64, copy),  # type: ignore[arg-type]
            site=_column(c["site"], np.int16, copy),  # type: ignore[arg-type]
            vm=_column(c["vm"], np.int32, copy),  # type: ignore[arg-type]
            value=_column(c["value"], np.float64, copy),  # type: ignore[arg-type]
        )

    def __len__(self) -> int:
        return int(self.time.size)


@dataclass(frozen=True, eq=False, slots=True)
class RunTable:
    """One row per run: a START of a job and the next run event of that job that ended it.

    `job` is the job's row, `site` the site index, `size` the processors (START value), `start` and
    `end` the times (`end` is the horizon for a run still going), `outcome` the `EventKind` of the
    event that ended it (END, FAIL, KILL or CANCEL) or `OPEN` (-1). `start_pos`/`end_pos` are the
    positions of those events in the log (`end_pos` is the log length for an open run).
    """

    job: IntArray
    site: IntArray
    size: FloatArray
    start: FloatArray
    end: FloatArray
    outcome: NDArray[np.int8]
    start_pos: IntArray
    end_pos: IntArray

    def __len__(self) -> int:
        return int(self.job.size)

    @property
    def duration(self) -> FloatArray:
        """Seconds each run lasted (to the horizon for open runs)."""
        return self.end - self.start

    @property
    def killed(self) -> BoolArray:
        """Mask of the runs ended by a KILL event (whatever its cause)."""
        killed: BoolArray = self.outcome == EventKind.KILL
        return killed


@dataclass(frozen=True, eq=False, slots=True)
class LeaseTable:
    """One row per VM lease: VM_LEASE to VM_RELEASE (billing), or to the horizon if never released.

    `start_pos`/`end_pos` are the positions of the two events in the log (`end_pos` is the log
    length for a lease never released).
    """

    site: IntArray
    vm: IntArray
    start: FloatArray
    end: FloatArray
    released: BoolArray
    start_pos: IntArray
    end_pos: IntArray

    def __len__(self) -> int:
        return int(self.site.size)

    @property
    def seconds(self) -> FloatArray:
        """Billed seconds of each lease (release or horizon minus lease time)."""
        return np.maximum(self.end - self.start, 0.0)


@dataclass(frozen=True, eq=False, slots=True)
class LogTables:
    """Everything the metrics need from one event log, as numpy arrays.

    `job_ids` are the sorted ids of all jobs (workload mapping ∪ log); `event_row` gives, for each
    event, its job's row in `job_ids` (-1 for events without a job). `horizon` is the end of the
    run: open runs and unreleased leases last until it.
    """

    events: EventColumns
    horizon: float
    n_sites: int
    job_ids: IntArray
    event_row: IntArray
    runs: RunTable
    leases: LeaseTable

    @property
    def n_jobs(self) -> int:
        """Number of job rows."""
        return int(self.job_ids.size)


#: Events read at a time by `event_rows` (its temporaries stay below a megabyte or two).
CHUNK_EVENTS = 1 << 16


def event_rows(ev: EventColumns, known: IntArray, chunk: int = CHUNK_EVENTS) -> tuple[IntArray, IntArray]:
    """The sorted ids of every job (`known` ∪ the jobs of the log's job events) and each
    event's row in them (-1 for an event without a job), computed
    `chunk` events at a time so that no temporary holds the whole log's job ids."""
    n = len(ev)
    top = max(_JOB_KINDS)

    def jobs_of(lo: int) -> tuple[BoolArray, IntArray]:
        job = ev.job[lo : lo + chunk]
        mask = (ev.kind[lo : lo + chunk] <= top) & (job >= 0)
        return mask, job[mask]

    count = known.size
    lo_id = int(known.min()) if known.size else None
    hi_id = int(known.max()) if known.size else None
    for lo in range(0, n, chunk):
        _, j = jobs_of(lo)
        if j.size:
            count += j.size
            lo_id = int(j.min()) if lo_id is None else min(lo_id, int(j.min()))
            hi_id = int(j.max()) if hi_id is None else max(hi_id, int(j.max()))
    row = np.full(n, -1, dtype=np.int64)
    if lo_id is None or hi_id is None:
        return np.zeros(0, np.int64), row
    dense = lo_id >= 0 and hi_id <= 4 * count + 1024  # small non-negative ids: a lookup table
    if dense:
        present = np.zeros(hi_id + 1, dtype=np.bool_)
        present[known] = True
        for lo in range(0, n, chunk):
            present[jobs_of(lo)[1]] = True
        ids = np.flatnonzero(present).astype(np.int64)
        lookup = np.cumsum(present, dtype=np.int64) - 1
        del present
    else:
        ids = np.unique(np.concatenate([known, *(np.unique(jobs_of(lo)[1]) for lo in range(0, n, chunk))]))
    for lo in range(0, n, chunk):
        mask, j = jobs_of(lo)
        row[lo : lo + chunk][mask] = lookup[j] if dense else np.searchsorted(ids, j)
    return ids, row


def _empty_runs() -> RunTable:
    i, f = np.zeros(0, np.int64), np.zeros(0, np.float64)
    return RunTable(i, i, f, f, f, np.zeros(0, np.int8), i, i)


def _pair_runs(ev: EventColumns, row: IntArray, horizon: float) -> RunTable:
    """Pair each START with the next run event (END/KILL/CANCEL/FAIL/START) of the same job."""
    pos = np.flatnonzero(kind_mask(ev.kind, _RUN_KINDS) & (row >= 0))
    if pos.size == 0:
        return _empty_runs()
    n_ev = len(ev)
    if (int(row.max()) + 1) * n_ev < 2**62:
        # one sorted key (row, position): grouped by job, in log order within a job, with
        # half the temporaries of an argsort and its gathers (a lower peak)
        key = row[pos]
        key *= n_ev
        key += pos
        del pos
        key.sort()
        spos = key % n_ev
        sr = np.floor_divide(key, n_ev, out=key)
        del key
    else:
        order = np.argsort(row[pos], kind="stable")
        spos = pos[order]
        sr = row[spos]
        del pos, order
    skind = ev.kind[spos]
    n = spos.size
    starts = np.flatnonzero(skind == EventKind.START)
    nxt = np.minimum(starts + 1, n - 1)
    closed = (starts + 1 < n) & (sr[nxt] == sr[starts])
    job = sr[starts]
    del sr
    start_pos = spos[starts]
    end_pos = np.where(closed, spos[nxt], n_ev).astype(np.int64)
    del spos
    outcome = np.where(closed, skind[nxt], OPEN).astype(np.int8)
    del skind, nxt, starts
    end = np.where(closed, ev.time[np.minimum(end_pos, n_ev - 1)], horizon)
    del closed
    o = np.argsort(start_pos, kind="stable")  # present runs in log order of their starts
    # each column reordered in turn, the unordered one let go at once (a lower peak)
    job, start_pos, end_pos, outcome, end = job[o], start_pos[o], end_pos[o], outcome[o], end[o]
    del o
    return RunTable(
        job=job,
        site=ev.site[start_pos].astype(np.int64),
        size=ev.value[start_pos],
        start=ev.time[start_pos],
        end=end.astype(np.float64, copy=False),
        outcome=outcome,
        start_pos=start_pos.astype(np.int64, copy=False),
        end_pos=end_pos,
    )


def _pair_leases(ev: EventColumns, horizon: float) -> LeaseTable:
    """Pair each VM_LEASE with the first VM_RELEASE of the same (site, vm)."""
    lpos = np.flatnonzero(ev.kind == EventKind.VM_LEASE).astype(np.int64)
    rpos = np.flatnonzero(ev.kind == EventKind.VM_RELEASE).astype(np.int64)

    def key(p: IntArray) -> IntArray:
        return (ev.site[p].astype(np.int64) << 32) | (ev.vm[p].astype(np.int64) & 0xFFFFFFFF)

    end_pos = np.full(lpos.size, len(ev), dtype=np.int64)
    if rpos.size and lpos.size:
        lkey, rkey = key(lpos), key(rpos)
        order = np.argsort(rkey, kind="stable")
        rkey_sorted, rpos_sorted = rkey[order], rpos[order]
        i = np.minimum(np.searchsorted(rkey_sorted, lkey), rkey_sorted.size - 1)
        released = rkey_sorted[i] == lkey
        end_pos[released] = rpos_sorted[i[released]]
    released = end_pos < len(ev)
    end = np.full(lpos.size, horizon, dtype=np.float64)
    end[released] = ev.time[end_pos[released]]
    return LeaseTable(
        site=ev.site[lpos].astype(np.int64),
        vm=ev.vm[lpos].astype(np.int64),
        start=ev.time[lpos],
        end=end,
        released=released,
        start_pos=lpos,
        end_pos=end_pos,
    )


def build_tables(
    log: EventLog | EventColumns,
    known_job_ids: Iterable[int],
    n_sites: int,
    horizon: float | None = None,
    *,
    copy: bool = True,
) -> LogTables:
    """Read `log` once into numpy tables.

    `known_job_ids` are the ids of the workload's jobs (jobs never seen in the log still get a
    row). `n_sites` is the number of sites of the environment; a site index outside
    `[0, n_sites)` in a START or lease raises ValueError. `horizon` defaults to the time of the
    last event and may not be earlier than it. With `copy=False` the event columns are views of
    the log's buffers (for a finished log: it cannot grow while the tables live). `log` may also
    be the log's columns already read (`EventColumns.from_log`), used as they are.
    """
    ev = log if isinstance(log, EventColumns) else EventColumns.from_log(log, copy)
    last = float(ev.time[-1]) if len(ev) else 0.0
    if horizon is None:
        horizon = last
    elif horizon < last:
        raise ValueError(f"horizon {horizon} is earlier than the last event of the log ({last})")
    if isinstance(known_job_ids, np.ndarray):
        known = known_job_ids.astype(np.int64, copy=False)
    else:
        known = np.fromiter(known_job_ids, dtype=np.int64)
    ids, row = event_rows(ev, known)
    sited = kind_mask(ev.kind, (EventKind.START, EventKind.VM_LEASE))
    bad = sited & ((ev.site < 0) | (ev.site >= n_sites))
    if bad.any():
        p = int(np.flatnonzero(bad)[0])
        raise ValueError(
            f"event {p} ({EventKind(int(ev.kind[p])).name}) names site index {int(ev.site[p])}, "
            f"but the environment has {n_sites} sites"
        )
    return LogTables(
        events=ev,
        horizon=float(horizon),
        n_sites=n_sites,
        job_ids=ids,
        event_row=row,
        runs=_pair_runs(ev, row, float(horizon)),
        leases=_pair_leases(ev, float(horizon)),
    )
