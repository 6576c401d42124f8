"""What a policy sees and returns: the read-only View and one protocol per policy family.

A policy is an object with a `name` and, for the families that decide each round, a
`decide(view)` method returning decisions. The view is read-only: the Protocols below list
everything a policy may read, and mypy checks policies against them (no capability probes at
run time). A policy keeps at most small private memory (a round-robin pointer); it never reads
a clock, never mutates what it sees and does no I/O.

Families: allocation (which queued job starts where), provisioning (when to lease and release
VMs), selection (which site or peer manager gets a job), fair share (how idle nodes are split
among malleable jobs) and prediction (runtimes). Each is a folder of `isthmus.policies` with one
module a policy; the registry (`isthmus.policies.registry`) lists them, and `build.py` decides
the order in which the deciding families run each round. Adding a family or a policy touches
no engine code.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal, NamedTuple, Protocol

import numpy as np
from mypy_extensions import mypyc_attr
from numpy.typing import NDArray
from pydantic import BaseModel, ConfigDict
from pydantic.main import BaseModel as _BaseModel  # noqa: F401  (mypyc: the defining module is imported before the class is built)

from isthmus.decisions import Decision
from isthmus.model.environment import Environment
from isthmus.model.job import Job
from isthmus.model.peers import PeerRole, ResourceData
from isthmus.model.site import Site

#: What the engine's runtime index orders queued jobs by: the arrival-time prediction (what a
#: live system knows), the actual runtime (simulation only) or the estimate a backfilling
#: scheduler goes by (the requested runtime, else the prediction).
RuntimeKey = Literal["predicted", "runtime", "estimate"]


class NoParams(BaseModel):
    """A policy without parameters."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class JobInfo(Protocol):
    """A job in the engine, read-only."""

    @property
    def job(self) -> Job: ...
    @property
    def stage(self) -> int: ...
    @property
    def site(self) -> int: ...
    @property
    def started(self) -> float: ...
    @property
    def queued_at(self) -> float: ...
    @property
    def restarts(self) -> int: ...
    @property
    def seq(self) -> int:
        """The job's place in queue order (for policies that declare `uses_size_index`, once an
        index of the queue has been read; 0 before)."""
        ...

    @property
    def predicted(self) -> float: ...
    @property
    def estimated_runtime(self) -> float: ...
    @property
    def chain(self) -> tuple[str, ...]: ...
    @property
    def failed(self) -> tuple[str, ...]: ...
    @property
    def alloc(self) -> tuple[tuple[int, int], ...]:
        """(VM id, processors) of each VM a job running on a cloud occupies; empty otherwise."""
        ...


class SortedRuntimes(Protocol):
    """One size group of the runtime index (`View.queue_by_runtime`), read-only."""

    def __iter__(self) -> Iterator[JobInfo]:
        """The group's jobs, shortest runtime first (then queue order)."""
        ...

    def upto(self, limit: float) -> list[tuple[float, int, int]]:
        """(runtime, queue sequence, job id) of the group's jobs whose runtime is at most
        `limit`, in queue order, without visiting the longer ones."""
        ...


class PeerInfo(Protocol):
    """A peer manager, read-only: its role to this one, whether it is up, its distance and its
    latest resource data."""

    @property
    def index(self) -> int: ...
    @property
    def name(self) -> str: ...
    @property
    def role(self) -> PeerRole: ...
    @property
    def up(self) -> bool: ...
    @property
    def distance(self) -> float: ...
    @property
    def data(self) -> ResourceData | None: ...


class VmInfo(Protocol):
    """A leased VM, read-only."""

    @property
    def id(self) -> int: ...
    @property
    def cores(self) -> int: ...
    @property
    def free(self) -> int: ...
    @property
    def bagged(self) -> int: ...
    @property
    def leased_at(self) -> float: ...
    @property
    def idle_since(self) -> float: ...
    @property
    def idle(self) -> bool: ...
    @property
    def reserved_for(self) -> int: ...
    @property
    def type(self) -> int: ...
    @property
    def image(self) -> int: ...
    @property
    def owner(self) -> str | None: ...
    @property
    def retiring(self) -> bool: ...
    @property
    def ready(self) -> bool: ...


class SiteInfo(Protocol):
    """A site's current state, read-only."""

    @property
    def index(self) -> int: ...
    @property
    def site(self) -> Site: ...
    @property
    def free(self) -> int: ...
    @property
    def online(self) -> int: ...
    @property
    def running(self) -> Mapping[int, JobInfo]: ...
    @property
    def by_estimated_end(self) -> Sequence[tuple[float, int]]: ...
    @property
    def name(self) -> str: ...
    @property
    def busy(self) -> int: ...
    @property
    def reserved(self) -> int: ...
    def free_for(self, job_id: int) -> int: ...
    def available(self, now: float) -> bool: ...


