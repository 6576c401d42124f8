"""Per-job records: one row per job with its times, site, status and derived metrics.

Definitions (DESIGN "Metrics (exact definitions)"; docs/metrics.md gives the full table):

- submit: time of the job's SUBMIT event (the workload's submit time if it never arrived);
- start, end, site: of the run that completed (or the run that failed); for a job still running at
  the horizon, start and site of that run and no end; empty otherwise;
- wait = start - submit; response = end - submit (killed runs before it count);
  runtime = end - start; delay = response - runtime (IBM seed §4.2);
- slowdown = response / runtime (empty when runtime is 0);
  bounded slowdown = max(1, response / max(runtime, 10 s)); for a run slowed by sharing
  processors (a SHARED event, simulation) its runtime alone stands for runtime in both;
- restarts = number of killed runs; wasted processor-seconds = Σ size × duration of killed runs;
- status: completed / failed / cancelled / rejected / unfinished, and a reason for the last three
  kinds that did not complete (from `EventLog.reasons`).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from enum import IntEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from isthmus.metrics.tables import (
    OPEN,
    EventColumns,
    FloatArray,
    IntArray,
    LogTables,
    RunTable,
    build_tables,
)
from isthmus.model.environment import Environment
from isthmus.model.events import EventKind, EventLog
from isthmus.model.job import Job
from isthmus.model.jobtable import JobsById, JobTable
from isthmus.model.states import JobState

if TYPE_CHECKING:  # pyarrow (about 30 MB) is imported when records are turned into Arrow or files
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

#: Runtimes shorter than this count as this long in the bounded slowdown (seconds).
BOUNDED_SLOWDOWN_THRESHOLD = 10.0
#: Reason given to a job that neither finished nor has a reason in the log.
UNFINISHED_REASON = "unfinished at end of run"
#: Reason given to a workload job that never appeared in the log.
NOT_SUBMITTED_REASON = "not submitted before the end of the run"

#: Rows converted to Arrow and written at a time by `JobRecords.write_files` (memory stays flat).
BATCH_ROWS = 16_384

#: Column order of the CSV and Parquet files (the first five are fixed by the CLI contract).
COLUMNS: tuple[str, ...] = (
    "job_id",
    "submit",
    "start",
    "end",
    "site",
    "user",
    "size",
    "status",
    "wait",
    "response",
    "runtime",
    "requested_runtime",
    "delay",
    "slowdown",
    "bounded_slowdown",
    "restarts",
    "wasted_processor_seconds",
    "reason",
)


class JobStatus(IntEnum):
    """How a job ended (or not) by the horizon: a terminal `JobState` (`STATUS_STATES`), or
    UNFINISHED. The codes are those of the `status` column of `JobColumns`."""

    COMPLETED = 0
    FAILED = 1
    CANCELLED = 2
    REJECTED = 3
    UNFINISHED = 4

    @property
    def state(self) -> JobState | None:
        """The job state this status reports; None for UNFINISHED (no end by the horizon)."""
        return STATUS_STATES[self]

    @property
    def label(self) -> str:
        """The word written in files: its job state's ('completed'), or 'unfinished'."""
        state = STATUS_STATES[self]
        return UNFINISHED_LABEL if state is None else state.value


STATUS_STATES: Mapping[JobStatus, JobState | None] = {
    JobStatus.COMPLETED: JobState.COMPLETED,
    JobStatus.FAILED: JobState.FAILED,
    JobStatus.CANCELLED: JobState.CANCELLED,
    JobStatus.REJECTED: JobState.REJECTED,
    JobStatus.UNFINISHED: None,
}
"""The `JobState` each record status reports (the words of `isthmus.model.states`)."""

UNFINISHED_LABEL = "unfinished"
"""The label of a job that did not end by the horizon (no job state: it was not over)."""


_STATUS_LABELS = np.array([s.label for s in JobStatus], dtype=object)


