"""A fake batch system and a fake cloud provider, in memory, for tests only.

As Apache Libcloud's Dummy driver does for its drivers, these implement the same interfaces as
the real ones (`isthmus.backends.api.BatchSystem`, `isthmus.backends.api.CloudProvider`) without
talking to anything: a test builds a live site on them and drives the outside world through
their controls - a job starts, finishes or fails; a VM boots, fails or vanishes; the site
refuses a submission or a lease, or stops answering. No configuration selects them: a test hands
them to a site backend directly (`connect` is the factory the site calls with its manager id).

Calls may come from a site's worker thread while the test changes the state, so every method
takes the fake's lock.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from isthmus.backends.api import Capacity, Instance, LeaseRequest, RemoteState, RunRequest, WaitingJob
from isthmus.backends.errors import CapacityError, SiteError
from isthmus.backends.libcloud_provider import MANAGER_TAG, VM_TAG
from isthmus.model.states import JobState

__all__ = ["FakeBatchSystem", "FakeCloud", "FakeJob", "FakeVm"]


@dataclass
class FakeJob:
    """One job the fake batch system holds: what was submitted and its state now."""

    provider_id: str
    manager_id: str
    request: RunRequest
    state: JobState = JobState.QUEUED
    native: str = "PENDING"
    exit_code: int | None = None
    reason: str = ""
    nodes: tuple[str, ...] = ()

    def remote(self) -> RemoteState:
        """What `status` and `find` report of it."""
        return RemoteState(
            self.provider_id, self.state, self.native, self.request.key, self.exit_code, self.reason, self.nodes
        )


class FakeBatchSystem:
    """An in-memory `BatchSystem` of `nodes` nodes of `cores_per_node` processors (tests only).

    Submitted jobs wait (QUEUED) until the test moves them: `run`, `finish`, `fail`, `lose`,
    `cancel_outside`, `forget`. `refuse_next` makes the next submissions fail with the given
    error; `unavailable` makes every call fail (the system does not answer); `down` and
    `waiting_local` change what `capacity` reports.
    """

    def __init__(self, name: str = "fake-batch", nodes: int = 2, cores_per_node: int = 4) -> None:
        self.name = name
        self.manager_id = ""
        self.nodes = nodes
        self.cores_per_node = cores_per_node
        #: processors on nodes down or drained (not usable)
        self.down = 0
        #: processors local users' jobs (not this manager's) hold
        self.busy_local = 0
        #: processors local users' jobs wait for
        self.waiting_local = 0
        #: those jobs one by one (what `capacity` lists; `waiting_local` is then their processors)
        self.waiting_jobs: tuple[WaitingJob, ...] = ()
        #: every call fails with this error while it is set (the system does not answer)
        self.unavailable: SiteError | None = None
        self.jobs: dict[str, FakeJob] = {}
        #: the provider ids cancelled through `cancel`, in order
        self.cancelled: list[str] = []
        self._refusals: list[SiteError] = []
        self._ids = itertools.count(100)
        self._lock = threading.Lock()

    def connect(self, manager_id: str) -> FakeBatchSystem:
        """The site's factory (`Callable[[str], BatchSystem]`): this system, as manager `manager_id`."""
        self.manager_id = manager_id
        return self

    # ---------------------------------------------------------------------- BatchSystem

    def _check(self) -> None:
        if self.unavailable is not None:
            raise self.unavailable

    def submit(self, requests: Sequence[RunRequest]) -> list[str | SiteError]:
        """Queue each request; its id, or the next refusal `refuse_next` set."""
        with self._lock:
            self._check()
            out: list[str | SiteError] = []
            for r in requests:
                if self._refusals:
                    out.append(self._refusals.pop(0))
                    continue
                pid = str(next(self._ids))
                self.jobs[pid] = FakeJob(pid, self.manager_id, r)
                out.append(pid)
            return out

    def status(self, provider_ids: Sequence[str]) -> dict[str, RemoteState]:
        """The state of each job it knows (a forgotten job is absent)."""
        with self._lock:
            self._check()
            return {pid: self.jobs[pid].remote() for pid in provider_ids if pid in self.jobs}

    def cancel(self, provider_ids: Sequence[str]) -> dict[str, SiteError | None]:
        """Cancel each job (CANCELLED); None for success, also for a job it does not know."""
        with self._lock:
            self._check()
            for pid in provider_ids:
                self.cancelled.append(pid)
                job = self.jobs.get(pid)
                if job is not None and not job.state.terminal:
                    job.state, job.native = JobState.CANCELLED, "CANCELLED"
            return dict.fromkeys(provider_ids)

    def capacity(self) -> Capacity:
        """Processors in total, usable (not `down`) and free (minus running jobs and local users')."""
        with self._lock:
            self._check()
            total = self.nodes * self.cores_per_node
            usable = total - self.down
            busy = sum(j.request.size for j in self.jobs.values() if j.state is JobState.RUNNING)
            free = max(0, usable - busy - self.busy_local)
            waiting = sum(j.cpus for j in self.waiting_jobs) if self.waiting_jobs else self.waiting_local
            return Capacity(total, usable, free, waiting, waiting_jobs=self.waiting_jobs)

    def find(self) -> dict[str, RemoteState]:
        """Every job of the connected manager it holds, ended ones included."""
        with self._lock:
            self._check()
            return {pid: j.remote() for pid, j in self.jobs.items() if j.manager_id == self.manager_id}

    # ------------------------------------------------------------------------- controls

    def refuse_next(self, error: SiteError, times: int = 1) -> None:
        """The next `times` submissions are refused with `error`."""
        with self._lock:
            self._refusals.extend([error] * times)

    def by_key(self, key: str) -> FakeJob:
        """The latest job submitted under the manager's key `key` (KeyError when none)."""
        with self._lock:
            found = [j for j in self.jobs.values() if j.request.key == key]
        if not found:
            raise KeyError(key)
        return found[-1]

    def _set(self, pid: str, **changes: object) -> None:
        with self._lock:
            job = self.jobs[pid]
            for k, v in changes.items():
                setattr(job, k, v)

    def run(self, pid: str, nodes: tuple[str, ...] = ("node1",)) -> None:
        """Job `pid` runs on `nodes`."""
        self._set(pid, state=JobState.RUNNING, native="RUNNING", nodes=nodes)

    def finish(self, pid: str, exit_code: int = 0) -> None:
        """Job `pid` ends with `exit_code` (COMPLETED for 0, else FAILED)."""
        state = JobState.COMPLETED if exit_code == 0 else JobState.FAILED
        self._set(pid, state=state, native=state.name, exit_code=exit_code)

    def fail(self, pid: str, reason: str = "", state: JobState = JobState.FAILED) -> None:
        """Job `pid` ends as `state` (FAILED, TIMEOUT, ...) without an exit code, saying `reason`."""
        self._set(pid, state=state, native=state.name, reason=reason)

    def lose(self, pid: str, native: str = "NODE_FAIL") -> None:
        """Job `pid` is lost (its node failed): the manager requeues its run."""
        self._set(pid, state=JobState.LOST, native=native)

    def cancel_outside(self, pid: str) -> None:
        """Someone cancelled job `pid` through the system itself."""
        self._set(pid, state=JobState.CANCELLED, native="CANCELLED")

    def forget(self, pid: str) -> None:
        """The system no longer knows job `pid` (purged from its records)."""
        with self._lock:
            self.jobs.pop(pid, None)


