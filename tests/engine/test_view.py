"""The view policies decide on hands out no backend and no mutable container of the engine."""

from __future__ import annotations

import pytest

from helpers import cloud_env, clusters, job
from isthmus.engine.backend import SiteBackend
from isthmus.sim.harness import Harness


def test_sites_are_read_only_proxies_not_backends():
    h = Harness(clusters(4, 2), "ff")
    h.running(job(1, 0, 2, 100, req=100), 0, started=0.0)
    h.queue(job(2, 0, 1, 10))
    view = h.view
    for s in view.sites:
        assert not isinstance(s, SiteBackend)
        assert not hasattr(s, "start") and not hasattr(s, "stop")
    s0 = view.sites[0]
    assert (s0.free, s0.online, s0.busy, list(s0.running)) == (2, 4, 2, [1])
    with pytest.raises(TypeError):
        s0.running[5] = None  # type: ignore[index]
    assert list(s0.by_estimated_end) == [(100.0, 1)]
    assert not hasattr(s0.by_estimated_end, "append")
    with pytest.raises(AttributeError):
        s0.free = 9  # type: ignore[misc]
    assert not hasattr(view.queue(0), "append") and not hasattr(view.queue(0), "pop")
    bucket = view.queue_by_size(0)[1]
    with pytest.raises(TypeError):
        bucket[3] = None  # type: ignore[index]
    assert isinstance(view.user_runtimes("u"), tuple)


def test_the_view_follows_the_state_without_copies():
    h = Harness(clusters(4), "fcfs")
    s0 = h.view.sites[0]
    outcomes = h.decide()
    assert outcomes == []
    h.queue(job(1, 0, 3, 10))
    (o,) = h.decide()
    assert o.status.accepted and s0.free == 1 and list(s0.running) == [1]


def test_cloud_view_exposes_vms_read_only():
    h = Harness(cloud_env(2, 4, price=0.1), "ff", "on-demand")
    h.vms(1, 2)
    cloud = h.view.cloud(1)
    assert cloud is not None and h.view.cloud(0) is None
    assert (cloud.leased, cloud.booting, cloud.free) == (2, 0, 2)
    vms = cloud.idle_vms()
    assert len(vms) == 2
    with pytest.raises(AttributeError):
        vms[0].free = 0  # type: ignore[misc]
