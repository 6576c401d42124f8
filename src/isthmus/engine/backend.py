"""The site interface the engine drives, implemented by simulated and live backends alike.

A backend knows how to start and stop runs and (for clouds) lease and release VMs on one
site. It never decides anything: the engine calls it only after validating a decision.
Completions and VM state changes come back to the engine as events: a simulated backend
schedules them on the simulated clock, a live backend posts them when they really happen.
"""

from __future__ import annotations

import bisect
from abc import ABC, abstractmethod
from enum import IntEnum

from isthmus.engine.state import JobEntry
from isthmus.model.site import Site


class VmState(IntEnum):
    """Life of a leased VM."""

    BOOTING = 0
    READY = 1
    RELEASING = 2
    GONE = 3


class Vm:
    """One leased VM of a cloud site: one node with `cores` processors."""

    __slots__ = ("cores", "free", "id", "idle_since", "leased_at", "ready_at", "released_at", "state")

    def __init__(self, vm_id: int, cores: int, leased_at: float) -> None:
        self.id = vm_id
        self.cores = cores
        self.free = cores
        self.leased_at = leased_at
        self.ready_at = -1.0
        self.released_at = -1.0
        self.idle_since = -1.0
        self.state = VmState.BOOTING

    @property
    def idle(self) -> bool:
        """True when the VM is ready and runs nothing."""
        return self.state is VmState.READY and self.free == self.cores


class SiteBackend(ABC):
    """One site as the engine drives it. Policies never see it: they read a `SiteView` proxy.

    `free` is the number of processors usable now and not running anything; `online` the
    processors usable now (busy or not). `running` maps job id to its entry.
    `by_estimated_end` lists (estimated end, job id) of running jobs in order, for
    backfilling policies.
    """

    def __init__(self, index: int, site: Site) -> None:
        self.index = index
        self.site = site
        self.name = site.name
        self.free = 0
        self.online = 0
        self.running: dict[int, JobEntry] = {}
        self.by_estimated_end: list[tuple[float, int]] = []
        #: why the site cannot be used now ("" while it can): a batch system not answering, ...
        self.unavailable = ""

    @property
    def busy(self) -> int:
        """Processors running jobs now."""
        return self.online - self.free

    def _track_start(self, entry: JobEntry, now: float) -> None:
        self.running[entry.job.id] = entry
        bisect.insort(self.by_estimated_end, (now + entry.estimated_runtime, entry.job.id))

    def _track_stop(self, entry: JobEntry) -> None:
        del self.running[entry.job.id]
        key = (entry.started + entry.estimated_runtime, entry.job.id)
        i = bisect.bisect_left(self.by_estimated_end, key)
        if i < len(self.by_estimated_end) and self.by_estimated_end[i] == key:
            del self.by_estimated_end[i]
        else:  # estimated end computed differently (float noise): fall back to a scan
            # in place: the view holds a read-only window on this very list
            self.by_estimated_end[:] = [p for p in self.by_estimated_end if p[1] != entry.job.id]

    def expect_reattach(self, job_id: int, slots: list[tuple[str, int]]) -> None:
        """A run of `job_id` recorded on `slots` before a manager restart is about to be
        re-attached (`Engine.reattach`): start it there again. Sites without slots ignore it."""
        return

    # A live site behind an external system (a batch system, a cloud provider) connects in
    # `begin`, reconciling what it finds there with what was recorded (adopt, end or report
    # lost); simulated and local sites need none of these.

    def begin(self, manager_id: str) -> None:
        """Once the live manager's loop runs (after recovery): connect as `manager_id` and
        reconcile with the external system."""
        return

    def cancel_all(self) -> None:
        """At a stop that ends jobs: end what this manager started in the external system."""
        return

    def close(self) -> None:
        """At the manager's stop: release threads and connections."""
        return

    @abstractmethod
    def start(self, entry: JobEntry, now: float) -> None:
        """Begin a run of `entry` here (the engine checked that it fits)."""

    @abstractmethod
    def stop(self, entry: JobEntry, now: float) -> None:
        """Kill the current run of `entry` and free its processors."""

    @abstractmethod
    def finished(self, entry: JobEntry, now: float) -> None:
        """The current run of `entry` ended by itself: free its processors."""

    def available(self, now: float) -> bool:
        """True when the site may be used at `now` (its availability window)."""
        s = self.site
        if s.available_from is not None and now < s.available_from:
            return False
        return not (s.available_until is not None and now >= s.available_until)


