"""What a decision kind may touch of the engine: the operations it offers kinds, and the members
of the engine's objects that kinds read or change. Nothing else of the engine is reachable.

This package sits below the policies and the engine (policies import its dataclasses, the
engine imports its kinds), so it names no engine class: each protocol lists exactly the members
the kinds use, and the engine's classes satisfy them structurally (mypy checks it where the
engine hands itself to a kind, and `isthmus.engine.ops.EngineOps` extends `KindOps` with the
engine's own types).

The engine objects a kind hands back to the engine (a job's entry to `kill`, a bag and its
processors to `bags.shrink`, a budget cap to `ledger.committed`) are type parameters: a kind is
generic in them, so it passes back exactly what the engine gave it, and the engine's methods keep
their own parameter types. `KindOps[E, B, S, C]`: E the job entries, B the bags of tasks, S their
processors (slots), C the budget caps.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    from isthmus.model.budget import BudgetCap
    from isthmus.model.events import EventLog, KillCause
    from isthmus.model.job import Job
    from isthmus.model.peers import PeerRole, ResourceData
    from isthmus.model.site import Site
    from isthmus.model.states import JobState, VmState
    from isthmus.model.status import Refused, Status

#: a job's entry, a bag of tasks, one of its processors, a budget cap's state (as the engine has them)
E = TypeVar("E", bound="Entry")
B = TypeVar("B", bound="Bag[Any]")
S = TypeVar("S", bound="Slot")
C = TypeVar("C", bound="Cap")
E_contra = TypeVar("E_contra", contravariant=True)
S_co = TypeVar("S_co", covariant=True)
S_contra = TypeVar("S_contra", bound="Slot", contravariant=True)


class Clock(Protocol):
    """The engine's clock, as kinds read it."""

    @property
    def now(self) -> float:
        """The current time (seconds)."""
        ...


class Entry(Protocol):
    """A job in the system (queued or running): what kinds read and what starting a run sets."""

    state: JobState
    #: the site of its current run (-1: none)
    site: int
    #: when its current run started
    started: float
    #: its number of runs so far
    run: int
    #: its current run's runtime limit (None: none)
    limit: float | None

    @property
    def job(self) -> Job:
        """The job."""
        ...

    @property
    def stage(self) -> int:
        """The queue it is in (or last was)."""
        ...

    @property
    def alloc(self) -> tuple[tuple[int, int], ...]:
        """Its current run's cores per VM (vm id, cores) on a cloud."""
        ...

    @property
    def chain(self) -> tuple[str, ...]:
        """The managers it passed through before this one (empty: submitted here)."""
        ...

    @property
    def failed(self) -> tuple[str, ...]:
        """The peer managers that handed it back unstarted."""
        ...


class Backend(Protocol[E_contra]):
    """A site's backend (cluster or cloud): its processors and the runs it starts."""

    #: a job with VM requirements or a user's VMs: only some VMs may take a job
    selective: bool

    @property
    def name(self) -> str:
        """The site's name."""
        ...

    @property
    def index(self) -> int:
        """The site's index in the environment."""
        ...

    @property
    def site(self) -> Site:
        """The site."""
        ...

    @property
    def holds_bags(self) -> bool:
        """Whether bags of tasks may grow here."""
        ...

    @property
    def free(self) -> int:
        """Free processors now."""
        ...

    @property
    def online(self) -> int:
        """Processors in service now (on a cloud: on ready VMs)."""
        ...

    @property
    def reserved_cores(self) -> int:
        """Processors held for waiting jobs."""
        ...

    def free_for(self, job_id: int) -> int:
        """Free processors job `job_id` may take (its own holds included, others' not)."""
        ...

    def available(self, now: float) -> bool:
        """Whether the site is in its availability window at `now`."""
        ...

    def can_share(self, size: int) -> bool:
        """Whether a run of `size` processors may start sharing busy ones."""
        ...

    def bag_room(self, job: Job, avoid: tuple[int, ...] = ()) -> int:
        """Free processors a bag of tasks may take (none of the VMs `avoid`)."""
        ...

    def start(self, entry: E_contra, now: float) -> None:
        """Start the current run of `entry` now."""
        ...

    def start_shared(self, entry: E_contra, now: float) -> None:
        """Start the current run of `entry` now, sharing busy processors for what is missing."""
        ...

    def ends_by(self, entry: E_contra, t: float) -> bool:
        """Whether the run of `entry` is known to end by `t` (then a limit at `t` needs no event)."""
        ...


class Vm(Protocol):
    """A VM of a cloud site."""

    #: no new job starts on it; released when its runs end
    retiring: bool

    @property
    def state(self) -> VmState:
        """Its state."""
        ...

    @property
    def cores(self) -> int:
        """Its processors."""
        ...

    @property
    def load(self) -> int:
        """Runs on it now."""
        ...

    @property
    def reserved_for(self) -> int:
        """The queued job it is held for (-1: none)."""
        ...