class CloudInfo(SiteInfo, Protocol):
    """A cloud site's current state, read-only."""

    @property
    def booting(self) -> int: ...
    @property
    def leased(self) -> int: ...
    def idle_vms(self) -> Sequence[VmInfo]: ...
    def vms(self) -> Sequence[VmInfo]:
        """The VMs leased and not being released (booting and ready), by id."""
        ...

    @property
    def selective(self) -> bool:
        """True when not every VM may take every job (types, images, per-user or retiring VMs)."""
        ...

    def vm_accepts(self, vm: VmInfo, job: Job) -> bool:
        """Whether `vm` may take a run of `job` once ready (requirements, user, retiring)."""
        ...

    def free_matching(self, job: Job) -> int:
        """Free processors on ready VMs that may take `job`."""
        ...

    def idle_vm_times(self) -> Sequence[tuple[int, float, float, int]]:
        """(id, leased at, idle since, job reserved for or -1) of each idle VM, longest idle
        first: what a release decision reads, as plain tuples (cheap to read every round)."""
        ...


@dataclass(frozen=True)
class QueueColumnsView:
    """Read-only columns of one queue, one row per waiting job, in no particular order: `ids`,
    `seq` (queue order), `size`, `queued_at` and `predicted` (the arrival-time runtime prediction)."""

    ids: NDArray[np.int64]
    seq: NDArray[np.int64]
    size: NDArray[np.int64]
    queued_at: NDArray[np.float64]
    predicted: NDArray[np.float64]

    def __len__(self) -> int:
        return int(self.ids.size)


@dataclass(frozen=True)
class QueueHeadsView:
    """A queue split into groups of equal (size, predicted runtime), read-only: one row per group
    with its head (the group's first job in queue order: `ids`, `seq`, `queued_at`) and its
    `size` and `predicted`; `sizes` the distinct sizes, ascending; `group(row)` is the group, job
    id -> (seq, queued_at) in queue order. Given only while queue order is queued_at order
    (`View.queue_heads`)."""

    ids: NDArray[np.int64]
    seq: NDArray[np.int64]
    size: NDArray[np.int64]
    queued_at: NDArray[np.float64]
    predicted: NDArray[np.float64]
    sizes: tuple[int, ...]
    group: Callable[[int], Mapping[int, tuple[int, float]]]

    def __len__(self) -> int:
        return int(self.ids.size)


class SlotInfo(NamedTuple):
    """One processor a bag of tasks holds (a launcher, KOALA-CS thesis §3.3): its id, site, the
    task it runs (-1 between tasks: pulling the next one), since when, and the VM it is on (a
    cloud's; -1 on a cluster)."""

    id: int
    site: int
    task: int
    since: float
    vm: int = -1


class BagInfo(Protocol):
    """A bag of tasks (malleable job) in the engine, read-only. Counts of processors leave out
    those being preempted (they are still held until the preemption time has passed)."""

    @property
    def job(self) -> Job: ...
    @property
    def id(self) -> int: ...
    @property
    def submitted(self) -> float: ...
    @property
    def done(self) -> int: ...
    @property
    def running(self) -> int: ...
    @property
    def queued(self) -> int: ...
    @property
    def unclaimed(self) -> int:
        """Queued tasks no processor of the bag is about to pull: what more processors could start."""
        ...

    @property
    def total_held(self) -> int: ...
    def held(self, site: int) -> int: ...
    def held_sites(self) -> Mapping[int, int]: ...
    def slots(self, site: int) -> Sequence[SlotInfo]: ...


class BagsInfo(Protocol):
    """The bags of tasks of an engine, read-only: the active ones in arrival order, the sites that
    may hold bag processors, whether any processor is held, and per site the processors held by
    all bags and being preempted."""

    @property
    def active(self) -> Sequence[BagInfo]: ...
    @property
    def sites(self) -> Sequence[int]: ...
    @property
    def holding(self) -> bool: ...
    def held(self, site: int) -> int: ...
    def leaving(self, site: int) -> int: ...
    def leaving_for(self, site: int, job_id: int) -> int: ...
    def coming_by(self, site: int, job_id: int) -> float:
        """When the processors of `site` being preempted for waiting job `job_id` (-1: for no
        job) are free at the latest (-inf: none)."""
        ...

    @property
    def preemption_time(self) -> float:
        """Seconds from a shrink until its processors are free at the latest."""
        ...


def runtime_order(entry: JobInfo, key: RuntimeKey) -> tuple[float, int]:
    """Where a queued job sorts in the runtime index: (its predicted runtime, its actual runtime or
    its estimate, what a backfilling scheduler may assume: `JobInfo.estimated_runtime`; then its
    queue sequence); a NaN runtime sorts last."""
    if key == "predicted":
        value = entry.predicted
    elif key == "estimate":
        value = entry.estimated_runtime
    else:
        value = entry.job.runtime
    return (math.inf if math.isnan(value) else value, entry.seq)


