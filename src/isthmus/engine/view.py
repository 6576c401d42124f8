"""The read-only view of an engine's state that policies decide on.

The view hands out no backend object and no mutable container of the engine: sites are
`SiteView`/`CloudView` proxies exposing only what the `isthmus.policies.api` protocols list,
mappings are `MappingProxyType`s, sequences are read-only wrappers. The proxies read the live
state (no copy per round), so a policy sees the state as of the moment it decides.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Literal

from isthmus.engine.backend import CloudBackend, SiteBackend, Vm
from isthmus.engine.peering import PeerState, resource_data
from isthmus.engine.readonly import BucketsView, ReadOnlyList, SortedBucketsView, SortedGroup
from isthmus.model.job import Job
from isthmus.model.peers import PeerRole, ResourceData
from isthmus.model.site import Site
from isthmus.model.states import VmState

if TYPE_CHECKING:
    from isthmus.engine.ops import ViewOps
    from isthmus.engine.state import JobEntry
    from isthmus.policies.api import BagsInfo, QueueColumnsView, QueueHeadsView, VmInfo


class VmView:
    """One leased VM, read-only (provisioning policies read every idle VM every round: its
    properties are compiled with mypyc, setup.py)."""

    __slots__ = ("_vm",)

    def __init__(self, vm: Vm) -> None:
        self._vm = vm

    @property
    def id(self) -> int:
        """The VM's id on its site."""
        return self._vm.id

    @property
    def cores(self) -> int:
        """Processors of the VM."""
        return self._vm.cores

    @property
    def free(self) -> int:
        """Processors not running anything."""
        return self._vm.free

    @property
    def bagged(self) -> int:
        """Cores held by launchers of bags of tasks (preempted when needed)."""
        return self._vm.bagged

    @property
    def leased_at(self) -> float:
        """When billing started."""
        return self._vm.leased_at

    @property
    def idle_since(self) -> float:
        """When the VM last became idle (-1 while busy)."""
        return self._vm.idle_since

    @property
    def idle(self) -> bool:
        """Ready and running no job (bags may scavenge it)."""
        return self._vm.idle

    @property
    def reserved_for(self) -> int:
        """The queued job this VM is reserved for (ReserveVms), -1 when none."""
        return self._vm.reserved_for

    @property
    def type(self) -> int:
        """Index of its instance type in the site's `types`."""
        return self._vm.type

    @property
    def image(self) -> int:
        """Index of its image in the site's `vm_images`."""
        return self._vm.image

    @property
    def owner(self) -> str | None:
        """The user it serves, None for any user."""
        return self._vm.owner

    @property
    def retiring(self) -> bool:
        """Retired: takes no new job, released when its runs end."""
        return self._vm.retiring

    @property
    def ready(self) -> bool:
        """Booted and usable (False while booting)."""
        return self._vm.state is VmState.READY


class SiteView:
    """A site's current state, read-only: capacity, running jobs and their estimated ends."""

    __slots__ = ("_b", "_ends", "index", "name", "running", "site")

    def __init__(self, backend: SiteBackend) -> None:
        self._b = backend
        self.index = backend.index
        self.site: Site = backend.site
        self.name = backend.name
        #: running job id -> its entry
        self.running: Mapping[int, JobEntry] = MappingProxyType(backend.running)
        self._ends: ReadOnlyList | None = None

    @property
    def by_estimated_end(self) -> Sequence[tuple[float, int]]:
        """(estimated end, job id) of running jobs, in order (the site keeps it once read)."""
        ends = self._ends
        if ends is None:
            ends = self._ends = ReadOnlyList(self._b.by_estimated_end)
        return ends

    @property
    def free(self) -> int:
        """Processors usable now and running nothing."""
        return self._b.free

    @property
    def online(self) -> int:
        """Processors usable now (busy or not)."""
        return self._b.online

    @property
    def reserved(self) -> int:
        """Free processors held by reservations for queued jobs (part of `free`)."""
        return self._b.reserved_cores

    def free_for(self, job_id: int) -> int:
        """Free processors job `job_id` may use: `free` less those reserved for other jobs."""
        return self._b.free_for(job_id)

    @property
    def busy(self) -> int:
        """Processors running jobs now."""
        return self._b.online - self._b.free

    def available(self, now: float) -> bool:
        """Whether the site may be used at `now` (its availability window)."""
        return self._b.available(now)


