"""The operations the engine's parts and the decision kinds may use: narrow, typed interfaces.

The engine (`isthmus.engine.engine.Engine`) implements every protocol here structurally; none of
the modules that use them imports the engine class. Each protocol lists exactly what its users
touch, so that what a part may change is read here rather than from the engine's code:

- `WalltimeOps`: a run's walltime (`isthmus.engine.runs.schedule_walltime`);
- `EngineOps`: the decision kinds' operations (`isthmus.decisions.ops.KindOps`) with the
  engine's own types, and what the budgets' functions use (`isthmus.engine.budgets`);
- `AdmitOps`: admission of an arriving job (`isthmus.engine.queues.admit`);
- `PeerOps`: what a federation reads of its engine (`isthmus.engine.peering`);
- `ForwardOps`: the federation's moves (`isthmus.engine.forwarding`);
- `RunOps`: kills, cancels, lost runs and VMs (`isthmus.engine.runs`);
- `BillingOps`: billing boundaries and lease churn (`isthmus.engine.billing`);
- `RecoveryOps`: re-entering recorded jobs, runs and leases (`isthmus.engine.recovery`);
- `AnswerOps`: the answers about the state (`isthmus.engine.answers`);
- `ViewOps`: the policies' read-only view (`isthmus.engine.view`);
- `BagOps`: the bags of tasks (`isthmus.engine.bags`).

Members are plain attributes where the engine keeps a value the part reads or sets (`reserving`,
`vm_jobs`), so that the per-event path costs an attribute access, not a call.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from isthmus.decisions.ops import KindOps

if TYPE_CHECKING:
    from collections import deque

    from isthmus.engine.backend import CloudBackend, SiteBackend
    from isthmus.engine.bags import Bag, BagBook, Slot  # noqa: F401 (Bag, Slot: named in a string base below)
    from isthmus.engine.billing import Billing
    from isthmus.engine.budgets import CapState, Ledger
    from isthmus.engine.clock import Schedule, SimClock
    from isthmus.engine.forwarding import Forwarding
    from isthmus.engine.peering import Federation
    from isthmus.engine.queues import QueueBook
    from isthmus.engine.state import JobEntry
    from isthmus.engine.view import EngineView
    from isthmus.model.events import EventLog, KillCause
    from isthmus.model.status import Refused, Status
    from isthmus.policies.api import AllocationPolicy, RuntimePredictor


class WalltimeOps(Protocol):
    """What scheduling a run's walltime uses (`isthmus.engine.runs.schedule_walltime`)."""

    enforce_walltime: bool
    schedule: Schedule


class CoreOps(Protocol):
    """What every part reads: the clock, the log, the sites, the jobs and their queues."""

    clock: SimClock
    log: EventLog
    backends: list[SiteBackend]
    #: the jobs in the system (queued or running), by id
    entries: dict[int, JobEntry]
    #: latest refusal or hold status of each queued job
    why_not: dict[int, Status]
    queue_book: QueueBook
    federation: Federation | None

    def changed(self) -> None:
        """Something changed now: a round follows, looking at every queue's head again."""
        ...


class AdmitOps(CoreOps, Protocol):
    """What admitting an arriving job uses."""

    predictor: RuntimePredictor | None
    view: EngineView
    #: jobs with VM requirements admitted so far
    vm_jobs: int
    forwarding: Forwarding

    def round_soon(self) -> None:
        """Make sure a round follows now (the change marked the queues it concerns stale)."""
        ...


class PeerOps(CoreOps, Protocol):
    """What a federation reads of the engine it is attached to (the resource data it pushes,
    the deciding policy it records)."""

    #: this manager's name among its peers
    name: str
    #: the sites each queue may use
    stage_sites: list[tuple[int, ...]]
    forwarding: Forwarding
    #: the policy whose decisions are being applied
    deciding: str


class ForwardOps(AdmitOps, PeerOps, Protocol):
    """What the federation's moves use (the engine is handed on to the federation's calls)."""

    #: True once a ReserveVms was applied (only then do jobs leaving a queue look for holds)
    reserving: bool
    schedule: Schedule

    def drop_reservations(self, job_id: int) -> None:
        """End what is reserved for queued job `job_id` anywhere."""
        ...


class BillingOps(CoreOps, Protocol):
    """What billing boundaries and lease churn use."""

    schedule: Schedule
    ledger: Ledger
    clouds: tuple[CloudBackend, ...]

    def cloud_backend(self, index: int) -> CloudBackend:
        """The cloud backend at `index`; Refused otherwise."""
        ...

    def kill(self, entry: JobEntry, cause: KillCause, *, requeue: bool, next_stage: bool = False) -> None:
        """Kill the current run of `entry` for `cause`; requeue it or end it as failed."""
        ...


