"""The site interface the engine drives: the engine's port to its sites.

This module is what the engine consumes (`SiteBackend`, `CloudBackend` and the VM record `Vm`)
and stays beside it; every implementation lives in `isthmus.backends`: the simulated sites
(`backends/simulated.py`), the live local ones (`backends/local.py`) and the adapters to batch
systems and cloud providers (`backends/batch_site.py`, `pilot_jobs_site.py`, `cloud_site.py`).

A backend knows how to start and stop runs and (for clouds) lease and release VMs on one
site. It never decides anything: the engine calls it only after validating a decision.
Completions and VM state changes come back to the engine as events: a simulated backend
schedules them on the simulated clock, a live backend posts them when they really happen.
"""

from __future__ import annotations

import bisect
import itertools
from abc import abstractmethod
from collections.abc import Callable, Iterable

from mypy_extensions import mypyc_attr

from isthmus.engine.state import JobEntry
from isthmus.model.job import Job
from isthmus.model.site import Site
from isthmus.model.states import VmState
from isthmus.model.vmtypes import type_misfit

#: every attribute of a Vm (its `__slots__`; named here because a class compiled with mypyc has no
#: `__slots__` to read back)
VM_FIELDS = (
    "bagged",
    "cores",
    "free",
    "id",
    "idle_since",
    "image",
    "leased_at",
    "load",
    "owner",
    "ready_at",
    "released_at",
    "reserved_for",
    "retiring",
    "state",
    "type",
)


class Vm:
    """One leased VM of a cloud site: one node with `cores` processors."""

    __slots__ = VM_FIELDS

    def __init__(
        self, vm_id: int, cores: int, leased_at: float, vm_type: int = 0, image: int = 0, owner: str | None = None
    ) -> None:
        self.id = vm_id
        self.cores = cores
        #: index of its instance type in the site's `types`, and of its image in `vm_images`
        self.type = vm_type
        self.image = image
        #: the user this VM serves (leased for that user: it runs only that user's jobs), None: anyone
        self.owner = owner
        #: retired (RetireVms): takes no new job, released when its runs end
        self.retiring = False
        self.free = cores
        #: cores held by launchers of bags of tasks (taken from `free`, not from `load`: a VM
        #: whose cores only bags hold is idle to provisioning, isthmus.engine.bags)
        self.bagged = 0
        #: processors' worth of runs on the VM: above `cores` when runs share it (FCFS-NW)
        self.load = 0
        #: the queued job this idle VM is reserved for (ReserveVms), -1 when none
        self.reserved_for = -1
        self.leased_at = leased_at
        self.ready_at = -1.0
        self.released_at = -1.0
        self.idle_since = -1.0
        self.state = VmState.BOOTING

    @property
    def idle(self) -> bool:
        """True when the VM is ready and runs no job (launchers of bags of tasks may hold cores:
        they scavenge it, and are preempted when it goes)."""
        return self.state is VmState.READY and self.load == 0


