"""`start_job` and `rigid_job` (the hot paths' builders, docs/simulation.md "Fast builders") give
objects equal to the dataclass constructors' in every field, hash and pickle: as immutable, and
of the same class (pure build: slot writers; compiled build: the constructor)."""

from __future__ import annotations

import dataclasses
import pickle
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from isthmus.decisions.start import StartJob, start_job
from isthmus.model.job import Job, VmRequirements, rigid_job

maybe_float = st.none() | st.floats(0, 1e9)


@given(st.integers(0, 2**62), st.integers(0, 100), maybe_float, st.text(max_size=8))
def test_start_job_equals_the_constructor(job_id: int, site: int, limit: float | None, by: str) -> None:
    built = start_job(job_id, site, limit, by)
    made = StartJob(job_id, site, limit, by=by)
    assert type(built) is StartJob
    assert dataclasses.astuple(built) == dataclasses.astuple(made)
    assert built == made and hash(built) == hash(made)
    assert repr(built) == repr(made)
    with pytest.raises(dataclasses.FrozenInstanceError):
        built.site = site + 1  # type: ignore[misc]


@given(
    st.integers(0, 2**62),
    st.floats(0, 1e9),
    st.integers(1, 4096),
    st.floats(0, 1e7),
    maybe_float,
    st.text(max_size=4),
    st.text(max_size=4),
    maybe_float,
)
def test_rigid_job_equals_the_constructor(
    id: int,
    submit: float,
    size: int,
    runtime: float,
    requested: float | None,
    user: str,
    group: str,
    memory: float | None,
) -> None:
    built = rigid_job(id, submit, size, runtime, requested, user, group, memory)
    made = Job(id, submit, size, runtime, requested, user, group, memory)
    assert type(built) is Job
    assert dataclasses.astuple(built) == dataclasses.astuple(made)  # every field set, defaults too
    assert built == made and hash(built) == hash(made)
    assert dataclasses.replace(built, size=size + 1) == dataclasses.replace(made, size=size + 1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        built.size = size + 1  # type: ignore[misc]


@pytest.mark.parametrize(
    ("built", "made"),
    [
        (lambda: start_job(7, 1, 60.0, "tags"), lambda: StartJob(7, 1, 60.0, by="tags")),
        (lambda: rigid_job(7, 1.0, 4, 9.0, None, "u", "g", 2.0), lambda: Job(7, 1.0, 4, 9.0, None, "u", "g", 2.0)),
        (
            lambda: Job(3, 0.0, 1, 1.0, vm=VmRequirements(cores=2, image="x")),
            lambda: Job(3, 0.0, 1, 1.0, vm=VmRequirements(cores=2, image="x")),
        ),
    ],
    ids=["start_job", "rigid_job", "job-with-vm"],
)
def test_built_objects_pickle_as_the_constructed(built: Callable[[], object], made: Callable[[], object]) -> None:
    """Dask sweeps pickle jobs: a built one comes back equal to the constructor's (compiled too:
    a mypyc frozen slot dataclass does not unpickle by its decorator's `__setstate__`)."""
    assert pickle.loads(pickle.dumps(built())) == made()


def test_a_thawed_twin_becomes_the_frozen_class_or_is_not_offered() -> None:
    """The twin's instances take the frozen class (same slots, same layout); a class whose
    layout a twin cannot share (no slots; a weak-reference slot, placed apart) gets no twin,
    and its builder falls back to the constructor."""
    from isthmus.model.job import thawed_twin

    if thawed_twin(Job) is None:  # compiled build: its classes are native, not slot dataclasses
        pytest.skip("no slot writers in this build")

    @dataclasses.dataclass(frozen=True, slots=True)
    class Point:
        x: int
        y: str

    @dataclasses.dataclass(frozen=True, slots=True, weakref_slot=True)
    class WeakPoint:
        x: int

    @dataclasses.dataclass(frozen=True)
    class Loose:
        x: int

    twin = thawed_twin(Point)
    assert twin is not None
    p = object.__new__(twin)
    p.x, p.y = 1, "a"
    p.__class__ = Point
    assert p == Point(1, "a") and hash(p) == hash(Point(1, "a"))
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.x = 2
    assert thawed_twin(WeakPoint) is None and thawed_twin(Loose) is None