class View(Protocol):
    """The engine's state as policies see it."""

    @property
    def now(self) -> float: ...
    @property
    def sites(self) -> Sequence[SiteInfo]: ...
    def free_processors(self) -> list[int]: ...
    @property
    def allocation_order(self) -> Literal["any", "strict", "easy"]: ...
    @property
    def holding(self) -> bool: ...
    def holds(self) -> dict[int, dict[int, int]]: ...
    @property
    def stages(self) -> int: ...
    @property
    def round_interval(self) -> float | None: ...
    @property
    def queued(self) -> int: ...
    def queue(self, stage: int = 0) -> Collection[JobInfo]: ...
    def queue_by_size(self, stage: int = 0) -> Mapping[int, Mapping[int, JobInfo]]: ...
    def queue_by_runtime(self, stage: int = 0) -> Mapping[int, SortedRuntimes]: ...
    def queue_columns(self, stage: int = 0) -> QueueColumnsView: ...
    def queue_heads(self, stage: int = 0) -> QueueHeadsView | None: ...
    def stage_sites(self, stage: int) -> Sequence[int]: ...
    @property
    def vm_matching(self) -> bool:
        """True when VMs are not interchangeable (VM requirements, types, per-user or retiring VMs)."""
        ...

    def cloud(self, index: int) -> CloudInfo | None: ...
    def user_runtimes(self, user: str) -> Sequence[float]: ...
    @property
    def mean_runtime(self) -> float | None: ...
    @property
    def budget_left(self) -> float | None: ...
    def user_can_pay(self, site: int, user: str, price: float) -> bool:
        """True when the budget caps naming users that would charge `user` an increment of
        `price` on cloud `site` can pay it now (always, without such caps)."""
        ...

    @property
    def manager(self) -> str: ...
    @property
    def peers(self) -> Sequence[PeerInfo]: ...
    def unrouted(self) -> Sequence[JobInfo]: ...
    def local_resources(self) -> ResourceData: ...
    @property
    def bags(self) -> BagsInfo: ...


class DecidingPolicy(Protocol):
    """A policy consulted every scheduling round (any family but prediction).

    A policy whose class sets `decides_nothing = True` (no provisioning on clusters only) is
    never consulted: its `decide` would return no decision in any state.
    """

    name: ClassVar[str]

    def decide(self, view: View) -> Iterable[Decision]:
        """This round's decisions."""
        ...


class AllocationPolicy(Protocol):
    """Decides which queued jobs start where.

    Besides `decide`, it tells the engine the structure it needs: the sites each queue may use
    (`stage_sites`), where arriving and killed jobs go (`arrival_stage`, `next_stage`), which
    indexes it reads (`uses_size_index`; `runtime_index`: the size buckets also ordered by the
    jobs' predicted or actual runtime or their estimate; `uses_queue_columns`: the queues as NumPy columns),
    whether it needs runtime predictions (`uses_prediction`) or the real runtimes a live system
    cannot know (`needs_true_runtimes`), and whether it serves each queue strictly in order
    (`head_of_line`: the engine then asks it only when some queue's head may fit).
    `AllocationDefaults` gives the common answers.
    """

    name: ClassVar[str]
    head_of_line: ClassVar[bool]
    backfills_behind_reservation: ClassVar[bool]
    uses_size_index: ClassVar[bool]
    runtime_index: ClassVar[RuntimeKey | None]
    uses_queue_columns: ClassVar[bool]
    uses_prediction: ClassVar[bool]
    needs_true_runtimes: ClassVar[bool]

    def stage_sites(self, env: Environment) -> list[tuple[int, ...]]:
        """The sites each queue (stage) may use; one stage with every site for most policies.

        Raise ValueError when `env` does not have the structure the policy needs.
        """
        ...

    def decide(self, view: View) -> Iterable[Decision]:
        """This round's decisions."""
        ...

    def arrival_stage(self, job: Job) -> int:
        """The queue a newly arrived job joins."""
        ...

    def next_stage(self, stage: int) -> int:
        """The queue a job killed at the runtime limit of queue `stage` joins (the engine keeps it
        within the queues that exist)."""
        ...

    def explain(self, view: View, job: JobInfo) -> str:
        """Why queued `job` is still waiting, in words; empty to let the engine say it."""
        ...