class RunOps(CoreOps, Protocol):
    """What run ends, kills, cancels and lost runs use."""

    ledger: Ledger
    allocation: AllocationPolicy
    bags: BagBook
    forwarding: Forwarding
    reserving: bool
    schedule: Schedule
    enforce_walltime: bool
    #: the last runtimes of each user's jobs, and the sum and count of all completed runs
    history: dict[str, deque[float]]
    runtime_sum: float
    runtime_count: int

    def cloud_backend(self, index: int) -> CloudBackend:
        """The cloud backend at `index`; Refused otherwise."""
        ...

    def round_soon(self) -> None:
        """Make sure a round follows now (the change marked the queues it concerns stale)."""
        ...


class EngineOps(CoreOps, KindOps["JobEntry", "Bag", "Slot", "CapState"], Protocol):
    """The operations the engine offers the decision kinds (`isthmus.decisions.ops.KindOps`),
    with the engine's own types (mypy checks here that they satisfy the kinds' protocols), and
    what the budgets' functions use; the parts the kinds act through (`forwarding`, `billing`,
    `bags`, `queue_book`) reach the engine through protocols of their own."""

    #: this manager's name among its peers
    name: str
    #: the sites each queue may use
    stage_sites: list[tuple[int, ...]]
    #: the policy whose decisions are being applied
    deciding: str
    #: True once a ReserveVms was applied (only then do starts and cancels look for holds)
    reserving: bool
    enforce_walltime: bool
    schedule: Schedule
    ledger: Ledger
    bags: BagBook
    billing: Billing
    forwarding: Forwarding

    def cloud_backend(self, index: int) -> CloudBackend:
        """The cloud backend at `index`; Refused otherwise."""
        ...

    def kill(self, entry: JobEntry, cause: KillCause, *, requeue: bool, next_stage: bool = False) -> None:
        """Kill the current run of `entry` for `cause`; requeue it or end it as failed."""
        ...

    def cancel(self, job_id: int) -> bool:
        """Cancel a queued or running job or a bag of tasks."""
        ...

    def drop_reservations(self, job_id: int) -> None:
        """End what is reserved for queued job `job_id` anywhere."""
        ...

    def refuse(self, d: object, r: Refused, by: str = "") -> Status:
        """Record decision `d` as refused for `r`."""
        ...

    def request_round(self, t: float) -> None:
        """Make sure a round runs at `t`."""
        ...

    def cloud_at(self, index: int) -> CloudBackend | None:
        """The cloud backend at existing site index `index`, None for a cluster."""
        ...

    def schedule_limit(self, entry: JobEntry, at: float) -> None:
        """End the current run of `entry` at `at` for its runtime limit."""
        ...

    def schedule_walltime(self, entry: JobEntry, started: float) -> None:
        """End the current run of `entry` at its job's requested runtime after `started`."""
        ...

    def charge_start(self, job_id: int, site: int) -> None:
        """Job `job_id` started now on VMs of cloud `site`: book it with the budget caps."""
        ...

    def lease_users(self, site: int, count: int, price: float, cores: int) -> tuple[list[str], CapState | None]:
        """The users `count` VMs leased now on cloud `site` are for, and the cap that refused the rest."""
        ...


class RecoveryOps(EngineOps, AdmitOps, Protocol):
    """What re-entering recorded jobs, runs and leases uses (the StartJob kind's validation and
    admission included)."""


class AnswerOps(CoreOps, Protocol):
    """What the answers about the state read (why a job waits, the purity fingerprint)."""

    allocation: AllocationPolicy
    view: EngineView
    clouds: tuple[CloudBackend, ...]
    billing: Billing
    #: the last runtimes of each user's jobs
    history: dict[str, deque[float]]
    runtime_sum: float
    runtime_count: int
    bags: BagBook

    def apply(self, d: object, policy: str = "") -> Status:
        """Validate and apply one decision; return its status."""
        ...


class ViewOps(PeerOps, Protocol):
    """What the policies' read-only view reads (`isthmus.engine.view`)."""

    allocation: AllocationPolicy
    bags: BagBook
    clouds: tuple[CloudBackend, ...]
    round_interval: float | None
    #: jobs with VM requirements admitted so far
    vm_jobs: int
    history: dict[str, deque[float]]
    runtime_sum: float
    runtime_count: int
    billing: Billing
    ledger: Ledger


class BagOps(CoreOps, Protocol):
    """What the bags of tasks use."""

    #: "batch" or "per-event" (a task's end runs the round it asks for at once with the latter)
    round_rule: str
    reserving: bool
    allocation: AllocationPolicy

    def request_round(self, t: float) -> None:
        """Make sure a round runs at `t`."""
        ...

    def run_due_round(self) -> None:
        """Per-event rounds: run the rounds asked for now."""
        ...