@dataclass
class FakeVm:
    """One instance the fake cloud holds."""

    provider_id: str
    request: LeaseRequest
    tags: dict[str, str] = field(default_factory=dict)
    state: str = "pending"
    reason: str = ""

    def instance(self) -> Instance:
        """What `lease` and `instances` report of it."""
        return Instance(self.provider_id, self.state, dict(self.tags), reason=self.reason)


class FakeCloud:
    """An in-memory `CloudProvider` (tests only).

    Leased instances are "pending" until the test moves them: `boot` (running), `fail` (error),
    `vanish` (terminated outside the manager). `max_instances` bounds the live instances
    (a lease beyond it is refused with CapacityError, as a provider out of capacity does);
    `refuse_next` refuses the next leases with any error; `unavailable` makes every call fail.
    As EC2's client token, a lease under a key a live instance already has returns that instance.
    """

    def __init__(self, name: str = "fake-cloud", max_instances: int | None = None) -> None:
        self.name = name
        self.manager_id = ""
        self.max_instances = max_instances
        self.unavailable: SiteError | None = None
        self.vms: dict[str, FakeVm] = {}
        #: the provider ids released through `release`, in order
        self.released: list[str] = []
        self._refusals: list[SiteError] = []
        self._ids = itertools.count(1)
        self._lock = threading.Lock()

    def connect(self, manager_id: str) -> FakeCloud:
        """The site's factory (`Callable[[str], CloudProvider]`): this cloud, as manager `manager_id`."""
        self.manager_id = manager_id
        return self

    # --------------------------------------------------------------------- CloudProvider

    def _check(self) -> None:
        if self.unavailable is not None:
            raise self.unavailable

    def _alive(self) -> list[FakeVm]:
        return [v for v in self.vms.values() if v.state != "terminated"]

    def lease(self, requests: Sequence[LeaseRequest]) -> list[Instance | SiteError]:
        """Start each VM (pending); the refusals set, or CapacityError beyond `max_instances`."""
        with self._lock:
            self._check()
            out: list[Instance | SiteError] = []
            for r in requests:
                same = [v for v in self._alive() if v.tags.get(VM_TAG) == r.key]
                if same:
                    out.append(same[0].instance())
                elif self._refusals:
                    out.append(self._refusals.pop(0))
                elif self.max_instances is not None and len(self._alive()) >= self.max_instances:
                    out.append(CapacityError(f"insufficient capacity: {self.max_instances} instances", site=self.name))
                else:
                    pid = f"i-{next(self._ids):04d}"
                    tags = {**r.tags, MANAGER_TAG: self.manager_id, VM_TAG: r.key}
                    vm = self.vms[pid] = FakeVm(pid, r, tags)
                    out.append(vm.instance())
            return out

    def release(self, provider_ids: Sequence[str]) -> dict[str, SiteError | None]:
        """Terminate each VM; None for success, also for one it does not have."""
        with self._lock:
            self._check()
            for pid in provider_ids:
                self.released.append(pid)
                vm = self.vms.get(pid)
                if vm is not None:
                    vm.state = "terminated"
            return dict.fromkeys(provider_ids)

    def instances(self) -> list[Instance]:
        """Every VM tagged with the connected manager's id, terminated ones included."""
        with self._lock:
            self._check()
            return [v.instance() for v in self.vms.values() if v.tags.get(MANAGER_TAG) == self.manager_id]

    # ------------------------------------------------------------------------- controls

    def refuse_next(self, error: SiteError, times: int = 1) -> None:
        """The next `times` leases are refused with `error`."""
        with self._lock:
            self._refusals.extend([error] * times)

    def by_key(self, key: str) -> FakeVm:
        """The latest instance leased under the VM key `key` (KeyError when none)."""
        with self._lock:
            found = [v for v in self.vms.values() if v.tags.get(VM_TAG) == key]
        if not found:
            raise KeyError(key)
        return found[-1]

    def alive(self) -> list[FakeVm]:
        """The instances not terminated."""
        with self._lock:
            return self._alive()

    def _set(self, pid: str, state: str, reason: str = "") -> None:
        with self._lock:
            vm = self.vms[pid]
            self.vms[pid] = replace(vm, state=state, reason=reason)

    def boot(self, pid: str) -> None:
        """Instance `pid` is running (its pilot still has to register with the manager)."""
        self._set(pid, "running")

    def fail(self, pid: str, reason: str = "boot failed") -> None:
        """Instance `pid` is in error."""
        self._set(pid, "error", reason)

    def vanish(self, pid: str) -> None:
        """Instance `pid` was terminated outside the manager."""
        self._set(pid, "terminated", "terminated outside isthmus")
