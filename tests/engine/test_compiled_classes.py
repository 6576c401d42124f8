"""isinstance against the engine's classes answers as in pure Python, compiled with mypyc or not.

A class compiled as a native class (setup.py, ISTHMUS_MYPYC=1) that extends an ABC shares the
ABC's isinstance cache: once a list passed isinstance(x, Sequence), it passed isinstance(x,
JobTable) too, and a cluster's backend passed isinstance(x, CloudBackend). Such classes are
therefore not ABCs (SiteBackend), not compiled (model/jobtable.py) or not native (the view's
read-only collections, engine/readonly.py). This runs in both builds; CI's is pure Python.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from helpers import clusters
from isthmus.backends.simulated import SimCluster
from isthmus.engine.backend import CloudBackend, SiteBackend
from isthmus.engine.readonly import BucketsView, ReadOnlyList, SortedBucketsView, SortedGroup
from isthmus.model.jobtable import JobsById, JobTable


def test_a_cluster_backend_is_no_cloud_backend() -> None:
    backend = SimCluster(0, clusters(4).sites[0], lambda *args: None)
    assert isinstance(backend, SiteBackend)
    assert not isinstance(backend, CloudBackend)
    assert not isinstance(backend, CloudBackend)  # asked again: from the cache, the same answer
    assert not issubclass(SimCluster, CloudBackend)


def test_builtin_collections_are_none_of_the_engines_collections() -> None:
    # the ABCs first, so that a shared cache would hold list, dict and tuple
    assert isinstance([], Sequence) and isinstance({}, Mapping) and isinstance((), Iterable)
    for cls in (JobTable, ReadOnlyList):
        assert not isinstance([], cls), cls
    for cls in (JobsById, BucketsView, SortedBucketsView):
        assert not isinstance({}, cls), cls
    assert not isinstance((), SortedGroup)
    assert isinstance(ReadOnlyList([]), Sequence)