class Cloud(Backend[E_contra], Protocol):
    """A cloud site's backend: its VMs, leases and reservations."""

    #: called with (vm id, now) when a retiring VM's last run ends
    retired_hook: Callable[[int, float], None] | None

    @property
    def vms(self) -> Mapping[int, Vm]:
        """Its VMs by id (leased and not gone)."""
        ...

    @property
    def leased(self) -> int:
        """VMs leased now (booting or ready)."""
        ...

    @property
    def reservations(self) -> Mapping[int, list[int]]:
        """The VMs held for each queued job."""
        ...

    def free_matching(self, job: Job) -> int:
        """Free processors on VMs that may take `job`."""
        ...

    def lease_refusal(self, now: float) -> str:
        """Why the cloud leases nothing now (empty: it leases)."""
        ...

    def lease(self, count: int, now: float, vm_type: int = 0, image: int = 0, owner: str | None = None) -> list[int]:
        """Lease `count` VMs; their ids."""
        ...

    def release(self, vm_ids: tuple[int, ...], now: float) -> None:
        """Release the VMs `vm_ids` now."""
        ...

    def reserve(self, job_id: int, count: int, now: float) -> tuple[list[int], list[int]]:
        """Hold `count` idle VMs for job `job_id`; (VMs added, VMs given back)."""
        ...


class Bag(Protocol[S_co]):
    """A bag of tasks (a malleable job)."""

    @property
    def job(self) -> Job:
        """Its job."""
        ...

    @property
    def unclaimed(self) -> int:
        """Queued tasks no processor is about to pull."""
        ...

    @property
    def finished(self) -> bool:
        """Whether all its tasks are done (or it was cancelled)."""
        ...

    @property
    def slots(self) -> Mapping[int, S_co]:
        """The processors it holds, by id."""
        ...


class Slot(Protocol):
    """A processor a bag of tasks holds."""

    @property
    def site(self) -> int:
        """Its site."""
        ...

    @property
    def leaving(self) -> bool:
        """Whether it is preempted already."""
        ...


class BagBook(Protocol[B, S_contra]):
    """The engine's bags of tasks."""

    def get(self, job_id: int) -> B | None:
        """The bag `job_id`, None when there is none."""
        ...

    def grow(self, bag: B, site: int, count: int, policy: str, avoid: tuple[int, ...] = ()) -> None:
        """Give `bag` `count` free processors of `site`."""
        ...

    def shrink(self, bag: B, site: int, slots: Sequence[S_contra], policy: str, for_job: int = -1) -> None:
        """Preempt `slots` of `bag` on `site` for waiting job `for_job` (-1: none)."""
        ...

    def release_room(self, site: int, job_id: int) -> tuple[int, int]:
        """(processors the hold for `job_id` on `site` misses, processors given back for no job there)."""
        ...

    def hold_release(self, site: int, job_id: int, policy: str) -> None:
        """Hold for waiting job `job_id` what bags give back on `site` for no job."""
        ...


class Cap(Protocol):
    """A budget cap's state."""

    #: leases (VMs) it refused
    refused_leases: int

    @property
    def cap(self) -> BudgetCap:
        """The cap as configured."""
        ...

    @property
    def limit(self) -> float:
        """Its limit per period (dollars)."""
        ...

    @property
    def users(self) -> frozenset[str]:
        """The users it covers (empty: everyone)."""
        ...

    def spent(self, t: float) -> float:
        """Charged in the period of `t`."""
        ...


class Ledger(Protocol[C]):
    """The budget caps' books."""

    @property
    def caps(self) -> Sequence[C]:
        """Every cap."""
        ...

    @property
    def per_user(self) -> bool:
        """Whether some cap names users."""
        ...

    @property
    def finishing(self) -> bool:
        """Whether some cap lets running jobs finish (commitments)."""
        ...

    @property
    def unbilled(self) -> set[tuple[int, int]]:
        """(site, vm id) of VMs leased for a user no cap covers yet: no boundary followed."""
        ...

    def covering(self, site: int) -> Sequence[C]:
        """The caps covering `site`."""
        ...

    def refusal(self, site: int, amount: float, t: float, user: str = "") -> C | None:
        """The cap that cannot pay `amount` more on `site` at `t` for `user`, None if all can."""
        ...

    def committed(self, cap: C, t: float) -> float:
        """What `cap` has committed for running jobs in the period of `t`."""
        ...

    def pay(self, site: int, amount: float, t: float, user: str = "") -> None:
        """Charge `amount` on `site` at `t` to the caps covering `user`."""
        ...

    def leased(self, site: int, vm_id: int, user: str, next_due: float) -> None:
        """VM `vm_id` of `site` was leased for `user`; its next boundary is `next_due`."""
        ...

    def bills(self, site: int, user: str) -> bool:
        """Whether some cap books increments of `site` charged to `user`."""
        ...


class Billing(Protocol):
    """Billing boundaries and the overall budget."""

    #: committed so far (dollars)
    spent: float

    @property
    def budget(self) -> float | None:
        """The overall budget (None: none)."""
        ...

    def schedule(self, time: float, site: int, vm_id: int) -> None:
        """Follow VM `vm_id` of `site` to its billing boundary at `time`."""
        ...

    def lease_churn(self, count: int, policy: str) -> None:
        """Count `count` VMs leased now by `policy` (lease churn)."""
        ...


