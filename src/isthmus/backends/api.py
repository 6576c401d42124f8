"""The site interface for external systems: batch systems and clouds, driven off the scheduling loop.

Two small protocols, after Parsl's providers and Apache Libcloud's drivers:

- `BatchSystem` (Slurm, Grid Engine, local processes): `submit` many, `status` of many in one
  call, `cancel` many, `capacity` (nodes up, free, and waiting local jobs), and `find` (what the
  system holds that this manager submitted, for reconciliation after a restart);
- `CloudProvider` (EC2, OpenStack, ... through Libcloud): `lease` and `release` many, and
  `instances` tagged with this manager's id.

Provider ids are opaque strings (a Slurm job id, an EC2 instance id). Native states are
translated into `isthmus.model.states.JobState` through a table per system. Every call may fail
with a typed `isthmus.backends.errors.SiteError` and may be slow: `SiteWorker` runs a site's
calls in a thread of its own and hands each result back to the event loop as a callback, so a
slow site never stalls a scheduling round or the API. What a system holds after a restart is
matched with the recorded runs by each site backend's `begin` (`isthmus.backends.batch_site`,
`isthmus.backends.pilot_jobs_site`, `isthmus.backends.cloud_site`), from `find` or `instances`.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from isthmus.backends.errors import SiteError, TransientError
from isthmus.model.states import JobState

log = logging.getLogger("isthmus.backends")

T = TypeVar("T")


@dataclass(frozen=True)
class RunRequest:
    """One thing to run on a batch system: a user's job run (direct mode) or a pilot.

    `key` is the manager's own name for it (also put in the job's name or a comment, so that
    `find` can recognize it after a restart); `walltime` is enforced by the system.
    """

    key: str
    command: tuple[str, ...]
    size: int
    walltime: float | None = None
    name: str = ""
    nodes: int | None = None  # exactly this many nodes (a pilot holds one), else the system's choice
    cwd: str | None = None
    stdout: str | None = None
    stderr: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    #: (Unix account, its group id) the job runs as when not the submitter's ([users]; root submits)
    run_as: tuple[str, int] | None = None


@dataclass(frozen=True)
class RemoteState:
    """What a batch system says of one of its jobs, translated."""

    provider_id: str
    state: JobState
    native: str
    key: str = ""
    exit_code: int | None = None
    reason: str = ""
    nodes: tuple[str, ...] = ()


@dataclass(frozen=True)
class WaitingJob:
    """What one pending local job (not submitted by this manager) asks for: its nodes (the
    minimum the system will give it), its processors in all, and its memory per node in MiB
    (0: not said, or the system cannot tell)."""

    nodes: int
    cpus: int
    memory_per_node: int = 0

    def nodes_needed(self, cores_per_node: int, memory_per_node: int = 0) -> int:
        """Whole nodes of `cores_per_node` processors (and `memory_per_node` MiB, 0: unknown)
        this job needs: its node count, at least its processors' worth, and at least one node
        per node's worth of its memory."""
        need = max(1, self.nodes, math.ceil(self.cpus / max(1, cores_per_node)))
        if memory_per_node > 0 and self.memory_per_node > memory_per_node:
            return 0  # no node of the site can ever hold it: freeing nodes would not start it
        return need


@dataclass(frozen=True)
class Capacity:
    """A site's processors now: total, usable (not down or drained) and free, plus the
    processors local jobs (not submitted by this manager) wait for and those jobs one by one."""

    total: int
    usable: int
    free: int
    waiting_local: int = 0
    reason: str = ""
    waiting_jobs: tuple[WaitingJob, ...] = ()
    #: the memory of the smallest usable node in MiB (0: unknown)
    node_memory: int = 0


class BatchSystem(Protocol):
    """A cluster's local resource manager, driven in batches."""

    name: str

    def submit(self, requests: Sequence[RunRequest]) -> list[str | SiteError]:
        """Submit each request; its provider id, or the error that refused it."""
        ...

    def status(self, provider_ids: Sequence[str]) -> dict[str, RemoteState]:
        """The state of each job, in one call to the system; a job it no longer knows is absent."""
        ...

    def cancel(self, provider_ids: Sequence[str]) -> dict[str, SiteError | None]:
        """Cancel each job; None for success."""
        ...

    def capacity(self) -> Capacity:
        """The site's processors now (discovered from the system)."""
        ...

    def find(self) -> dict[str, RemoteState]:
        """Every job the system holds that this manager submitted, by provider id (with its key)."""
        ...


@dataclass(frozen=True)
class Instance:
    """A cloud VM as its provider reports it."""

    provider_id: str
    state: str  # pending | running | error | terminated (translated by the provider's driver)
    tags: Mapping[str, str] = field(default_factory=dict)
    address: str = ""
    reason: str = ""


@dataclass(frozen=True)
class LeaseRequest:
    """One VM to lease: its instance type and image, the tags that name it, its user data."""

    key: str
    instance_type: str
    image: str
    tags: Mapping[str, str] = field(default_factory=dict)
    user_data: str = ""


class CloudProvider(Protocol):
    """An IaaS cloud, driven in batches."""

    name: str

    def lease(self, requests: Sequence[LeaseRequest]) -> list[Instance | SiteError]:
        """Start each VM; its instance, or the error that refused it."""
        ...

    def release(self, provider_ids: Sequence[str]) -> dict[str, SiteError | None]:
        """Terminate each VM; None for success."""
        ...

    def instances(self) -> list[Instance]:
        """Every VM the provider holds tagged with this manager's id."""
        ...


class SiteWorker:
    """Runs one site's blocking calls in a thread of its own; results come back on the event loop.

    `call(fn, *args, done=cb)` returns at once; `cb(result_or_error)` runs later on `loop`. An
    exception that is not a `SiteError` is logged and delivered as a `TransientError`, so a
    backend bug or an unexpected library error never escapes into the scheduling loop. Calls to
    one site run in order; different sites run concurrently.
    """

    def __init__(self, name: str, loop: asyncio.AbstractEventLoop) -> None:
        self.name = name
        self.loop = loop
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"site-{name}")
        self.pending = 0

    def call(self, fn: Callable[..., T], *args: Any, done: Callable[[T | SiteError], None]) -> None:
        """Run `fn(*args)` off the loop; deliver its result (or SiteError) to `done` on the loop."""
        self.pending += 1
        future = self._pool.submit(fn, *args)
        future.add_done_callback(lambda f: self.loop.call_soon_threadsafe(self._deliver, f, done))

    def _deliver(self, future: Future[T], done: Callable[[T | SiteError], None]) -> None:
        self.pending -= 1
        try:
            result: T | SiteError = future.result()
        except SiteError as exc:
            if not exc.site:
                exc.site = self.name
            result = exc
        except Exception as exc:  # normalized at the boundary
            log.exception("site %s: unexpected error", self.name)
            result = TransientError(f"unexpected error: {exc!r}", site=self.name)
        done(result)

    def close(self) -> None:
        """Stop accepting calls; running ones finish in their thread."""
        self._pool.shutdown(wait=False, cancel_futures=True)