class CloudView(SiteView):
    """A cloud site's current state, read-only: also its leased and booting VMs."""

    __slots__ = ("_c", "_vm_views")

    def __init__(self, backend: CloudBackend) -> None:
        super().__init__(backend)
        self._c = backend  # `_b` typed as the cloud it is
        #: one proxy per VM, made once (provisioning policies read the idle VMs every round)
        self._vm_views: dict[int, VmView] = {}

    @property
    def booting(self) -> int:
        """VMs leased and still booting."""
        return self._c.booting

    @property
    def leased(self) -> int:
        """VMs leased and not being released (booting or ready)."""
        return self._c.leased

    def idle_vm_times(self) -> Sequence[tuple[int, float, float, int]]:
        """(id, leased at, idle since, job reserved for or -1) of each idle VM, longest idle first."""
        return [(vm.id, vm.leased_at, vm.idle_since, vm.reserved_for) for vm in self._c.idle_vms()]

    @property
    def selective(self) -> bool:
        """True when not every VM here may take every job (several types or images, VMs serving
        one user, retiring VMs): a policy then asks `vm_accepts`."""
        return self._c.selective

    def vm_accepts(self, vm: VmInfo, job: Job) -> bool:
        """Whether `vm` may take a run of `job` once ready (requirements, user, retiring)."""
        real = self._c.vms.get(vm.id)
        return real is not None and self._c.vm_accepts(real, job)

    def free_matching(self, job: Job) -> int:
        """Free processors on ready VMs that may take `job`."""
        return self._c.free_matching(job)

    def vms(self) -> Sequence[VmView]:
        """The VMs leased and not being released (booting and ready), by id."""
        return self._views(vm for vm in self._c.vms.values() if vm.state in (VmState.BOOTING, VmState.READY))

    def idle_vms(self) -> Sequence[VmView]:
        """Ready VMs running nothing, longest idle first."""
        return self._views(self._c.idle_vms())

    def _views(self, vms: Iterable[Vm]) -> list[VmView]:
        views = self._vm_views
        out = []
        for vm in vms:
            v = views.get(vm.id)
            if v is None or v._vm is not vm:
                v = views[vm.id] = VmView(vm)
            out.append(v)
        if len(views) > 2 * len(self._c.vms) + 64:  # forget the proxies of VMs gone long ago
            live = self._c.vms
            self._vm_views = {k: v for k, v in views.items() if live.get(k) is v._vm}
        return out


class PeerView:
    """One peer manager as a policy sees it, read-only."""

    __slots__ = ("_p",)

    def __init__(self, peer: PeerState) -> None:
        self._p = peer

    @property
    def index(self) -> int:
        """The peer's index (the `peer` of a ForwardJob)."""
        return self._p.index

    @property
    def name(self) -> str:
        """The peer manager's name."""
        return self._p.name

    @property
    def role(self) -> PeerRole:
        """What the peer is to this manager."""
        return self._p.role

    @property
    def up(self) -> bool:
        """False once the peer missed its heartbeats."""
        return self._p.up

    @property
    def distance(self) -> float:
        """One-way message delay to the peer, seconds."""
        return self._p.distance

    @property
    def data(self) -> ResourceData | None:
        """The peer's latest resource data (None before the first arrives); immutable."""
        return self._p.data


