"""Executors for sweeps: local worker processes, a local Dask cluster, or an existing Dask cluster.

Points are sent to the workers as pickled `Point`s and evaluated by the importable top-level
`runner.evaluate`, so every worker needs isthmus installed and the traces at the same paths as
the machine that runs `isthmus experiment`.

On one machine `process_pool` is the lean choice: N spawned processes and nothing else. A Dask
cluster adds a scheduler, a nanny per worker and each worker's event loop (heartbeats, memory
and system monitors, a statistical profiler sampling the simulation's stack every 10 ms), which
on a two-core machine took 10-15% of the wall time of a CPU-bound sweep (docs/sweeps.md); the
local Dask cluster started here turns the profiler and GIL monitor off and slows the periodic
ticks (`LOCAL_DASK_CONFIG`).
"""

from __future__ import annotations

import importlib
import multiprocessing
import signal
from collections.abc import Iterator
from concurrent.futures import Executor, ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ClusterInfo:
    """What the executor runs on: the scheduler's address and the workers connected at the start."""

    address: str
    workers: int
    local: bool


# Dask settings for a local cluster that only runs CPU-bound simulations: no statistical
# profiler or GIL monitor (they sample the simulating thread), slower ticks and monitors.
LOCAL_DASK_CONFIG: dict[str, object] = {
    "distributed.worker.profile.enabled": False,
    "distributed.admin.system-monitor.gil.enabled": False,
    "distributed.admin.system-monitor.interval": "5s",
    "distributed.admin.tick.interval": "1s",
    "distributed.worker.memory.monitor-interval": "1s",
}


def _check_workers(workers: int) -> None:
    """ValueError unless `workers` (local worker processes to start) is at least 1."""
    if workers < 1:
        raise ValueError(f"--workers must be at least 1, got {workers}")


def _ignore_interrupt() -> None:
    """Worker initializer: Ctrl-C is handled once, by the submitting process, which stops the workers."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _stop_workers(pool: ProcessPoolExecutor) -> None:
    """Terminate the pool's worker processes (points running in them are abandoned)."""
    stop = getattr(pool, "terminate_workers", None)  # Python >= 3.14
    if stop is not None:
        stop()
        return
    # Before 3.14 the executor has no public way to stop a running call: terminate its processes.
    for process in list(getattr(pool, "_processes", {}).values()):
        process.terminate()


@contextmanager
def process_pool(workers: int) -> Iterator[tuple[Executor, ClusterInfo]]:
    """`workers` local worker processes (spawned, so no lock or thread of this process is inherited).

    On a normal exit the pool is shut down after its work; when the block is left by an
    exception (Ctrl-C, a failed point) the points not started are cancelled and the running
    ones abandoned: their processes are terminated rather than waited for.
    """
    _check_workers(workers)
    pool = ProcessPoolExecutor(
        max_workers=workers, mp_context=multiprocessing.get_context("spawn"), initializer=_ignore_interrupt
    )
    try:
        yield pool, ClusterInfo("local processes", workers, True)
    except BaseException:
        _stop_workers(pool)
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown(wait=True)


@contextmanager
def dask_executor(
    *, scheduler: str | None = None, workers: int | None = None, connect_timeout: float = 10.0
) -> Iterator[tuple[Executor, ClusterInfo]]:
    """A `concurrent.futures` executor on Dask, closed (and a local cluster stopped) on exit.

    With `scheduler` (e.g. 'tcp://10.0.0.1:8786') it connects to a running Dask scheduler and
    uses whatever workers join it; otherwise it starts a local cluster of `workers` worker
    processes with one thread each (a simulation is single-threaded Python) and the settings of
    `LOCAL_DASK_CONFIG`. Raises
    RuntimeError when Dask's `distributed` package is missing, OSError when the scheduler
    cannot be reached within `connect_timeout` seconds.
    """
    if (scheduler is None) == (workers is None):
        raise ValueError("give either a scheduler address or a number of local workers")
    try:
        # Typed as Any: distributed's API is untyped, and it is imported only when a cluster is asked for.
        dd: Any = importlib.import_module("distributed")
    except ImportError as exc:  # pragma: no cover - distributed is a dependency
        raise RuntimeError(
            f"Dask's 'distributed' package is needed for cluster sweeps: pip install distributed ({exc})"
        ) from None
    cluster = None
    if scheduler is not None:
        try:
            client = dd.Client(scheduler, timeout=f"{connect_timeout}s")
        except (OSError, TimeoutError) as exc:
            raise OSError(f"cannot reach the Dask scheduler at {scheduler}: {exc}") from None
    else:
        assert workers is not None
        _check_workers(workers)
        dask: Any = importlib.import_module("dask")
        with dask.config.set(LOCAL_DASK_CONFIG):  # the nannies hand this config to their workers
            cluster = dd.LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None)
        client = dd.Client(cluster)
    try:
        info = ClusterInfo(
            str(client.scheduler.address), len(client.scheduler_info().get("workers", {})), cluster is not None
        )
        # pure=False: every point is a task of its own even if two are equal.
        yield client.get_executor(pure=False), info
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
