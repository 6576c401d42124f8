"""Dask distributed executors for sweeps: a local cluster of worker processes, or an existing one.

Points are sent to the workers as pickled `Point`s and evaluated by the importable top-level
`runner.evaluate`, so every worker needs isthmus installed and the traces at the same paths as
the machine that runs `isthmus experiment`.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from concurrent.futures import Executor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ClusterInfo:
    """What the executor runs on: the scheduler's address and the workers connected at the start."""

    address: str
    workers: int
    local: bool


@contextmanager
def dask_executor(
    *, scheduler: str | None = None, workers: int | None = None, connect_timeout: float = 10.0
) -> Iterator[tuple[Executor, ClusterInfo]]:
    """A `concurrent.futures` executor on Dask, closed (and a local cluster stopped) on exit.

    With `scheduler` (e.g. 'tcp://10.0.0.1:8786') it connects to a running Dask scheduler and
    uses whatever workers join it; otherwise it starts a local cluster of `workers` worker
    processes with one thread each (a simulation is single-threaded Python). Raises
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
        if workers < 1:
            raise ValueError(f"--workers must be at least 1, got {workers}")
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