# Not an ABC: a class compiled with mypyc shares its ABC's isinstance cache (an ABC's subclass
# would pass isinstance for its siblings), so SiteBackend is a plain class; mypy still refuses
# to instantiate a backend missing an @abstractmethod, and calling one raises.
@mypyc_attr(allow_interpreted_subclasses=True)  # the live backends are not compiled
class SiteBackend:
    """One site as the engine drives it. Policies never see it: they read a `SiteView` proxy.

    `free` is the number of processors usable now and not running anything; `online` the
    processors usable now (busy or not). `running` maps job id to its entry.
    `by_estimated_end` lists (estimated end, job id) of running jobs in order, for
    backfilling policies and the wait predictor: built on its first read and kept from then on
    (most policies never read it, and keeping it costs every start and end).
    """

    #: Whether bags of tasks may hold processors here (taken from `free`; isthmus.engine.bags)
    holds_bags = False

    def __init__(self, index: int, site: Site) -> None:
        self.index = index
        self.site = site
        self.name = site.name
        #: processors usable now and running nothing; a site whose free processors grow other
        #: than through the engine (a run's end or kill) calls `Engine.request_round`: a
        #: head-of-line policy is not asked otherwise (Engine._heads_blocked)
        self.free = 0
        self.online = 0
        self.running: dict[int, JobEntry] = {}
        # (estimated end, job id) of the running jobs in order, once `by_estimated_end` was read
        self._ends: list[tuple[float, int]] | None = None
        #: why the site cannot be used now ("" while it can): a batch system not answering, ...
        self.unavailable = ""
        #: free processors held by reservations for queued jobs (clouds: reserved VMs; clusters:
        #: processors bags gave back for a waiting rigid job, `holds`)
        self.reserved_cores = 0
        #: queued job id -> free processors held for it here (clusters: isthmus.engine.bags)
        self.holds: dict[int, int] = {}
        #: True once a run shared processors here (StartJob.share): ends are then checked
        self.sharing = False
        #: True when not every processor here can take every job (clouds with several VM types
        #: or images, VMs serving one user, retiring VMs); never for a cluster
        self.selective = False

    @property
    def busy(self) -> int:
        """Processors running jobs now."""
        return self.online - self.free

    @property
    def by_estimated_end(self) -> list[tuple[float, int]]:
        """(estimated end, job id) of the running jobs, in order. Built from `running` on the
        first read, then kept by every start and stop: the same list as if it had been kept
        from the start (a run's key is its start, `entry.started`, plus its estimated runtime,
        both fixed while it runs). The same list object from then on (views wrap it)."""
        ends = self._ends
        if ends is None:
            ends = self._ends = sorted((e.started + e.estimated_runtime, i) for i, e in self.running.items())
        return ends

    def _track_start(self, entry: JobEntry, now: float) -> None:
        """A run of `entry` began at `now` (its `started`) here."""
        self.running[entry.job.id] = entry
        ends = self._ends
        if ends is not None:
            bisect.insort(ends, (now + entry.estimated_runtime, entry.job.id))

    def _track_stop(self, entry: JobEntry) -> None:
        """The current run of `entry` here ended or was killed."""
        del self.running[entry.job.id]
        ends = self._ends
        if ends is None:
            return
        key = (entry.started + entry.estimated_runtime, entry.job.id)
        i = bisect.bisect_left(ends, key)
        if i < len(ends) and ends[i] == key:
            del ends[i]
        else:  # estimated end computed differently (float noise): fall back to a scan
            # in place: the view holds a read-only window on this very list
            ends[:] = [p for p in ends if p[1] != entry.job.id]

    def free_for(self, job_id: int) -> int:
        """Free processors job `job_id` may use: the free ones less those held for other jobs."""
        if not self.reserved_cores:
            return self.free
        return self.free - self.reserved_cores + self.holds.get(job_id, 0)

    def drop_reservation(self, job_id: int) -> list[int]:
        """End what is reserved for `job_id` here (it started or left the queue); returns the
        VMs it held (only clouds reserve)."""
        return []

    def bag_room(self, job: Job, avoid: tuple[int, ...] = ()) -> int:
        """Free processors bag `job` may hold here now: those held for waiting jobs left out (and
        on a cloud, those of the VMs `avoid`)."""
        return self.free - self.reserved_cores

    def bag_take(self, job: Job, count: int, avoid: tuple[int, ...] = ()) -> list[int]:
        """Give `count` of the free processors to bag `job` (the engine checked `bag_room`), on a
        cloud none of the VMs `avoid`; returns the VM of each (-1: a cluster's processor)."""
        self.free -= count
        return [-1] * count

    def bag_give(self, vm: int) -> None:
        """A bag gives back its processor on VM `vm` (-1: a cluster's processor)."""
        self.free += 1

    def can_share(self, size: int) -> bool:
        """Whether a run of `size` processors may start here sharing busy processors (only
        clouds: enough ready VMs to spread it over)."""
        return False

    def start_shared(self, entry: JobEntry, now: float) -> None:
        """Begin a run of `entry` sharing busy processors (the engine checked `can_share`)."""
        raise NotImplementedError(f"site {self.name} does not share processors")

    def end_due(self, entry: JobEntry, now: float) -> bool:
        """Whether a reported end of the current run of `entry` is its real end (a simulated
        site whose runs share processors moves their ends); live sites: always."""
        return True

    def ends_by(self, entry: JobEntry, t: float) -> bool:
        """True when the site knows that the current run of `entry`, started at `entry.started`,
        ends at `t` at the latest, its end handled before an event of the engine's at `t` (a
        simulated cluster replaying a recorded runtime): a runtime limit at `t` then never
        kills it and the engine schedules none. Live sites cannot know: False."""
        return False

    def full_speed_runtime(self, entry: JobEntry) -> float | None:
        """How long the current run of `entry` would have lasted alone, when sharing slowed it
        and the site knows (a simulated cloud); None otherwise."""
        return None

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
        raise NotImplementedError(f"{type(self).__name__} does not implement start")

    @abstractmethod
    def stop(self, entry: JobEntry, now: float) -> None:
        """Kill the current run of `entry` and free its processors."""
        raise NotImplementedError(f"{type(self).__name__} does not implement stop")

    @abstractmethod
    def finished(self, entry: JobEntry, now: float) -> None:
        """The current run of `entry` ended by itself: free its processors."""
        raise NotImplementedError(f"{type(self).__name__} does not implement finished")

    def available(self, now: float) -> bool:
        """True when the site may be used at `now` (its availability window)."""
        s = self.site
        if s.available_from is not None and now < s.available_from:
            return False
        return not (s.available_until is not None and now >= s.available_until)

    def describe(self) -> dict[str, object]:
        """This site now, as the API's site list shows it: its capacity, busy processors, running
        jobs and why it cannot be used ("" when it can); subclasses add what only they know."""
        s = self.site
        return {
            "index": self.index,
            "name": s.name,
            "kind": s.kind.value,
            "online": self.online,
            "free": self.free,
            "busy": self.busy,
            "running": len(self.running),
            "max_processors": s.max_processors,
            "unavailable": self.unavailable,
        }

    def describe_vm(self, vm_id: int) -> dict[str, object] | None:
        """VM `vm_id` as the engine holds it now (see `CloudBackend.describe_vm`); None here:
        a cluster holds no VMs."""
        return None


