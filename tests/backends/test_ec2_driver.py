"""The ``ec2`` driver against recorded EC2 Query API responses: what RunInstances is sent (user
data, tags, client token, key pair, subnet and security groups), a listing filtered on the
manager's tag across pages, termination, and each refusal as its SiteError. The same driver runs
end to end against the local EC2-compatible server in tests/live/test_live_cloud_e2e.py."""

from __future__ import annotations

import base64

import pytest
from cloudreplay import Recorded, Sent

from isthmus.backends.api import LeaseRequest
from isthmus.backends.errors import AuthenticationError, CapacityError, QuotaError
from isthmus.backends.libcloud_provider import Ec2Options, LibcloudProvider
from isthmus.model.cloud import ProviderSettings

DRIVER = "ec2"
ID = "i-0a1b2c3d4e5f60718"


@pytest.fixture
def provider(recorded: Recorded, monkeypatch: pytest.MonkeyPatch) -> LibcloudProvider:
    monkeypatch.setenv("ISTHMUS_EC2_KEY", "AKIDEXAMPLE")
    monkeypatch.setenv("ISTHMUS_EC2_SECRET", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
    answer(recorded, "RunInstances", "run_instances.xml")
    answer(recorded, "DescribeInstances", "describe_instances_page2.xml")
    answer(recorded, "DescribeInstances", "describe_instances_page1.xml", times=1)
    answer(recorded, "TerminateInstances", "terminate_instances.xml")
    options = Ec2Options(
        region="eu-west-1",
        key_env="ISTHMUS_EC2_KEY",
        secret_env="ISTHMUS_EC2_SECRET",
        key_name="ops",
        subnet="subnet-0a1b2c3d",
        security_groups=["sg-0123abcd"],
    )
    settings = ProviderSettings(
        driver="ec2", image="ami-0c1d2e3f4a5b6c7d8", instance_type="t3.small", driver_options=options
    )
    return LibcloudProvider("aws", "m1", settings)


def answer(recorded: Recorded, action: str, fixture: str, status: int = 200, times: int | None = None) -> None:
    """Answer `action` (Libcloud sends EC2 Query requests as GET or POST) with `fixture`."""
    for method in ("GET", "POST"):
        recorded.on(method, "/", fixture, status=status, action=action, times=times)


def _tags(sent: Sent) -> dict[str, str]:
    out = {}
    for n in range(1, 20):
        key = sent.param(f"TagSpecification.1.Tag.{n}.Key")
        if key is None:
            break
        out[key] = sent.param(f"TagSpecification.1.Tag.{n}.Value") or ""
    return out


def test_a_lease_sends_the_drivers_own_arguments_then_lists_and_terminates(
    provider: LibcloudProvider, recorded: Recorded
) -> None:
    script = "#!/bin/sh\nexec python3 -m isthmus.agent --node 0/vm1\n"
    [leased] = provider.lease([LeaseRequest("0/vm1", "t3.small", "ami-0c1d2e3f4a5b6c7d8", user_data=script)])
    assert not isinstance(leased, Exception), leased
    assert (leased.provider_id, leased.state) == (ID, "pending")
    [run] = [s for s in recorded.sent if s.param("Action") == "RunInstances"]
    assert run.host == "ec2.eu-west-1.amazonaws.com"
    assert (run.param("ImageId"), run.param("InstanceType")) == ("ami-0c1d2e3f4a5b6c7d8", "t3.small")
    assert base64.b64decode(run.param("UserData") or "").decode() == script
    assert (run.param("ClientToken"), run.param("KeyName"), run.param("SubnetId")) == (
        "m1-0/vm1",
        "ops",
        "subnet-0a1b2c3d",
    )
    assert run.param("SecurityGroupId.1") == "sg-0123abcd"
    assert run.param("TagSpecification.1.ResourceType") == "instance"
    assert _tags(run) == {
        "Name": "isthmus-aws-vm1",
        "isthmus-manager": "m1",
        "isthmus-site": "aws",
        "isthmus-vm": "0/vm1",
    }

    found = provider.instances()
    first, second = [s for s in recorded.sent if s.param("Action") == "DescribeInstances"]
    for describe in (first, second):
        assert (describe.param("Filter.1.Name"), describe.param("Filter.1.Value.1")) == ("tag:isthmus-manager", "m1")
    assert (first.param("NextToken"), second.param("NextToken")) == (None, "eyJ2IjoiMiIsImMiOiJwYWdlMiJ9")
    assert [(i.provider_id, i.state) for i in found] == [(ID, "running"), ("i-0b2c3d4e5f6071829", "terminated")]
    assert (found[0].address, found[0].tags["isthmus-site"], found[1].tags["isthmus-vm"]) == (
        "172.31.5.9",
        "aws",
        "0/vm2",
    )

    assert provider.release([ID]) == {ID: None}
    [terminate] = [s for s in recorded.sent if s.param("Action") == "TerminateInstances"]
    assert terminate.param("InstanceId.1") == ID


@pytest.mark.parametrize(
    ("fixture", "error"),
    [
        ("insufficient_capacity.xml", CapacityError),
        ("instance_limit.xml", QuotaError),
        ("auth_failure.xml", AuthenticationError),
    ],
)
def test_each_refusal_is_its_site_error(
    provider: LibcloudProvider, recorded: Recorded, fixture: str, error: type[Exception]
) -> None:
    answer(recorded, "RunInstances", fixture, status=401 if error is AuthenticationError else 400)
    [refused] = provider.lease([LeaseRequest("0/vm1", "t3.small", "ami-0c1d2e3f4a5b6c7d8")])
    assert type(refused) is error


def test_terminating_an_instance_ec2_no_longer_has_counts_as_done(
    provider: LibcloudProvider, recorded: Recorded
) -> None:
    answer(recorded, "TerminateInstances", "not_found.xml", status=400)
    assert provider.release(["i-0ffffffffffffffff"]) == {"i-0ffffffffffffffff": None}
    answer(recorded, "TerminateInstances", "auth_failure.xml", status=401)
    [(_, refused)] = provider.release(["i-0ffffffffffffffff"]).items()
    assert isinstance(refused, AuthenticationError)