@mypyc_attr(allow_interpreted_subclasses=True)  # most policies are not compiled (setup.py)
class AllocationDefaults:
    """The answers most allocation policies give: one queue entered on arrival, the next queue
    after a kill at a limit, no index, no prediction, no explanation of their own."""

    #: True for a policy that starts the jobs of each queue only in queue order, each on a site of
    #: its queue with enough free processors (`View.free_processors`), while the queue's head fits
    #: on one, and decides nothing else (strict FCFS, TAGS-chain). After its round every queue's
    #: head waits for processors, so a round in which no queue got a new head and no site of a
    #: queue got free processors decides nothing: the engine does not ask it then (rounds are
    #: still counted), and the schedule is the same. Its `decide` must then change no state of
    #: its own.
    head_of_line: ClassVar[bool] = False
    #: True for EASY backfilling: jobs past the first that cannot start start only where they do
    #: not delay its reservation (the fair-share walk then claims bag processors only for those)
    backfills_behind_reservation: ClassVar[bool] = False
    uses_size_index: ClassVar[bool] = False
    runtime_index: ClassVar[RuntimeKey | None] = None
    uses_queue_columns: ClassVar[bool] = False
    uses_prediction: ClassVar[bool] = False
    needs_true_runtimes: ClassVar[bool] = False

    def arrival_stage(self, job: Job) -> int:
        """Every job arrives in queue 0."""
        return 0

    def next_stage(self, stage: int) -> int:
        """A job killed at a limit moves to the following queue."""
        return stage + 1

    def explain(self, view: View, job: JobInfo) -> str:
        """No policy-specific explanation."""
        return ""


class ProvisioningPolicy(Protocol):
    """Decides when to lease and release cloud VMs.

    Its capabilities (`CAPABILITIES`): `decides_nothing` (it never leases nor releases: no
    provisioning), `lends_release_rule` (it is an `IdleReleaseRule` a fair-share policy that
    leases VMs itself may decide with) and `queues_needed` (the allocation queues it needs, one
    pool of VMs each).
    """

    name: ClassVar[str]

    def decide(self, view: View) -> Iterable[Decision]:
        """This round's decisions."""
        ...


class SelectionPolicy(Protocol):
    """Chooses the site or peer manager a job goes to (site selection and forwarding family)."""

    name: ClassVar[str]

    def decide(self, view: View) -> Iterable[Decision]:
        """This round's decisions."""
        ...


class FairSharePolicy(Protocol):
    """Splits resources fairly: idle processors among bags of tasks (grow and shrink decisions,
    `shares = "bags"`) or each cloud's VMs among users (`shares = "vms"`).

    A policy that leases and releases VMs itself (`leases_vms`, `CAPABILITIES`) runs with a
    provisioning policy that decides nothing, or with one that lends its release rule: it is
    then given that policy through `pair(provisioning)` and they decide as one.
    """

    name: ClassVar[str]
    shares: ClassVar[Literal["bags", "vms"]]

    def decide(self, view: View) -> Iterable[Decision]:
        """This round's decisions."""
        ...


class RuntimePredictor(Protocol):
    """Predicts a job's runtime when it arrives.

    `needs_true_runtimes` is True for a predictor that reads the job's actual runtime (an
    oracle): usable in simulation only.
    """

    name: ClassVar[str]
    needs_true_runtimes: ClassVar[bool]

    def predict(self, view: View, job: Job) -> float:
        """Predicted runtime of `job` in seconds."""
        ...


class IdleReleaseRule(Protocol):
    """A provisioning policy's rule for releasing idle VMs, lent to a fair-share policy that
    leases VMs itself (`lends_release_rule`): the fair-share policy decides which VMs each user
    keeps, the rule when the idle ones nobody keeps go (On-Demand: billing-aware)."""

    def release_idle(
        self,
        view: View,
        clouds: dict[int, CloudInfo],
        leased: dict[int, int],
        kept: dict[int, set[int]],
        out: list[Decision],
    ) -> list[Decision]:
        """Add to `out` the releases the rule makes of the idle VMs of `clouds` not in `kept`
        (`leased`: the VMs each cloud keeps once this round's other releases are done)."""
        ...


CAPABILITIES: Mapping[str, object] = {
    # allocation (AllocationDefaults sets each on every allocation policy)
    "head_of_line": False,
    "backfills_behind_reservation": False,
    "uses_size_index": False,
    "runtime_index": None,
    "uses_queue_columns": False,
    "uses_prediction": False,
    # allocation and prediction: reads every job's actual runtime, so simulation only
    "needs_true_runtimes": False,
    # provisioning
    "decides_nothing": False,
    "lends_release_rule": False,
    "queues_needed": 1,
    # fair share: what it splits ("bags" or "vms"), and whether it leases VMs itself
    "shares": None,
    "leases_vms": False,
}
"""What a policy can do or needs, by attribute name, with the value for a class that does not set
it. Code outside the policies asks these attributes (`capability`), never a policy's name."""


def capability(policy: object, name: str) -> object:
    """The capability `name` of `policy` (a policy or its class): its class attribute, else the
    default of `CAPABILITIES`; KeyError for a name that is not a capability."""
    return getattr(policy, name, CAPABILITIES[name])