class Peer(Protocol):
    """A peer manager as this one knows it."""

    @property
    def name(self) -> str:
        """Its name."""
        ...

    @property
    def role(self) -> PeerRole:
        """Its role to this manager."""
        ...

    @property
    def up(self) -> bool:
        """Whether it is up (heartbeats arrive)."""
        ...

    @property
    def data(self) -> ResourceData | None:
        """Its latest resource data (None: none yet)."""
        ...


class Federation(Protocol):
    """This manager's peers."""

    @property
    def peers(self) -> Sequence[Peer]:
        """The peers by index."""
        ...


class Forwarding(Protocol[E_contra]):
    """The jobs crossing this manager between peers."""

    def forward(self, entry: E_contra, peer: int, policy: str) -> None:
        """Send queued `entry` to peer `peer`; it leaves this manager's queue."""
        ...

    def notify_origin(self, entry: E_contra) -> None:
        """Tell the origin of forwarded `entry` that it started here."""
        ...


class QueueBook(Protocol[E_contra]):
    """The engine's queues."""

    def dequeue(self, entry: E_contra) -> None:
        """Take `entry` out of its queue."""
        ...


class KindOps(Protocol[E, B, S_contra, C]):
    """The operations the engine offers its decision kinds (and the only way a kind reaches it)."""

    #: True once a ReserveVms was applied (only then do starts and cancels look for holds)
    reserving: bool

    @property
    def name(self) -> str:
        """This manager's name among its peers."""
        ...

    @property
    def clock(self) -> Clock:
        """The clock."""
        ...

    @property
    def log(self) -> EventLog:
        """The event log."""
        ...

    @property
    def backends(self) -> Sequence[Backend[E]]:
        """The sites' backends, by site index."""
        ...

    @property
    def entries(self) -> Mapping[int, E]:
        """The jobs in the system (queued or running), by id."""
        ...

    @property
    def why_not(self) -> dict[int, Status]:
        """The latest refusal or hold status of each queued job (its answer to "why")."""
        ...

    @property
    def stage_sites(self) -> Sequence[tuple[int, ...]]:
        """The sites each queue may use."""
        ...

    @property
    def deciding(self) -> str:
        """The policy whose decisions are being applied."""
        ...

    @property
    def enforce_walltime(self) -> bool:
        """Whether a run ends at its job's requested runtime."""
        ...

    @property
    def queue_book(self) -> QueueBook[E]:
        """The queues."""
        ...

    @property
    def federation(self) -> Federation | None:
        """The peers (None: this manager has none)."""
        ...

    @property
    def forwarding(self) -> Forwarding[E]:
        """The jobs crossing this manager between peers."""
        ...

    @property
    def bags(self) -> BagBook[B, S_contra]:
        """The bags of tasks."""
        ...

    @property
    def ledger(self) -> Ledger[C]:
        """The budget caps' books."""
        ...

    @property
    def billing(self) -> Billing:
        """Billing and the overall budget."""
        ...

    def cloud_backend(self, index: int) -> Cloud[E]:
        """The cloud backend at `index`; Refused (UNKNOWN_TARGET, INVALID) otherwise."""
        ...

    def cloud_at(self, index: int) -> Cloud[E] | None:
        """The cloud backend at existing site index `index`, None for a cluster."""
        ...

    def kill(self, entry: E, cause: KillCause, *, requeue: bool, next_stage: bool = False) -> None:
        """Kill the current run of `entry` for `cause`; requeue it or end it as failed."""
        ...

    def cancel(self, job_id: int) -> bool:
        """Cancel a queued or running job or a bag of tasks."""
        ...

    def drop_reservations(self, job_id: int) -> None:
        """End what is reserved for queued job `job_id` anywhere."""
        ...

    def refuse(self, d: object, r: Refused, by: str = "") -> Status:
        """Record decision `d` as refused for `r` (a kind refusing part of what it was asked)."""
        ...

    def request_round(self, t: float) -> None:
        """Make sure a round runs at `t`."""
        ...

    def schedule_limit(self, entry: E, at: float) -> None:
        """End the current run of `entry` at `at` for its runtime limit (requeued in the next stage)."""
        ...

    def schedule_walltime(self, entry: E, started: float) -> None:
        """End the current run of `entry` at its job's requested runtime after `started`."""
        ...

    def charge_start(self, job_id: int, site: int) -> None:
        """Job `job_id` started now on VMs of cloud `site`: book it with the budget caps."""
        ...

    def lease_users(self, site: int, count: int, price: float, cores: int) -> tuple[list[str], C | None]:
        """The users `count` VMs leased now on cloud `site` are for, and the cap that refused the
        rest (the list is shorter than `count` then); `price` and `cores` are one VM's."""
        ...


#: any engine, for the registry's signatures (a kind's own methods are generic in the types)
AnyOps = KindOps[Any, Any, Any, Any]