def readable_as_umask(path: Path) -> None:
    """Give a temporary file (created 0600) the mode a plain new file gets (0666 less the
    umask), so that every output of a run has the same permissions."""
    mask = os.umask(0o022)
    os.umask(mask)
    os.chmod(path, 0o666 & ~mask)


def atomic_write(path: str | os.PathLike[str], write: Callable[[Path], None]) -> Path:
    """Call `write(tmp)` on a temporary file beside `path`, then rename it to `path`.

    Readers never see a half-written file; the directory is created if missing. Returns `path`.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        readable_as_umask(tmp)
        write(tmp)
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return target


@dataclass(frozen=True, eq=False, slots=True)
class JobRecords:
    """Columnar per-job records (numpy arrays, one element per job, sorted by job id).

    Times are seconds; NaN marks an unknown value. `site` holds indices into `site_names`
    (-1 unknown); `status` holds `JobStatus` codes; `user` and `reason` are object arrays of
    `str` or None.
    """

    job_id: IntArray
    user: NDArray[np.object_]
    size: FloatArray
    submit: FloatArray
    start: FloatArray
    end: FloatArray
    site: IntArray
    wait: FloatArray
    response: FloatArray
    runtime: FloatArray
    requested_runtime: FloatArray
    delay: FloatArray
    slowdown: FloatArray
    bounded_slowdown: FloatArray
    restarts: IntArray
    wasted_processor_seconds: FloatArray
    status: NDArray[np.int8]
    reason: NDArray[np.object_]
    site_names: tuple[str, ...]

    def __len__(self) -> int:
        return int(self.job_id.size)

    @property
    def completed(self) -> NDArray[np.bool_]:
        """Mask of the completed jobs (the jobs the performance metrics are computed over)."""
        done: NDArray[np.bool_] = self.status == JobStatus.COMPLETED
        return done

    def count(self, status: JobStatus) -> int:
        """Number of jobs with `status`."""
        return int(np.count_nonzero(self.status == status))

    def site_labels(self) -> NDArray[np.object_]:
        """Site name of each job (None where unknown)."""
        names = np.array([*self.site_names, None], dtype=object)
        return names[np.where(self.site >= 0, self.site, len(self.site_names))]

    def status_labels(self) -> NDArray[np.object_]:
        """Status label of each job ('completed', ...)."""
        return _STATUS_LABELS[self.status]

    def to_arrow(self) -> pa.Table:
        """The records as a pyarrow Table with the columns of `COLUMNS`, nulls for unknown values."""
        import pyarrow as pa

        return pa.Table.from_batches([self.batch(0, len(self))], schema=arrow_schema())

    def batch(self, lo: int, hi: int) -> pa.RecordBatch:
        """Rows `lo` to `hi` (exclusive) as a pyarrow RecordBatch of `arrow_schema()`."""
        import pyarrow as pa

        def f(a: FloatArray) -> pa.Array:
            return pa.array(a[lo:hi], type=pa.float64(), from_pandas=True)  # NaN -> null

        names = np.array([*self.site_names, None], dtype=object)
        site = self.site[lo:hi]
        cols: dict[str, pa.Array] = {
            "job_id": pa.array(self.job_id[lo:hi], type=pa.int64()),
            "submit": f(self.submit),
            "start": f(self.start),
            "end": f(self.end),
            "site": pa.array(names[np.where(site >= 0, site, len(self.site_names))], type=pa.string()),
            "user": pa.array(self.user[lo:hi], type=pa.string()),
            "size": pa.array(self.size[lo:hi].astype(np.int64), type=pa.int64()),
            "status": pa.array(_STATUS_LABELS[self.status[lo:hi]], type=pa.string()),
            "wait": f(self.wait),
            "response": f(self.response),
            "runtime": f(self.runtime),
            "requested_runtime": f(self.requested_runtime),
            "delay": f(self.delay),
            "slowdown": f(self.slowdown),
            "bounded_slowdown": f(self.bounded_slowdown),
            "restarts": pa.array(self.restarts[lo:hi], type=pa.int64()),
            "wasted_processor_seconds": pa.array(self.wasted_processor_seconds[lo:hi], type=pa.float64()),
            "reason": pa.array(self.reason[lo:hi], type=pa.string()),
        }
        return pa.RecordBatch.from_arrays([cols[c] for c in COLUMNS], schema=arrow_schema())

    def write_files(
        self,
        csv_path: str | os.PathLike[str] | None = None,
        parquet_path: str | os.PathLike[str] | None = None,
        batch_rows: int = BATCH_ROWS,
    ) -> list[Path]:
        """Write the records as CSV and/or Parquet in one streamed pass, `batch_rows` rows at a time.

        Only one batch is converted to Arrow at a time, so memory stays flat however many jobs
        there are; each Parquet row group holds one batch. Both files are written atomically
        (temporary files renamed into place once both are complete). Returns the paths written,
        CSV first.
        """
        if batch_rows < 1:
            raise ValueError(f"batch_rows must be at least 1, got {batch_rows}")
        with RecordsWriter(csv_path, parquet_path) as writer:
            n = len(self)
            for lo in range(0, n, batch_rows):
                writer.write_batch(self.batch(lo, min(lo + batch_rows, n)))
        return writer.paths

    def write_csv(self, path: str | os.PathLike[str]) -> Path:
        """Write the records as CSV (header row, `COLUMNS` order, empty cells for unknown values)."""
        return self.write_files(csv_path=path)[0]

    def write_parquet(self, path: str | os.PathLike[str]) -> Path:
        """Write the records as a Parquet file (same columns and types as `to_arrow`)."""
        return self.write_files(parquet_path=path)[0]


class RecordsWriter:
    """Records files written as their rows come: a context manager whose `write` appends
    records (a chunk of the jobs, in job order) to the CSV and/or Parquet file, one Parquet row
    group per call. The files appear (renamed from temporaries) when the block ends without an
    error, a header and a schema only if no row came; on an error they are removed. `paths`:
    the files, CSV first."""

    def __init__(
        self, csv_path: str | os.PathLike[str] | None = None, parquet_path: str | os.PathLike[str] | None = None
    ) -> None:
        self.paths = [Path(p) for p in (csv_path, parquet_path) if p is not None]
        self._csv, self._parquet = csv_path is not None, parquet_path is not None
        self._temps: list[Path] = []
        self._writers: list[pacsv.CSVWriter | pq.ParquetWriter] = []
        self._rows = 0

    def __enter__(self) -> RecordsWriter:
        import pyarrow as pa
        import pyarrow.csv as pacsv
        import pyarrow.parquet as pq

        # Arrow's default allocator (mimalloc) keeps what it frees: the system's gives back each
        # batch, so that peak memory stays flat (15 MB less for 100k jobs' CSV file; Parquet's
        # encoder allocates from Arrow's C++ default, which `isthmus` sets in cli/main.py)
        self._previous_pool = pa.default_memory_pool()
        pa.set_memory_pool(pa.system_memory_pool())
        try:
            for target in self.paths:
                target.parent.mkdir(parents=True, exist_ok=True)
                fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
                os.close(fd)
                readable_as_umask(Path(name))
                self._temps.append(Path(name))
            it = iter(self._temps)
            schema = arrow_schema()
            if self._csv:
                options = pacsv.WriteOptions(include_header=True, quoting_style="needed")
                self._writers.append(pacsv.CSVWriter(str(next(it)), schema, write_options=options))
            if self._parquet:
                self._writers.append(pq.ParquetWriter(str(next(it)), schema))
        except BaseException:
            self._abort()
            pa.set_memory_pool(self._previous_pool)
            raise
        return self

    def write(self, records: JobRecords) -> None:
        """Append `records` (one batch, one Parquet row group)."""
        if len(records):
            self.write_batch(records.batch(0, len(records)))

    def write_batch(self, batch: pa.RecordBatch) -> None:
        """Append one RecordBatch of `arrow_schema()`."""
        for w in self._writers:
            w.write_batch(batch)
        self._rows += batch.num_rows

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        import pyarrow as pa

        try:
            if kind is not None:
                self._abort()
                return
            try:
                if not self._rows:  # still a header (CSV) and a schema (Parquet)
                    for w in self._writers:
                        w.write_table(arrow_schema().empty_table())
            finally:
                for w in self._writers:
                    w.close()
            for tmp, target in zip(self._temps, self.paths, strict=True):
                os.replace(tmp, target)
        except BaseException:
            self._abort()
            raise
        finally:
            pa.set_memory_pool(self._previous_pool)

    def _abort(self) -> None:
        for w in self._writers:
            with contextlib.suppress(Exception):  # the first error is the one reported
                w.close()
        self._writers = []
        for tmp in self._temps:
            tmp.unlink(missing_ok=True)


#: The integer columns of `COLUMNS` and their dtypes (the others but `user` and `reason`: float64).
_SPILLED_INTEGERS: dict[str, type[np.generic]] = {
    "job_id": np.int64,
    "site": np.int64,
    "restarts": np.int64,
    "status": np.int8,
}


class SpilledRecords:
    """Per-job records kept in an anonymous temporary file rather than in memory: `add` chunks
    (in job order), then `chunks` reads them back one at a time, value for value as they were
    added. `isthmus simulate` computes a run's records while its log and tables are in memory,
    lets those go, and only then converts the records to files (pyarrow and its writers, 30 MB
    and more, never share the peak with the log). Users and reasons are stored as codes into
    their distinct texts. Close it (or use it as a context manager) to delete the file."""

    #: The numeric columns of `COLUMNS` and their dtypes (`user` and `reason` go as codes).
    _NUMBERS = tuple(
        (name, np.dtype(_SPILLED_INTEGERS.get(name, np.float64))) for name in COLUMNS if name not in ("user", "reason")
    )

    def __init__(self, site_names: tuple[str, ...], directory: str | os.PathLike[str] | None = None) -> None:
        self.site_names = site_names
        self._file = tempfile.TemporaryFile(dir=directory)  # noqa: SIM115 - closed by close()
        self._sizes: list[int] = []
        self._codes: dict[str | None, int] = {None: -1}
        self._texts: list[str] = []

    def __len__(self) -> int:
        return sum(self._sizes)

    def _encode(self, values: NDArray[np.object_]) -> NDArray[np.int32]:
        codes = self._codes
        found = list(map(codes.get, values.tolist()))  # None: a text not seen yet
        if None in found:
            for i, v in enumerate(values.tolist()):
                if found[i] is None:
                    c = codes.get(v)
                    if c is None:
                        c = codes[v] = len(self._texts)
                        self._texts.append(v)
                    found[i] = c
        return np.array(found, dtype=np.int32)

    def add(self, records: JobRecords) -> None:
        """Append a chunk of records."""
        if records.site_names != self.site_names:
            raise ValueError("records of another environment's sites")
        for name, dtype in self._NUMBERS:
            self._file.write(np.ascontiguousarray(getattr(records, name), dtype=dtype).tobytes())
        for values in (records.user, records.reason):
            self._file.write(self._encode(values).tobytes())
        self._sizes.append(len(records))

    def chunks(self) -> Iterator[JobRecords]:
        """The chunks added, in order (read back from the file one at a time)."""
        texts = np.array([*self._texts, None], dtype=object)  # code -1: None
        self._file.seek(0)

        def read(n: int, dtype: np.dtype[np.generic]) -> NDArray[Any]:
            return np.frombuffer(self._file.read(n * dtype.itemsize), dtype=dtype)

        code = np.dtype(np.int32)
        for n in self._sizes:
            numbers = {name: read(n, dtype) for name, dtype in self._NUMBERS}
            user, reason = texts[read(n, code)], texts[read(n, code)]
            yield JobRecords(user=user, reason=reason, site_names=self.site_names, **numbers)

    def close(self) -> None:
        """Delete the file."""
        self._file.close()

    def __enter__(self) -> SpilledRecords:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def arrow_schema() -> pa.Schema:
    """The Arrow schema of the records files: `COLUMNS` with their types (all nullable)."""
    import pyarrow as pa

    types = {c: pa.float64() for c in COLUMNS}
    types.update(job_id=pa.int64(), site=pa.string(), user=pa.string(), size=pa.int64(), status=pa.string())
    types.update(restarts=pa.int64(), reason=pa.string())
    return pa.schema([(c, types[c]) for c in COLUMNS])


def read_records(path: str | os.PathLike[str]) -> pa.Table:
    """Read a records file written by `JobRecords.write_csv` or `write_parquet` (by its suffix)."""
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    p = Path(path)
    if p.suffix == ".parquet":
        return pq.read_table(p)
    convert = pacsv.ConvertOptions(column_types=arrow_schema(), strings_can_be_null=True)
    return pacsv.read_csv(p, convert_options=convert)


@dataclass(frozen=True, eq=False, slots=True)
class JobColumns:
    """The workload attributes the records need, one element per job (in workload order): ids,
    users, sizes, submit times and requested runtimes (NaN when unknown).

    Metrics take these in place of the `Job` objects (`compute_run_metrics`), so that a caller
    may let a large workload's objects go before computing its records.
    """

    ids: IntArray
    user: NDArray[np.object_]
    size: FloatArray
    submit: FloatArray
    requested: FloatArray

    @classmethod
    def from_jobs(cls, jobs: Iterable[Job], ids: Iterable[int] | None = None) -> JobColumns:
        """The columns of `jobs` (a sequence or any iterable); `ids` in place of their own ids
        (the keys of a workload mapping)."""
        values = list(jobs)
        n = len(values)
        return cls(
            ids=np.fromiter((j.id for j in values) if ids is None else ids, dtype=np.int64, count=n),
            user=np.array([j.user for j in values], dtype=object),
            size=np.fromiter((j.size for j in values), dtype=np.float64, count=n),
            submit=np.fromiter((j.submit for j in values), dtype=np.float64, count=n),
            requested=np.fromiter(
                (np.nan if j.requested_runtime is None else j.requested_runtime for j in values),
                dtype=np.float64,
                count=n,
            ),
        )

    @classmethod
    def from_table(cls, table: JobTable) -> JobColumns:
        """The columns of a :class:`JobTable` (no `Job` object built)."""
        c = table.cols
        return cls(
            ids=c.ids, user=table.user_names(), size=c.size.astype(np.float64), submit=c.submit, requested=c.requested
        )

    def __len__(self) -> int:
        return int(self.ids.size)

    def keys(self) -> IntArray:
        """The job ids (as `Mapping.keys` gives them for a workload by id)."""
        return self.ids


#: The workload of a run, as metrics take it: `Job` objects by id, or their columns.
Jobs = Mapping[int, Job] | JobColumns


def _columns(jobs: Jobs) -> JobColumns:
    if isinstance(jobs, JobsById):
        return JobColumns.from_table(jobs.table)
    return jobs if isinstance(jobs, JobColumns) else JobColumns.from_jobs(jobs.values(), jobs.keys())


def records_from_tables(
    tables: LogTables,
    jobs: Jobs,
    env: Environment,
    reasons: Mapping[int, str] | None = None,
) -> JobRecords:
    """Compute the per-job records of a log already read into `tables`.

    `jobs` is the workload by id or its `JobColumns`. `reasons` (job id → text, normally
    `EventLog.reasons`) is copied onto the jobs that did not complete.
    """
    n = tables.n_jobs
    ev = tables.events
    row = tables.event_row
    nan = np.full(n, np.nan)

    user = np.full(n, None, dtype=object)
    size = nan.copy()
    submit = nan.copy()
    requested = nan.copy()
    cols = _columns(jobs)
    rows = np.searchsorted(tables.job_ids, cols.ids)
    user[rows] = cols.user
    size[rows] = cols.size
    submit[rows] = cols.submit
    requested[rows] = cols.requested

    def rows_of(kind: EventKind) -> tuple[IntArray, IntArray]:
        pos = np.flatnonzero((ev.kind == kind) & (row >= 0))
        return pos, row[pos]

    sub_pos, sub_rows = rows_of(EventKind.SUBMIT)
    submit[sub_rows] = ev.time[sub_pos]
    size[sub_rows] = ev.value[sub_pos]
    submitted = np.zeros(n, dtype=np.bool_)
    submitted[sub_rows] = True

    status = np.full(n, JobStatus.UNFINISHED, dtype=np.int8)
    for kind, st in (
        (EventKind.REJECT, JobStatus.REJECTED),
        (EventKind.CANCEL, JobStatus.CANCELLED),
        (EventKind.FAIL, JobStatus.FAILED),
        (EventKind.END, JobStatus.COMPLETED),
    ):
        status[rows_of(kind)[1]] = st

    runs = tables.runs
    start, end = nan.copy(), nan.copy()
    site = np.full(n, -1, dtype=np.int64)
    final = (runs.outcome == EventKind.END) | (runs.outcome == EventKind.FAIL) | (runs.outcome == OPEN)
    fr = runs.job[final]
    start[fr] = runs.start[final]
    site[fr] = runs.site[final]
    ended = final & (runs.outcome != OPEN)
    end[runs.job[ended]] = runs.end[ended]
    unknown_size = np.isnan(size)
    if unknown_size.any():  # a job seen only through its runs
        size[runs.job] = np.where(unknown_size[runs.job], runs.size, size[runs.job])
    size = np.nan_to_num(size, nan=0.0)

    killed = runs.killed
    restarts = np.bincount(runs.job[killed], minlength=n).astype(np.int64)
    wasted = np.bincount(runs.job[killed], weights=runs.size[killed] * runs.duration[killed], minlength=n).astype(
        np.float64
    )

    # a completing run slowed by sharing processors (FCFS-NW) is measured against its runtime
    # alone, as the dissertation's JSD ("the runtime in a dedicated environment", §6.4.4)
    alone = nan.copy()
    sh_pos, sh_rows = rows_of(EventKind.SHARED)
    alone[sh_rows] = ev.value[sh_pos]
    with np.errstate(divide="ignore", invalid="ignore"):
        wait = start - submit
        runtime = end - start
        response = end - submit
        delay = response - runtime
        dedicated = np.where(np.isnan(alone) | (status != JobStatus.COMPLETED), runtime, alone)
        slowdown = np.where(dedicated > 0, response / dedicated, np.nan)
        bsld = np.maximum(1.0, response / np.maximum(dedicated, BOUNDED_SLOWDOWN_THRESHOLD))

    reason = np.full(n, None, dtype=object)
    reason[status == JobStatus.UNFINISHED] = UNFINISHED_REASON
    reason[(status == JobStatus.UNFINISHED) & ~submitted] = NOT_SUBMITTED_REASON
    _apply_reasons(tables.job_ids, status, reason, reasons or {})
    return JobRecords(
        job_id=tables.job_ids,
        user=user,
        size=size,
        submit=submit,
        start=start,
        end=end,
        site=site,
        wait=wait,
        response=response,
        runtime=runtime,
        requested_runtime=requested,
        delay=delay,
        slowdown=slowdown,
        bounded_slowdown=bsld,
        restarts=restarts,
        wasted_processor_seconds=wasted,
        status=status,
        reason=reason,
        site_names=tuple(s.name for s in env.sites),
    )


def records_in_chunks(
    tables: LogTables,
    jobs: Jobs,
    env: Environment,
    reasons: Mapping[int, str] | None = None,
    rows: int = BATCH_ROWS,
) -> Iterator[JobRecords]:
    """The records of `records_from_tables`, `rows` jobs at a time, in job-id order: each chunk
    is computed from the events and runs of its own jobs only, so that a caller writing them as
    they come (`RecordsWriter`) never holds the whole run's records. Concatenated, the chunks
    equal `records_from_tables(tables, jobs, env, reasons)` value for value."""
    if rows < 1:
        raise ValueError(f"rows must be at least 1, got {rows}")
    cols = _columns(jobs)
    ev, row, runs = tables.events, tables.event_row, tables.runs
    wanted = np.zeros(256, dtype=np.bool_)  # the kinds of events the records read
    wanted[np.asarray(_RECORD_KINDS, dtype=np.uint8)] = True
    kind = ev.kind.view(np.uint8)
    reason_ids = np.fromiter((reasons or {}).keys(), dtype=np.int64, count=len(reasons or {}))
    reason_texts = np.array(list((reasons or {}).values()), dtype=object)
    for lo in range(0, tables.n_jobs, rows):
        hi = min(lo + rows, tables.n_jobs)
        ids = tables.job_ids[lo:hi]
        # a scan of the log's rows per chunk: no whole-run index is kept (a few ms a chunk)
        p = np.flatnonzero((row >= lo) & (row < hi))
        p = p[wanted[kind[p]]]
        events = EventColumns(ev.time[p], ev.kind[p], ev.job[p], ev.site[p], ev.vm[p], ev.value[p])
        r = np.flatnonzero((runs.job >= lo) & (runs.job < hi))
        chunk_runs = RunTable(
            runs.job[r] - lo,
            runs.site[r],
            runs.size[r],
            runs.start[r],
            runs.end[r],
            runs.outcome[r],
            runs.start_pos[r],
            runs.end_pos[r],
        )
        chunk = LogTables(events, tables.horizon, tables.n_sites, ids, row[p] - lo, chunk_runs, tables.leases)
        m = (cols.ids >= ids[0]) & (cols.ids <= ids[-1])  # (every workload id is one of job_ids)
        chunk_cols = JobColumns(cols.ids[m], cols.user[m], cols.size[m], cols.submit[m], cols.requested[m])
        k = (reason_ids >= ids[0]) & (reason_ids <= ids[-1])
        chunk_reasons = dict(zip(reason_ids[k].tolist(), reason_texts[k].tolist(), strict=True))
        yield records_from_tables(chunk, chunk_cols, env, chunk_reasons)


#: Kinds of the events `records_from_tables` reads.
_RECORD_KINDS = (
    EventKind.SUBMIT,
    EventKind.REJECT,
    EventKind.CANCEL,
    EventKind.FAIL,
    EventKind.END,
    EventKind.SHARED,
)


def _apply_reasons(
    job_ids: IntArray, status: NDArray[np.int8], reason: NDArray[np.object_], reasons: Mapping[int, str]
) -> None:
    """Copy `reasons` onto `reason` for the listed jobs that did not complete."""
    if not reasons or job_ids.size == 0:
        return
    ids = np.fromiter(reasons.keys(), dtype=np.int64, count=len(reasons))
    texts = np.array(list(reasons.values()), dtype=object)
    rows = np.minimum(np.searchsorted(job_ids, ids), job_ids.size - 1)
    ok = job_ids[rows] == ids
    rows, texts = rows[ok], texts[ok]
    keep = status[rows] != JobStatus.COMPLETED
    reason[rows[keep]] = texts[keep]


def compute_records(log: EventLog, jobs: Jobs, env: Environment, horizon: float | None = None) -> JobRecords:
    """Per-job records of one run: `log` from the engine, `jobs` the workload by id, `env` its sites.

    `horizon` (default: time of the last event) ends the runs still going.
    """
    tables = build_tables(log, jobs.keys(), len(env.sites), horizon)
    return records_from_tables(tables, jobs, env, log.reasons)