class CloudBackend(SiteBackend):
    """A cloud site: VMs are leased, boot, run jobs, and are released.

    The VM bookkeeping (capacity, idle times, which VMs a job occupies) is the same for the
    simulated and the live cloud; subclasses only say how a VM is really started and stopped.
    """

    def __init__(self, index: int, site: Site) -> None:
        super().__init__(index, site)
        self.vms: dict[int, Vm] = {}
        self._next_vm = 0
        self.booting = 0
        #: VMs leased and not being released (booting or ready).
        self.leased = 0
        # Ready VMs running nothing, in the order they became idle.
        self._idle: dict[int, Vm] = {}
        self._restoring = False

    def idle_vms(self) -> list[Vm]:
        """Ready VMs running nothing, longest idle first."""
        return list(self._idle.values())

    def lease(self, count: int, now: float) -> list[int]:
        """Lease `count` VMs; return their ids (they are usable after the boot time)."""
        ids = []
        for _ in range(count):
            vm = Vm(self._next_vm, self.site.cores_per_node, now)
            self._next_vm += 1
            self.vms[vm.id] = vm
            self.booting += 1
            self.leased += 1
            ids.append(vm.id)
            if not self._restoring:
                self._boot(vm, now)
        return ids

    def restore_vm(
        self, vm_id: int, state: VmState, leased_at: float, ready_at: float | None, released_at: float | None
    ) -> Vm:
        """Re-create a VM recorded before a manager restart, without really booting or stopping it.

        Replays lease, ready and release at their recorded times through the same bookkeeping,
        so every counter stays consistent. VM ids are never reused.
        """
        self._restoring = True
        try:
            self._next_vm = vm_id
            (got,) = self.lease(1, leased_at)
            if state is not VmState.BOOTING:
                self.vm_ready(got, ready_at if ready_at is not None else leased_at)
            if state is VmState.RELEASING:
                self.release((got,), released_at if released_at is not None else leased_at)
        finally:
            self._restoring = False
        self.reserve_vm_ids(vm_id + 1)
        return self.vms[vm_id]

    def reserve_vm_ids(self, next_id: int) -> None:
        """Never hand out VM ids below `next_id` (ids recorded before a restart key VMs and pilots)."""
        self._next_vm = max(self._next_vm, next_id)

    def vm_ready(self, vm_id: int, now: float) -> bool:
        """A VM finished booting; False if it is unknown or no longer booting."""
        vm = self.vms.get(vm_id)
        if vm is None or vm.state is not VmState.BOOTING:
            return False
        vm.state = VmState.READY
        vm.ready_at = now
        vm.idle_since = now
        self._idle[vm.id] = vm
        self.booting -= 1
        self.online += vm.cores
        self.free += vm.cores
        return True

    def release(self, vm_ids: tuple[int, ...], now: float) -> None:
        """Release idle VMs (the engine checked they are idle); billing stops now."""
        for vm_id in vm_ids:
            vm = self.vms[vm_id]
            vm.state = VmState.RELEASING
            vm.released_at = now
            self.leased -= 1
            self._idle.pop(vm_id, None)
            self.online -= vm.cores
            self.free -= vm.cores
            self._shutdown(vm, now)

    def vm_gone(self, vm_id: int, now: float) -> bool:
        """A released VM finished shutting down."""
        vm = self.vms.get(vm_id)
        if vm is None or vm.state is not VmState.RELEASING:
            return False
        vm.state = VmState.GONE
        del self.vms[vm_id]
        return True

    def fail_vm(self, vm_id: int, now: float) -> None:
        """A booting or ready VM running nothing (the engine killed its runs) failed: it is gone
        now, with no shutdown; billing stops."""
        vm = self.vms.pop(vm_id)
        if vm.state is VmState.BOOTING:
            self.booting -= 1
        else:
            self.online -= vm.cores
            self.free -= vm.cores
            self._idle.pop(vm_id, None)
        self.leased -= 1
        vm.state = VmState.GONE
        vm.released_at = now
        self._discard(vm, now)

    def lease_refusal(self, now: float) -> str:
        """Why no VM can be leased here now ("" when it can): a live provider backing off after
        capacity or quota errors, or stopped by an authentication error. Simulated clouds: never."""
        return ""

    def _discard(self, vm: Vm, now: float) -> None:
        """Forget a failed VM at the site (a live cloud stops what is left of it); nothing here."""

    def start(self, entry: JobEntry, now: float, alloc: tuple[tuple[int, int], ...] | None = None) -> None:
        """Begin a run on ready VMs with free cores, or on `alloc` ((vm id, cores), ...) when given
        (a run re-attached after a manager restart keeps the VMs it was recorded on)."""
        need = entry.job.size
        chosen = []
        candidates = (
            ((self.vms[v], c) for v, c in alloc) if alloc is not None else ((vm, vm.free) for vm in self.vms.values())
        )
        for vm, cores in candidates:
            if vm.state is VmState.READY and vm.free:
                take = min(vm.free, need, cores)
                vm.free -= take
                vm.idle_since = -1.0
                self._idle.pop(vm.id, None)
                chosen.append((vm.id, take))
                need -= take
                if not need:
                    break
        entry.alloc = tuple(chosen)
        self.free -= entry.job.size
        self._track_start(entry, now)
        self._launch(entry, now)

    def _free_alloc(self, entry: JobEntry, now: float) -> None:
        for vm_id, cores in entry.alloc:
            vm = self.vms[vm_id]
            vm.free += cores
            if vm.free == vm.cores:
                vm.idle_since = now
                self._idle[vm_id] = vm
        entry.alloc = ()
        self.free += entry.job.size
        self._track_stop(entry)

    def stop(self, entry: JobEntry, now: float) -> None:
        self._kill(entry, now)
        self._free_alloc(entry, now)

    def finished(self, entry: JobEntry, now: float) -> None:
        self._free_alloc(entry, now)

    @abstractmethod
    def _boot(self, vm: Vm, now: float) -> None:
        """Really start the VM; report vm_ready when it is up."""

    @abstractmethod
    def _shutdown(self, vm: Vm, now: float) -> None:
        """Really stop the VM; report vm_gone when it is down."""

    @abstractmethod
    def _launch(self, entry: JobEntry, now: float) -> None:
        """Really start the job's run on the VMs in `entry.alloc`."""

    @abstractmethod
    def _kill(self, entry: JobEntry, now: float) -> None:
        """Really kill the job's current run."""
