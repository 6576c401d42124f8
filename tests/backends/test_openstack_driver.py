"""The ``openstack`` driver against recorded Keystone v3, Nova, Glance and Neutron responses:
what a lease sends (user data, metadata marks, key pair, looked-up flavour, image and network),
what a listing reads back, termination, and each refusal as its SiteError."""

from __future__ import annotations

import base64

import pytest
from cloudreplay import Recorded

from isthmus.backends.api import LeaseRequest
from isthmus.backends.errors import AuthenticationError, InvalidRequestError, QuotaError
from isthmus.backends.libcloud_provider import LibcloudProvider, OpenStackOptions
from isthmus.model.cloud import ProviderSettings

DRIVER = "openstack"
PROJECT = "0a1b2c3d4e5f40718293a4b5c6d7e8f9"
NOVA = f"/v2.1/{PROJECT}"
SERVER = "d2b8c2a4-7c41-4f0e-9d8b-64bb0f8c1e5a"
PILOT = "9f1c0a57-3d0b-4b0c-8b5e-2f0a4cfb2c11"


@pytest.fixture
def provider(recorded: Recorded, monkeypatch: pytest.MonkeyPatch) -> LibcloudProvider:
    monkeypatch.setenv("ISTHMUS_OS_USER", "ops")
    monkeypatch.setenv("ISTHMUS_OS_PASSWORD", "pw")
    recorded.on("POST", "/v3/auth/tokens", "auth_tokens.json", status=201, headers={"X-Subject-Token": "tok-1"})
    recorded.on("GET", f"{NOVA}/flavors/detail", "flavors_detail.json")
    recorded.on("GET", "/v2/images", "images.json")
    recorded.on("GET", "/v2.0/networks", "networks.json")
    recorded.on("POST", f"{NOVA}/servers", "server_create.json", status=202)
    recorded.on("GET", f"{NOVA}/servers/{SERVER}", "server_build.json")
    recorded.on("GET", f"{NOVA}/servers/detail", "servers_detail.json")
    recorded.on("DELETE", f"{NOVA}/servers/{SERVER}", status=204)
    recorded.on("DELETE", f"{NOVA}/servers/0e0e0e0e-0000-4000-8000-000000000000", "server_not_found.json", status=404)
    options = OpenStackOptions(
        auth_url="https://keystone.example.org:5000",
        project="isthmus",
        key_env="ISTHMUS_OS_USER",
        secret_env="ISTHMUS_OS_PASSWORD",
        key_name="ops",
        networks=["isthmus-net"],
        security_groups=["isthmus-pilots"],
    )
    settings = ProviderSettings(
        driver="openstack", image="isthmus-pilot", instance_type="m1.small", driver_options=options
    )
    return LibcloudProvider("openstack-a", "m1", settings)


def test_a_lease_sends_the_drivers_own_arguments_then_lists_and_terminates(
    provider: LibcloudProvider, recorded: Recorded
) -> None:
    script = "#!/bin/sh\nexec python3 -m isthmus.agent --node 0/vm1\n"
    [leased] = provider.lease([LeaseRequest("0/vm1", "m1.small", "isthmus-pilot", user_data=script)])
    assert not isinstance(leased, Exception), leased
    assert (leased.provider_id, leased.state) == (SERVER, "pending")

    auths = recorded.requests("POST", "/v3/auth/tokens")  # Libcloud: one token per service (Nova, Glance, Neutron)
    assert len(auths) == 3
    for auth in auths:
        identity = auth.json()["auth"]
        assert identity["identity"]["password"]["user"] == {
            "name": "ops",
            "password": "pw",
            "domain": {"name": "Default"},
        }
        assert identity["scope"]["project"] == {"name": "isthmus", "domain": {"id": "default"}}
    [create] = recorded.requests("POST", f"{NOVA}/servers")
    server = create.json()["server"]
    assert server["flavorRef"] == "2"  # m1.small, looked up by name
    assert server["imageRef"] == PILOT  # isthmus-pilot, looked up by name
    assert server["networks"] == [{"uuid": "8a6f1e3c-1f2b-4d1c-9a7e-5b3c2d1e0f02"}]
    assert base64.b64decode(server["user_data"]).decode() == script
    assert server["metadata"] == {"isthmus-manager": "m1", "isthmus-site": "openstack-a", "isthmus-vm": "0/vm1"}
    assert (server["key_name"], server["security_groups"]) == ("ops", [{"name": "isthmus-pilots"}])
    assert server["name"] == "isthmus-openstack-a-vm1"

    found = {i.provider_id: i for i in provider.instances()}
    assert set(found) == {SERVER, "5c0e8f1a-2b3d-4e5f-8a9b-0c1d2e3f4a5b"}  # neither web-1 nor another manager's
    assert (found[SERVER].state, found[SERVER].address, found[SERVER].tags["isthmus-vm"]) == (
        "running",
        "10.20.0.7",
        "0/vm1",
    )
    assert found["5c0e8f1a-2b3d-4e5f-8a9b-0c1d2e3f4a5b"].state == "error"  # "No valid host": the manager replaces it

    gone = "0e0e0e0e-0000-4000-8000-000000000000"
    assert provider.release([SERVER, gone]) == {SERVER: None, gone: None}
    assert [s.path for s in recorded.sent if s.method == "DELETE"] == [
        f"{NOVA}/servers/{SERVER}",
        f"{NOVA}/servers/{gone}",
    ]
    assert len(recorded.requests("POST", "/v3/auth/tokens")) == 3  # the tokens are kept


def test_a_quota_refusal_is_a_quota_error(provider: LibcloudProvider, recorded: Recorded) -> None:
    recorded.on("POST", f"{NOVA}/servers", "quota_exceeded.json", status=403)
    [refused] = provider.lease([LeaseRequest("0/vm1", "m1.small", "isthmus-pilot")])
    assert isinstance(refused, QuotaError) and "Quota exceeded for instances" in str(refused)


def test_refused_credentials_are_an_authentication_error(provider: LibcloudProvider, recorded: Recorded) -> None:
    recorded.on("POST", "/v3/auth/tokens", "auth_failed.json", status=401)
    [refused] = provider.lease([LeaseRequest("0/vm1", "m1.small", "isthmus-pilot")])
    assert isinstance(refused, AuthenticationError)
    assert not recorded.requests("POST", f"{NOVA}/servers")


def test_an_unknown_flavour_or_image_is_refused_before_any_server_is_asked_for(
    provider: LibcloudProvider, recorded: Recorded
) -> None:
    [no_flavour, no_image] = provider.lease(
        [LeaseRequest("0/vm1", "m9.huge", "isthmus-pilot"), LeaseRequest("0/vm2", "m1.small", "centos-5")]
    )
    assert isinstance(no_flavour, InvalidRequestError) and "flavour 'm9.huge' not found" in str(no_flavour)
    assert isinstance(no_image, InvalidRequestError) and "image 'centos-5' not found" in str(no_image)
    assert not recorded.requests("POST", f"{NOVA}/servers")


def test_the_options_name_what_openstack_needs() -> None:
    with pytest.raises(ValueError, match="auth_url"):
        OpenStackOptions(project="p", key_env="U", secret_env="P")  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="expected http"):
        OpenStackOptions(auth_url="keystone:5000", project="p", key_env="U", secret_env="P")
    with pytest.raises(ValueError, match="credentials are needed"):
        OpenStackOptions(auth_url="https://k:5000", project="p")