@mypyc_attr(allow_interpreted_subclasses=True)  # the live backends are not compiled
class CloudBackend(SiteBackend):
    """A cloud site: VMs are leased, boot, run jobs, and are released.

    The VM bookkeeping (capacity, idle times, which VMs a job occupies) is the same for the
    simulated and the live cloud; subclasses only say how a VM is really started and stopped.
    Bags of tasks may hold free cores of its ready VMs (never a reason to lease or keep one).
    """

    holds_bags = True

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
        #: VMs reserved per queued job id (ReserveVms), in the order they were reserved
        self.reservations: dict[int, list[int]] = {}
        self._rr = 0  # where the next shared run starts looking (round robin)
        #: True when not every ready VM can take every job (several types or images, VMs that
        #: serve one user, retiring VMs): placement then checks each VM (`vm_accepts`)
        self.selective = len(site.types) > 1 or len(site.vm_images) > 1
        #: called with (vm id, now) when a retiring VM's last run ended (set by the RetireVms kind)
        self.retired_hook: Callable[[int, float], None] | None = None
        #: whether a job may take over a VM running nothing (per-user budget caps: its user's caps
        #: must pay the VM's next increment; set by `isthmus.engine.budgets.guard_takeovers`)
        self.takeover: Callable[[Vm, Job], bool] | None = None
        #: called with (vm id, now) before a VM holding launchers of bags of tasks is released,
        #: fails or is reserved: they are preempted at once (set by the engine's BagBook)
        self.bag_evict: Callable[[int, float], None] | None = None

    # Bags of tasks scavenge the VMs leased anyway: a launcher holds one free core of a ready
    # VM (`Vm.bagged`) without making it busy (`Vm.load`), so provisioning sees the VM idle
    # since its last job ended; releasing it preempts the launchers first (`bag_evict`).

    # A launcher may hold a core of a VM serving another user (vm-share): scavenging idle cores
    # is whoever's they are (KOALA-CS), it charges the bag's user nothing (a VM's increments go
    # to the user it serves, fixed by its lease and by rigid jobs' starts, never by a launcher),
    # and that user's waiting jobs claim the cores back (isthmus.policies.fairshare.common).

    def _bag_vms(self, job: Job, avoid: tuple[int, ...]) -> Iterable[Vm]:
        ready = VmState.READY
        check = job.vm is not None
        for vm in self.vms.values():
            usable = vm.free and vm.state is ready and vm.reserved_for < 0 and not vm.retiring
            if usable and (not check or self.meets(vm, job)) and vm.id not in avoid:
                yield vm

    def bag_room(self, job: Job, avoid: tuple[int, ...] = ()) -> int:
        """Free cores of ready VMs that bag `job` may hold: not reserved, not retiring, meeting
        its VM requirements, whichever user the VM serves (budgets: see `_bag_vms`), none of the
        VMs `avoid`."""
        return sum(vm.free for vm in self._bag_vms(job, avoid))

    def bag_take(self, job: Job, count: int, avoid: tuple[int, ...] = ()) -> list[int]:
        """Give `count` free cores of ready VMs but those `avoid` to bag `job` (the engine checked
        `bag_room`), the VMs in lease order; returns the VM of each."""
        out: list[int] = []
        for vm in list(self._bag_vms(job, avoid)):
            take = min(vm.free, count - len(out))
            vm.free -= take
            vm.bagged += take
            self.free -= take
            out.extend([vm.id] * take)
            if len(out) == count:
                break
        return out

    def bag_give(self, vm: int) -> None:
        """A bag gives back its core on VM `vm`."""
        v = self.vms[vm]
        v.bagged -= 1
        free = max(0, v.cores - v.load - v.bagged)
        self.free += free - v.free
        v.free = free

    def _evict_bags(self, vm: Vm, now: float) -> None:
        """Preempt the launchers of bags on `vm` now (it is going): their cores are free again."""
        if vm.bagged and self.bag_evict is not None:
            self.bag_evict(vm.id, now)

    def free_for(self, job_id: int) -> int:
        """Free processors job `job_id` may use: the free ones less those reserved for other jobs."""
        if not self.reserved_cores:
            return self.free
        own = sum(self.vms[v].cores for v in self.reservations.get(job_id, ()))
        return self.free - self.reserved_cores + own

    def reserve(self, job_id: int, count: int, now: float) -> tuple[list[int], list[int]]:
        """Hold `count` idle VMs for `job_id`: keep those held, add idle VMs held for no one
        (longest idle first; launchers of bags on them are preempted now) or give back the latest
        ones. Returns (VMs added, VMs given back)."""
        held = self.reservations.pop(job_id, [])
        added: list[int] = []
        back: list[int] = []
        while len(held) > count:
            vm = self.vms[held.pop()]
            vm.reserved_for = -1
            self.reserved_cores -= vm.cores
            back.append(vm.id)
        if len(held) < count:
            for vm in self._idle.values():
                if vm.reserved_for < 0:
                    self._evict_bags(vm, now)
                    vm.reserved_for = job_id
                    self.reserved_cores += vm.cores
                    held.append(vm.id)
                    added.append(vm.id)
                    if len(held) == count:
                        break
        if held:
            self.reservations[job_id] = held
        return added, back

    def drop_reservation(self, job_id: int) -> list[int]:
        """End what is reserved for `job_id` here (it started or left the queue); returns the
        VMs it held."""
        ids = self.reservations.pop(job_id, None)
        if not ids:
            return []
        for vm_id in ids:
            vm = self.vms[vm_id]
            vm.reserved_for = -1
            self.reserved_cores -= vm.cores
        return ids

    def _unreserve_vm(self, vm: Vm) -> None:
        """Take a VM that is going away (released, failed) out of its job's reservation."""
        job_id = vm.reserved_for
        if job_id < 0:
            return
        vm.reserved_for = -1
        self.reserved_cores -= vm.cores
        ids = self.reservations.get(job_id)
        if ids is not None:
            ids.remove(vm.id)
            if not ids:
                del self.reservations[job_id]

    def idle_vms(self) -> list[Vm]:
        """Ready VMs running nothing, longest idle first."""
        return list(self._idle.values())

    def lease(self, count: int, now: float, vm_type: int = 0, image: int = 0, owner: str | None = None) -> list[int]:
        """Lease `count` VMs of type index `vm_type` booting image index `image`, serving `owner`
        (None: any user); return their ids (they are usable after the boot time)."""
        ids = []
        cores = self.site.types[vm_type].cores
        if owner is not None or vm_type or image:
            self.selective = True
        for _ in range(count):
            vm = Vm(self._next_vm, cores, now, vm_type, image, owner)
            self._next_vm += 1
            self.vms[vm.id] = vm
            self.booting += 1
            self.leased += 1
            ids.append(vm.id)
            if not self._restoring:
                self._boot(vm, now)
        return ids

    def restore_vm(
        self,
        vm_id: int,
        state: VmState,
        leased_at: float,
        ready_at: float | None,
        released_at: float | None,
        vm_type: int = 0,
        image: int = 0,
        owner: str | None = None,
    ) -> Vm:
        """Re-create a VM recorded before a manager restart, without really booting or stopping it.

        Replays lease, ready and release at their recorded times through the same bookkeeping,
        so every counter stays consistent. VM ids are never reused.
        """
        self._restoring = True
        try:
            self._next_vm = vm_id
            (got,) = self.lease(1, leased_at, vm_type, image, owner)
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
            self._evict_bags(vm, now)
            vm.state = VmState.RELEASING
            vm.released_at = now
            self.leased -= 1
            self._idle.pop(vm_id, None)
            self._unreserve_vm(vm)
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
        vm = self.vms[vm_id]
        self._evict_bags(vm, now)
        del self.vms[vm_id]
        self._unreserve_vm(vm)
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

    def vm_accepts(self, vm: Vm, job: Job) -> bool:
        """Whether ready VM `vm` may take a run of `job`: not retiring, serving the job's user or
        anyone, running something or affordable for the job's user (`takeover`), and of a type
        and image meeting the job's VM requirements."""
        if vm.retiring or (vm.owner is not None and vm.owner != job.user):
            return False
        if self.takeover is not None and vm.load == 0 and not self.takeover(vm, job):
            return False
        return self.meets(vm, job)

    def meets(self, vm: Vm, job: Job) -> bool:
        """Whether `vm`'s type, image and the site's networks meet `job`'s VM requirements (a job
        without requirements: always)."""
        req = job.vm
        if req is None:
            return True
        site = self.site
        if type_misfit(req, site.types[vm.type]):
            return False
        if req.image is not None:
            images = site.vm_images
            if not images or not images[vm.image].named(req.image):
                return False
        return req.network is None or req.network in site.networks

    def free_matching(self, job: Job) -> int:
        """Free processors on ready VMs that may take `job` (less those reserved for other jobs)."""
        if not self.selective and job.vm is None:
            return self.free_for(job.id)
        total = 0
        for vm in self.vms.values():
            ok = vm.free and vm.state is VmState.READY and vm.reserved_for in (-1, job.id)
            if ok and self.vm_accepts(vm, job):
                total += vm.free
        return total

    def price_of(self, vm: Vm) -> float:
        """What one billing increment of `vm` costs (its type's price; 0 on a free cloud)."""
        return self.site.type_price_per_increment(vm.type) if self.site.is_paid else 0.0

    def lease_refusal(self, now: float) -> str:
        """Why no VM can be leased here now ("" when it can): a live provider backing off after
        capacity or quota errors, or stopped by an authentication error. Simulated clouds: never."""
        return ""

    def _discard(self, vm: Vm, now: float) -> None:
        """Forget a failed VM at the site (a live cloud stops what is left of it); nothing here."""

    def can_share(self, size: int) -> bool:
        """True when the ready VMs have `size` processors in all (a shared run takes at most a
        VM's cores on each VM it is spread over)."""
        return self.online >= size

    def start_shared(self, entry: JobEntry, now: float) -> None:
        """Begin a run on the free processors and, for the rest, on busy ready VMs round robin."""
        self._place(entry, now, None, share=True)

    def _share(self, need: int, chosen: list[tuple[int, int]]) -> None:
        """Place `need` more processors on busy ready VMs, round robin from where the last
        shared run ended, at most a VM's cores on each VM not chosen yet."""
        ready = [vm for vm in self.vms.values() if vm.state is VmState.READY]
        taken = {v for v, _ in chosen}
        n = len(ready)
        for k in range(n):
            vm = ready[(self._rr + k) % n]
            if vm.id in taken:
                continue
            take = min(need, vm.cores)
            chosen.append((vm.id, take))
            need -= take
            if not need:
                self._rr = (self._rr + k + 1) % n
                return

    def _load(self, vm: Vm, delta: int, now: float) -> None:
        """Add `delta` processors' worth of run to `vm`, keeping its and the site's free counts."""
        vm.load += delta
        free = max(0, vm.cores - vm.load - vm.bagged)
        self.free += free - vm.free
        vm.free = free
        if vm.load == 0:
            if vm.state is VmState.READY:
                vm.idle_since = now
                self._idle[vm.id] = vm
        else:
            vm.idle_since = -1.0
            self._idle.pop(vm.id, None)

    def start(self, entry: JobEntry, now: float, alloc: tuple[tuple[int, int], ...] | None = None) -> None:
        """Begin a run on ready VMs with free cores, or on `alloc` ((vm id, cores), ...) when given
        (a run re-attached after a manager restart keeps the VMs it was recorded on). The VMs
        reserved for the job are taken first, VMs reserved for other jobs never (the engine
        ends the job's reservation after the start)."""
        self._place(entry, now, alloc, share=False)

    def _place(self, entry: JobEntry, now: float, alloc: tuple[tuple[int, int], ...] | None, *, share: bool) -> None:
        need = entry.job.size
        chosen = []
        job_id = entry.job.id
        candidates: Iterable[tuple[Vm, int]]
        job = entry.job
        matching = self.selective or job.vm is not None
        if alloc is None and not self.reserved_cores and not matching:
            # the common case, without a generator per start (the simulator's hot path)
            ready = VmState.READY
            for vm in self.vms.values():
                free = vm.free
                if free and vm.state is ready:
                    take = free if free < need else need
                    chosen.append((vm.id, take))
                    need -= take
                    if not need:
                        break
            candidates = ()
        elif alloc is not None:
            candidates = ((self.vms[v], c) for v, c in alloc)
        elif self.reserved_cores:
            own = [self.vms[v] for v in self.reservations.get(job_id, ())]
            others = (vm for vm in self.vms.values() if vm.reserved_for < 0)
            candidates = ((vm, vm.free) for vm in itertools.chain(own, others))
        else:
            candidates = ((vm, vm.free) for vm in self.vms.values())
        if alloc is None and matching:  # only VMs that may take the job (requirements, user, retiring)
            candidates = ((vm, c) for vm, c in candidates if self.vm_accepts(vm, job))
        for vm, cores in candidates:
            if vm.state is VmState.READY and vm.free:
                take = min(vm.free, need, cores)
                chosen.append((vm.id, take))
                need -= take
                if not need:
                    break
        if need and share:
            self._share(need, chosen)
            self.sharing = True
        vms = self.vms
        if self.sharing:
            self._loads_changing([v for v, _ in chosen], now)
            for vm_id, take in chosen:
                self._load(vms[vm_id], take, now)
        else:  # no VM over its cores: `_load` made short (the simulator's hot path)
            idle = self._idle
            taken = 0
            for vm_id, take in chosen:
                vm = vms[vm_id]
                vm.load += take
                vm.free -= take
                taken += take
                vm.idle_since = -1.0
                idle.pop(vm_id, None)
            self.free -= taken
        entry.alloc = tuple(chosen)
        self._track_start(entry, now)
        self._launch(entry, now)
        if self.sharing:
            self._loads_changed([v for v, _ in chosen], now)

    def _free_alloc(self, entry: JobEntry, now: float) -> None:
        self._track_stop(entry)
        vms = self.vms
        if self.sharing:
            self._loads_changing([v for v, _ in entry.alloc], now)
            for vm_id, cores in entry.alloc:
                self._load(vms[vm_id], -cores, now)
            self._loads_changed([v for v, _ in entry.alloc], now)
        else:  # no VM over its cores: `_load` made short (the simulator's hot path)
            idle = self._idle
            freed = 0
            for vm_id, cores in entry.alloc:
                vm = vms[vm_id]
                vm.load -= cores
                vm.free += cores
                freed += cores
                if vm.load == 0 and vm.state is VmState.READY:
                    vm.idle_since = now
                    idle[vm_id] = vm
            self.free += freed
        hook = self.retired_hook
        if hook is not None:
            for vm_id, _ in entry.alloc:
                vm = vms[vm_id]
                if vm.retiring and vm.load == 0 and vm.state is VmState.READY:
                    hook(vm_id, now)
        entry.alloc = ()

    def stop(self, entry: JobEntry, now: float) -> None:
        self._kill(entry, now)
        self._free_alloc(entry, now)

    def finished(self, entry: JobEntry, now: float) -> None:
        self._free_alloc(entry, now)

    def _loads_changing(self, vm_ids: list[int], now: float) -> None:
        """The runs on `vm_ids` are about to get more or fewer processors' worth of company
        (a simulated cloud brings their progress up to `now`); nothing on live sites."""

    def _loads_changed(self, vm_ids: list[int], now: float) -> None:
        """The load of `vm_ids` changed (a simulated cloud moves the ends of their runs)."""

    @abstractmethod
    def _boot(self, vm: Vm, now: float) -> None:
        """Really start the VM; report vm_ready when it is up."""
        raise NotImplementedError(f"{type(self).__name__} does not implement _boot")

    @abstractmethod
    def _shutdown(self, vm: Vm, now: float) -> None:
        """Really stop the VM; report vm_gone when it is down."""
        raise NotImplementedError(f"{type(self).__name__} does not implement _shutdown")

    @abstractmethod
    def _launch(self, entry: JobEntry, now: float) -> None:
        """Really start the job's run on the VMs in `entry.alloc`."""
        raise NotImplementedError(f"{type(self).__name__} does not implement _launch")

    @abstractmethod
    def _kill(self, entry: JobEntry, now: float) -> None:
        """Really kill the job's current run."""
        raise NotImplementedError(f"{type(self).__name__} does not implement _kill")

    def describe(self) -> dict[str, object]:
        """The site's figures (`SiteBackend.describe`) and its VMs: leased (booting or ready),
        booting, the most it may lease, the price per VM-hour, and `vms_by_state`: how many are
        booting, idle (ready, no job; bags' launchers may scavenge it), busy and releasing."""
        d = super().describe()
        by_state = dict.fromkeys(("booting", "idle", "busy", "releasing"), 0)
        for vm in self.vms.values():
            if vm.state is VmState.BOOTING:
                by_state["booting"] += 1
            elif vm.state is VmState.READY:
                by_state["idle" if vm.load == 0 else "busy"] += 1
            elif vm.state is VmState.RELEASING:
                by_state["releasing"] += 1
        d.update(
            leased=self.leased,
            booting=self.booting,
            max_vms=self.site.max_vms,
            price_per_hour=self.site.price_per_hour,
            vms_by_state=by_state,
        )
        return d

    def describe_vm(self, vm_id: int) -> dict[str, object] | None:
        """VM `vm_id` now, None when this site does not hold it: `activity` ("idle" or "busy" once
        ready; bags of tasks scavenging it leave it idle; None before), whether it is `retiring`,
        and `user`: the users of the jobs running on it (comma-separated; None when none)."""
        vm = self.vms.get(vm_id)
        if vm is None:
            return None
        activity = None
        if vm.state is VmState.READY:
            activity = "idle" if vm.load == 0 else "busy"
        users = sorted({e.job.user for e in self.running.values() if any(v == vm_id for v, _ in e.alloc)})
        return {"activity": activity, "retiring": vm.retiring, "user": ",".join(users) or None}
