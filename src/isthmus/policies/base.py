"""What a policy sees and returns.

A policy is an object with a `name` and a `decide(view)` method returning decisions. The view
is read-only: the Protocols below list everything a policy may read. A policy keeps at most
small private memory (a round-robin pointer); it never reads a clock, never mutates what it
sees and does no I/O.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import ClassVar, Protocol

from pydantic import BaseModel, ConfigDict

from isthmus.model.decisions import Decision
from isthmus.model.environment import Environment
from isthmus.model.job import Job
from isthmus.model.site import Site


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
    def seq(self) -> int: ...
    @property
    def predicted(self) -> float: ...
    @property
    def estimated_runtime(self) -> float: ...


class VmInfo(Protocol):
    """A leased VM, read-only."""

    @property
    def id(self) -> int: ...
    @property
    def cores(self) -> int: ...
    @property
    def free(self) -> int: ...
    @property
    def leased_at(self) -> float: ...
    @property
    def idle_since(self) -> float: ...
    @property
    def idle(self) -> bool: ...


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


class CloudInfo(SiteInfo, Protocol):
    """A cloud site's current state, read-only."""

    @property
    def booting(self) -> int: ...
    @property
    def leased(self) -> int: ...
    def idle_vms(self) -> Sequence[VmInfo]: ...


class View(Protocol):
    """The engine's state as policies see it."""

    @property
    def now(self) -> float: ...
    @property
    def sites(self) -> Sequence[SiteInfo]: ...
    @property
    def stages(self) -> int: ...
    @property
    def round_interval(self) -> float | None: ...
    @property
    def queued(self) -> int: ...
    def queue(self, stage: int = 0) -> Collection[JobInfo]: ...
    def queue_by_size(self, stage: int = 0) -> Mapping[int, Mapping[int, JobInfo]]: ...
    def stage_sites(self, stage: int) -> Sequence[int]: ...
    def cloud(self, index: int) -> CloudInfo | None: ...
    def user_runtimes(self, user: str) -> Sequence[float]: ...
    @property
    def mean_runtime(self) -> float | None: ...


class AllocationPolicy(Protocol):
    """Decides which queued jobs start where."""

    name: ClassVar[str]

    def stage_sites(self, env: Environment) -> list[tuple[int, ...]]:
        """The sites each queue (stage) may use; one stage with every site for most policies.

        Raise ValueError when `env` does not have the structure the policy needs.
        """
        ...

    def decide(self, view: View) -> Iterable[Decision]:
        """This round's decisions."""
        ...


class StagedPolicy(AllocationPolicy, Protocol):
    """An allocation policy with several queues (TAGS): it says where arrivals and killed jobs go."""

    def arrival_stage(self, job: Job) -> int:
        """The queue a newly arrived job joins."""
        ...

    def next_stage(self, stage: int) -> int:
        """The queue a job killed at the runtime limit of queue `stage` joins."""
        ...


class ProvisioningPolicy(Protocol):
    """Decides when to lease and release cloud VMs."""

    name: ClassVar[str]

    def decide(self, view: View) -> Iterable[Decision]:
        """This round's decisions."""
        ...


class RuntimePredictor(Protocol):
    """Predicts a job's runtime when it arrives."""

    name: ClassVar[str]

    def predict(self, view: View, job: Job) -> float:
        """Predicted runtime of `job` in seconds."""
        ...
