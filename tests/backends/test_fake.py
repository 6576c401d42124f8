"""The fake batch system and cloud keep the contracts of the real drivers that the live sites rely on."""

from __future__ import annotations

import pytest

from isthmus.backends.api import LeaseRequest, RunRequest
from isthmus.backends.errors import CapacityError, SiteTimeoutError, TransientError
from isthmus.backends.fake import FakeBatchSystem, FakeCloud
from isthmus.model.states import JobState


def test_the_batch_system_finds_only_the_connected_managers_jobs_and_forgets_on_request() -> None:
    fake = FakeBatchSystem(nodes=1, cores_per_node=4)
    [mine] = fake.connect("a").submit([RunRequest("j1r1", ("true",), 2)])
    [theirs] = fake.connect("b").submit([RunRequest("j1r1", ("true",), 1)])
    assert list(fake.connect("a").find()) == [mine]
    fake.run(mine)
    assert fake.capacity().free == 2
    fake.forget(mine)
    assert fake.status([mine, theirs]) == {theirs: fake.jobs[theirs].remote()}


def test_the_batch_system_refuses_and_stops_answering_on_request() -> None:
    fake = FakeBatchSystem()
    fake.refuse_next(TransientError("busy"))
    refused, ok = fake.submit([RunRequest("a", ("true",), 1), RunRequest("b", ("true",), 1)])
    assert isinstance(refused, TransientError) and isinstance(ok, str)
    fake.unavailable = SiteTimeoutError("down")
    with pytest.raises(SiteTimeoutError):
        fake.status([ok])
    fake.unavailable = None
    fake.finish(ok, exit_code=2)
    assert fake.status([ok])[ok].state is JobState.FAILED and fake.status([ok])[ok].exit_code == 2


def test_the_cloud_leases_once_per_key_and_refuses_beyond_its_capacity() -> None:
    fake = FakeCloud(max_instances=1).connect("m")
    [first] = fake.lease([LeaseRequest("0/vm0", "small", "img")])
    [again] = fake.lease([LeaseRequest("0/vm0", "small", "img")])  # as EC2's client token
    assert not isinstance(first, Exception) and not isinstance(again, Exception)
    assert again.provider_id == first.provider_id
    [refused] = fake.lease([LeaseRequest("0/vm1", "small", "img")])
    assert isinstance(refused, CapacityError)
    assert fake.release([first.provider_id]) == {first.provider_id: None}
    assert [i.state for i in fake.instances()] == ["terminated"]
    [third] = fake.lease([LeaseRequest("0/vm1", "small", "img")])
    assert not isinstance(third, Exception) and third.tags["isthmus-manager"] == "m"
