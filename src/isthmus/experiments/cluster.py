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
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future, InvalidStateError, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Any

from isthmus.numpy_threads import import_numpy_single_threaded


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


def _start_worker() -> None:
    """Worker initializer: Ctrl-C is handled once, by the submitting process, which stops the
    workers (they start with SIGINT blocked, see `_sigint_blocked`; from here on it is ignored);
    NumPy is imported with its BLAS on one thread (isthmus.numpy_threads)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    import_numpy_single_threaded()


@contextmanager
def _sigint_blocked() -> Iterator[None]:
    """SIGINT blocked in the calling thread for the block: a worker process started meanwhile
    inherits the mask through its exec, so a Ctrl-C during its start-up (the imports before
    `_start_worker` runs) is not a KeyboardInterrupt traceback of its own. What multiprocessing's
    resource tracker does for the same reason."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


@contextmanager
def _sigint_deferred() -> Iterator[None]:
    """A Ctrl-C during the block raises its KeyboardInterrupt only when the block ends.

    Blocking SIGINT in this thread (`_sigint_blocked`) does not keep Python from raising the
    KeyboardInterrupt here: the kernel hands the signal to another thread of the process (the
    progress bar's, the pool's manager), whose C handler flags it for the main thread. Raised in
    the middle of starting a worker, that interrupt cut the start-up data the worker was reading
    from its pipe, and the worker printed an `EOFError: Ran out of input` traceback. Outside the
    main thread (where handlers cannot be set) the block runs unchanged."""
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGINT) is None:
        yield  # (None: a handler not set from Python, which could not be put back)
        return
    caught: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: caught.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if caught:  # now handled as it would have been (over an error of the block: Ctrl-C wins)
            signal.raise_signal(signal.SIGINT)


def _stop_workers(pool: ProcessPoolExecutor) -> None:
    """Terminate the pool's worker processes (points running in them are abandoned)."""
    stop = getattr(pool, "terminate_workers", None)  # Python >= 3.14
    if stop is not None:
        stop()
        return
    # Before 3.14 the executor has no public way to stop a running call: terminate its processes.
    for process in list(getattr(pool, "_processes", {}).values()):
        process.terminate()


class WorkersDiedError(RuntimeError):
    """Worker processes died (killed from outside, out of memory) more often than a sweep allows."""


#: how many times a pool's worker processes may die before its calls fail (Dask's default for a
#: task whose worker dies, `distributed.scheduler.allowed-failures`, is 3 as well)
ALLOWED_BREAKS = 3


class _PointFuture(Future[Any]):
    """The future `RespawningPool.submit` returns: it follows its call through pool restarts,
    and cancelling it cancels the call in the current pool."""

    def __init__(self) -> None:
        super().__init__()
        self.inner: Future[Any] | None = None

    def cancel(self) -> bool:
        inner = self.inner
        if inner is not None:
            inner.cancel()
        return super().cancel()