class EngineView:
    """What policies may read of an engine. It holds no state of its own."""

    __slots__ = ("_clouds", "_e", "_sites")

    def __init__(self, engine: ViewOps) -> None:
        self._e = engine
        self._sites: tuple[SiteView, ...] = tuple(
            CloudView(b) if isinstance(b, CloudBackend) else SiteView(b) for b in engine.backends
        )
        self._clouds: tuple[CloudView | None, ...] = tuple(s if isinstance(s, CloudView) else None for s in self._sites)

    @property
    def now(self) -> float:
        """The current time (simulated or wall), given as data."""
        return self._e.clock.now

    @property
    def sites(self) -> Sequence[SiteView]:
        """Every site, by index."""
        return self._sites

    def free_processors(self) -> list[int]:
        """Free processors per site index, as a fresh list the policy may count down: on a
        cluster, those held for waiting jobs (`held_for`) left out."""
        if self._e.bags.hold_keys:
            return [b.free - b.reserved_cores if b.holds else b.free for b in self._e.backends]
        return [b.free for b in self._e.backends]

    @property
    def allocation_order(self) -> Literal["any", "strict", "easy"]:
        """How the allocation policy starts queued jobs: strictly in queue order (`head_of_line`:
        strict FCFS, TAGS-chain), EASY backfilling behind the head's reservation, or any job that
        fits (the fair-share policies claim bag processors for waiting jobs accordingly)."""
        a = self._e.allocation
        if a.head_of_line:
            return "strict"
        return "easy" if a.backfills_behind_reservation else "any"

    @property
    def holding(self) -> bool:
        """True while a cluster holds processors for a waiting job (bags gave them back for it):
        `free_processors` leaves them out and only that job may start on them (`held_for`)."""
        return bool(self._e.bags.hold_keys)

    def holds(self) -> dict[int, dict[int, int]]:
        """Waiting job id -> {site index: free processors held for it there} (only that job may
        use them; they are not in `free_processors`); empty when no site holds any."""
        out: dict[int, dict[int, int]] = {}
        if self._e.bags.hold_keys:
            for b in self._e.backends:
                for job_id, n in b.holds.items():
                    if n:
                        out.setdefault(job_id, {})[b.index] = n
        return out

    @property
    def stages(self) -> int:
        """How many queues (stages) there are."""
        return len(self._e.queue_book.queues)

    @property
    def round_interval(self) -> float | None:
        """The scheduling period, None when rounds are event-triggered."""
        return self._e.round_interval

    @property
    def queued(self) -> int:
        """Jobs waiting in all queues."""
        return sum(len(q) for q in self._e.queue_book.queues)

    def queue(self, stage: int = 0) -> Collection[JobEntry]:
        """Jobs waiting in queue `stage`, in the order they entered it."""
        return self._e.queue_book.queues[stage].values()

    def queue_by_size(self, stage: int = 0) -> Mapping[int, Mapping[int, JobEntry]]:
        """Jobs waiting in queue `stage` grouped by size: size -> {job id: entry} in queue order.

        Kept only for an allocation policy that declares `uses_size_index = True`, from its
        first read on.
        """
        book = self._e.queue_book
        if not book.size_index:
            if not book.index_declared:
                raise RuntimeError(
                    f"policy {book.allocation.name!r} reads queue_by_size but does not declare uses_size_index = True"
                )
            book.indexes()
        return BucketsView(book.buckets[stage])

    def queue_by_runtime(self, stage: int = 0) -> Mapping[int, SortedGroup]:
        """Jobs waiting in queue `stage` grouped by size, each group shortest runtime first (then
        queue order): the allocation policy's `runtime_index` says whether by prediction, actual runtime or estimate.
        A size whose jobs have all left maps to an empty group.
        """
        book = self._e.queue_book
        if book.runtime_key is None:
            raise RuntimeError(
                f"policy {book.allocation.name!r} reads queue_by_runtime but does not declare runtime_index"
            )
        book.indexes()
        return SortedBucketsView(book.sorted_buckets[stage], self._e.entries)

    def queue_columns(self, stage: int = 0) -> QueueColumnsView:
        """Jobs waiting in queue `stage` as read-only NumPy columns (rows in no particular order;
        `seq` gives queue order), for policies that declare `uses_queue_columns`."""
        e = self._e
        if not e.allocation.uses_queue_columns:
            raise RuntimeError(
                f"policy {e.allocation.name!r} reads queue_columns but does not declare uses_queue_columns"
            )
        e.queue_book.indexes()
        columns = e.queue_book.columns
        assert columns is not None
        return columns[stage].view()

    def queue_heads(self, stage: int = 0) -> QueueHeadsView | None:
        """Jobs waiting in queue `stage` as groups of equal (size, predicted runtime), one row per
        group with its head, or None while queue order is not queued_at order (a restored job);
        for policies that declare `uses_queue_columns`."""
        e = self._e
        if not e.allocation.uses_queue_columns:
            raise RuntimeError(
                f"policy {e.allocation.name!r} reads queue_heads but does not declare uses_queue_columns"
            )
        e.queue_book.indexes()
        columns = e.queue_book.columns
        assert columns is not None
        return columns[stage].heads.view()

    @property
    def vm_matching(self) -> bool:
        """True when VMs are not interchangeable: a job with VM requirements was admitted, or a
        cloud has several types or images, VMs serving one user or retiring VMs."""
        if self._e.vm_jobs > 0:
            return True
        for b in self._e.clouds:  # noqa: SIM110 (a loop: no generator frame, every round)
            if b.selective:
                return True
        return False

    def stage_sites(self, stage: int) -> Sequence[int]:
        """Indices of the sites jobs of queue `stage` may run on."""
        return self._e.queue_book.stage_sites[stage]

    def cloud(self, index: int) -> CloudView | None:
        """The cloud site at `index`, None for a cluster."""
        return self._clouds[index]

    def user_runtimes(self, user: str) -> Sequence[float]:
        """Runtimes of the user's last (up to two) completed jobs, oldest first."""
        hist = self._e.history.get(user)
        return tuple(hist) if hist else ()

    @property
    def mean_runtime(self) -> float | None:
        """Mean runtime of all completed jobs so far, None before the first completes."""
        e = self._e
        return e.runtime_sum / e.runtime_count if e.runtime_count else None

    @property
    def budget_left(self) -> float | None:
        """Charged cost the budget cap still allows ($), None without a cap."""
        billing = self._e.billing
        return None if billing.budget is None else max(0.0, billing.budget - billing.spent)

    def user_can_pay(self, site: int, user: str, price: float) -> bool:
        """True when the budget caps naming users that would charge `user` an increment of
        `price` on cloud `site` can pay it now (always, without such caps)."""
        e = self._e
        return not e.ledger.per_user or e.ledger.user_can_pay(site, user, price, e.clock.now)

    @property
    def manager(self) -> str:
        """This manager's name among its peers."""
        return self._e.name

    @property
    def peers(self) -> Sequence[PeerView]:
        """The peer managers, by index (empty without a federation)."""
        fed = self._e.federation
        return tuple(PeerView(p) for p in fed.peers) if fed is not None else ()

    def unrouted(self) -> Sequence[JobEntry]:
        """Queued jobs the site-selection policy has not seen yet (new arrivals and jobs handed
        back by a peer), in arrival order; empty without a federation."""
        return tuple(self._e.forwarding.unrouted.values())

    @property
    def bags(self) -> BagsInfo:
        """The bags of tasks (malleable jobs), read-only (isthmus.engine.bags)."""
        return self._e.bags.view

    def local_resources(self) -> ResourceData:
        """This manager's resource data now, as its peers would receive it, without counting the
        unrouted jobs as queued (they are what the selection policy is placing)."""
        return resource_data(self._e, exclude_unrouted=True)
