"""Jobs: rigid parallel jobs and malleable bags of tasks, as described by a workload."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from enum import IntEnum, StrEnum
from types import MemberDescriptorType
from typing import Any


class PriorityClass(IntEnum):
    """KOALA placement-queue priority (KOALA-CS thesis §2.2.3); lower value is served first."""

    SUPER_HIGH = 0
    HIGH = 1
    LOW = 2
    SUPER_LOW = 3

    @classmethod
    def parse(cls, text: str) -> PriorityClass:
        """Return the class named by `text` ('super-high', 'high', 'low', 'super-low')."""
        key = text.strip().lower().replace("-", "_").replace(" ", "_")
        try:
            return cls[key.upper()]
        except KeyError:
            names = ", ".join(p.label for p in cls)
            raise ValueError(f"unknown priority {text!r}; expected one of: {names}") from None

    @property
    def label(self) -> str:
        """The name as written in files and on the command line, e.g. 'super-high'."""
        return self.name.lower().replace("_", "-")


class JobKind(StrEnum):
    """Rigid parallel job (fixed size) or malleable bag of tasks (grows and shrinks)."""

    RIGID = "rigid"
    MALLEABLE = "malleable"


def reduce_by_fields(obj: object) -> tuple[type, tuple[object, ...]]:
    """`__reduce__` of a frozen dataclass: rebuilt by its constructor from its fields. A frozen
    slot dataclass compiled by mypyc does not unpickle through the `__setstate__` the dataclass
    decorator gives it (its writes meet the frozen `__setattr__`); the constructor works in both
    builds (Dask sweeps pickle jobs)."""
    return type(obj), tuple(getattr(obj, f.name) for f in fields(obj))  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True)
class VmRequirements:
    """The VM a job needs, as in Cloud Scheduler's job attributes (cloud-scheduler seed, Appendix I).

    Every field is optional; None means "any".
    """

    vm_type: str | None = None
    image: str | None = None
    cpu_arch: str | None = None
    cores: int | None = None
    memory_mb: int | None = None
    storage_gb: float | None = None
    network: str | None = None

    def __reduce__(self) -> tuple[type, tuple[object, ...]]:
        """Pickled as a constructor call (see `reduce_by_fields`)."""
        return reduce_by_fields(self)


@dataclass(frozen=True, slots=True)
class Job:
    """One job of a workload.

    Times are in seconds. `runtime` is the actual runtime a simulation replays (live jobs have
    it unknown until they end: NaN is not used, the live side simply never reads it).
    `requested_runtime` is the user's estimate, None when unknown. `size` is in processors.
    """

    id: int
    submit: float
    size: int
    runtime: float
    requested_runtime: float | None = None
    user: str = "0"
    group: str = "0"
    requested_memory: float | None = None
    priority: PriorityClass = PriorityClass.HIGH
    kind: JobKind = JobKind.RIGID
    tasks: int = 1
    #: a bag's task that exits non-zero runs again up to this many times (live bags)
    retries: int = 0
    vm: VmRequirements | None = field(default=None)

    @property
    def area(self) -> float:
        """Processor-seconds the job uses when it runs to completion once."""
        return self.size * self.runtime

    def __reduce__(self) -> tuple[type, tuple[object, ...]]:
        """Pickled as a constructor call (see `reduce_by_fields`)."""
        return reduce_by_fields(self)


def thawed_twin(cls: type) -> type | None:
    """A plain class with the slots of frozen slot dataclass `cls`, for building its instances
    fast: make a twin, assign its slots as plain attributes (one store a field, where the
    frozen class needs an `object.__setattr__` call or a slot writer's call), then give it
    `cls` as its class: it is then an instance of `cls` like any other, as immutable, equal to
    the one the constructor makes (tests/engine/test_fast_builders.py). For a `Job` (a trace's
    table builds one per job) 1.6x faster than the slot writers when the jobs are kept, 4.7x when
    each is dropped at once (docs/simulation.md, "Fast builders"). None when `cls` is
    compiled (mypyc: a native class with a fast constructor of its own) or the two layouts
    cannot swap classes."""
    if not all(isinstance(cls.__dict__.get(f.name), MemberDescriptorType) for f in fields(cls)):
        return None  # compiled: native attributes, no slot descriptors
    twin = type(f"_Thawed{cls.__name__}", (), {"__slots__": tuple(cls.__dict__["__slots__"])})
    probe: Any = object.__new__(twin)
    try:
        probe.__class__ = cls
    except TypeError:
        return None
    return twin


_JOB_TWIN = thawed_twin(Job)
_new_object = object.__new__
_HIGH = PriorityClass.HIGH
_RIGID = JobKind.RIGID


def rigid_job(
    id: int,
    submit: float,
    size: int,
    runtime: float,
    requested_runtime: float | None,
    user: str,
    group: str,
    requested_memory: float | None,
) -> Job:
    """`Job(id, submit, size, runtime, requested_runtime, user, group, requested_memory)` (a
    rigid job of high priority, one task, no retry, no VM requirement), equal to it and as
    immutable, built without the frozen dataclass's `__init__` (one `object.__setattr__` call a
    field) as a `thawed_twin`: a workload's table builds one per job (docs/simulation.md,
    "Fast builders")."""
    if _JOB_TWIN is None:
        return Job(id, submit, size, runtime, requested_runtime, user, group, requested_memory)
    j: Any = _new_object(_JOB_TWIN)
    j.id = id
    j.submit = submit
    j.size = size
    j.runtime = runtime
    j.requested_runtime = requested_runtime
    j.user = user
    j.group = group
    j.requested_memory = requested_memory
    j.priority = _HIGH
    j.kind = _RIGID
    j.tasks = 1
    j.retries = 0
    j.vm = None
    j.__class__ = Job
    return j  # type: ignore[no-any-return]