class RespawningPool(Executor):
    """`workers` spawned local processes whose death does not end the sweep.

    When a worker process dies (SIGKILL from outside, the kernel's out-of-memory killer), a
    `ProcessPoolExecutor` is broken for good: every call queued or running in it fails. Here a
    new pool is started in its place and those calls are submitted to it again (a point is a
    pure function of its inputs, so running it again gives the same row), and `notice` is told.
    After `allowed_breaks` such restarts the calls still unfinished fail with `WorkersDiedError`.
    """

    def __init__(
        self, workers: int, *, allowed_breaks: int = ALLOWED_BREAKS, notice: Callable[[str], None] | None = None
    ) -> None:
        self.workers = workers
        self.allowed_breaks = allowed_breaks
        self.breaks = 0
        self.notice = notice
        self._lock = threading.Lock()
        self._pool = self._new_pool()
        self._retired: list[ProcessPoolExecutor] = []
        self._closed = False

    def _new_pool(self) -> ProcessPoolExecutor:
        return ProcessPoolExecutor(
            max_workers=self.workers, mp_context=multiprocessing.get_context("spawn"), initializer=_start_worker
        )

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        """Run `fn(*args, **kwargs)` in a worker process; a worker's death runs it again (see the class)."""
        outer = _PointFuture()
        self._send(outer, fn, args, kwargs)
        return outer

    def _send(self, outer: _PointFuture, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        while True:
            with self._lock:
                if self._closed:
                    raise RuntimeError("cannot submit to a pool that was shut down")
                pool = self._pool
            try:
                # a submission may start a worker process, which must neither inherit an
                # unblocked SIGINT nor be cut off while it reads its start-up data
                with _sigint_deferred(), _sigint_blocked():
                    inner = pool.submit(fn, *args, **kwargs)
                break
            except BrokenProcessPool as exc:  # broken before its manager failed our calls
                if not self._replace(pool):
                    raise WorkersDiedError(self._gave_up(exc)) from None
        outer.inner = inner

        def relay(done: Future[Any]) -> None:
            try:
                if outer.done():
                    return  # cancelled by the caller
                if done.cancelled():
                    outer.cancel()
                    return
                exc = done.exception()
                if exc is None:
                    outer.set_result(done.result())
                elif isinstance(exc, BrokenProcessPool) and self._replace(pool):
                    self._send(outer, fn, args, kwargs)
                elif isinstance(exc, BrokenProcessPool):
                    outer.set_exception(WorkersDiedError(self._gave_up(exc)))
                else:
                    outer.set_exception(exc)
            except InvalidStateError:
                pass  # the caller cancelled `outer` meanwhile (Ctrl-C)
            except Exception as failed:  # shut down meanwhile, no restart left, no new pool, ...
                # never leave the caller waiting on a future that nothing would complete
                with suppress(InvalidStateError):
                    outer.set_exception(failed)

        inner.add_done_callback(relay)

    def _replace(self, broken: ProcessPoolExecutor) -> bool:
        """Put a new pool in place of `broken` (once, whichever of its calls notices first);
        False when no more restarts are allowed or the pool was shut down."""
        with self._lock:
            if self._closed:
                return False
            if self._pool is not broken:
                return True  # already replaced for another call of the same pool
            if self.breaks >= self.allowed_breaks:
                return False
            self.breaks += 1
            # not shut down here: this runs in the broken pool's manager thread while it fails
            # its calls; it stops its processes itself and is joined at the end (`_retired`)
            self._retired.append(broken)
            self._pool = self._new_pool()
            n = self.breaks
        if self.notice is not None:
            with suppress(Exception):  # saying it must not stop the sweep
                self.notice(
                    f"a worker process died (killed from outside, or out of memory?); its points run again "
                    f"in new worker processes (restart {n} of at most {self.allowed_breaks})"
                )
        return True

    def _gave_up(self, exc: BaseException) -> str:
        return (
            f"worker processes died {self.breaks + 1} times while points ran (killed from outside, or out "
            f"of memory?); the last time: {exc}"
        )

    def terminate(self) -> None:
        """Stop at once: terminate the worker processes (running points are abandoned) and run nothing more."""
        with self._lock:
            self._closed = True
            pool = self._pool
        _stop_workers(pool)
        pool.shutdown(wait=True, cancel_futures=True)
        self._join_retired()

    def _join_retired(self) -> None:
        for old in self._retired:
            old.shutdown(wait=True)
        self._retired.clear()

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Shut the current pool down (after its work, with `wait`)."""
        with self._lock:
            self._closed = True
            pool = self._pool
        pool.shutdown(wait=wait, cancel_futures=cancel_futures)
        if wait:
            self._join_retired()


@contextmanager
def process_pool(
    workers: int, *, notice: Callable[[str], None] | None = None
) -> Iterator[tuple[Executor, ClusterInfo]]:
    """`workers` local worker processes (spawned, so no lock or thread of this process is inherited).

    A worker that dies is replaced and its points run again (`RespawningPool`; `notice` is told).
    On a normal exit the pool is shut down after its work; when the block is left by an
    exception (Ctrl-C, a failed point) the points not started are cancelled and the running
    ones abandoned: their processes are terminated rather than waited for.
    """
    _check_workers(workers)
    pool = RespawningPool(workers, notice=notice)
    try:
        yield pool, ClusterInfo("local processes", workers, True)
    except BaseException:
        pool.terminate()
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
