"""The ``gce`` driver against recorded Compute Engine API and OAuth2 token responses: a service
account's key is exchanged for a token, a lease sends the machine type, image and network the
driver looked up, the user data as ``startup-script`` and the marks as metadata and labels; the
listing reads the marks back; termination; each refusal as its SiteError."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from cloudreplay import Recorded

from isthmus.backends.api import LeaseRequest
from isthmus.backends.errors import AuthenticationError, CapacityError, InvalidRequestError, QuotaError
from isthmus.backends.libcloud_provider import GceAdapter, GceOptions, LibcloudProvider, Marks
from isthmus.model.cloud import ProviderSettings

DRIVER = "gce"
API = "/compute/v1/projects/isthmus-burst"
ZONE = f"{API}/zones/europe-west1-b"
NAME = "isthmus-gce-b-vm1-d6c636ba0b"
EMAIL = "isthmus@isthmus-burst.iam.gserviceaccount.com"


@pytest.fixture(scope="module")
def key_pem() -> str:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=1024)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    return pem.decode()


@pytest.fixture
def provider(recorded: Recorded, tmp_path: Path, key_pem: str) -> LibcloudProvider:
    key_file = tmp_path / "sa.json"
    doc = {"type": "service_account", "project_id": "isthmus-burst", "client_email": EMAIL, "private_key": key_pem}
    key_file.write_text(json.dumps(doc))
    recorded.on("POST", "/o/oauth2/token", "token.json")
    recorded.on("GET", f"{API}/zones", "zones.json")
    recorded.on("GET", f"{API}/regions", "regions.json")
    recorded.on("GET", f"{ZONE}/machineTypes/e2-small", "machine_type.json")
    recorded.on("GET", f"{API}/global/networks/default", "network.json")
    recorded.on("GET", f"{ZONE}/diskTypes/pd-balanced", "disk_type.json")
    recorded.on("GET", f"{API}/aggregated/disks", "aggregated_disks.json")
    recorded.on("GET", f"{API}/global/images", "images.json")
    recorded.on("POST", f"{ZONE}/instances", "insert_pending.json")
    recorded.on("GET", f"{ZONE}/operations/operation-insert", "insert_done.json")
    recorded.on("GET", f"{ZONE}/instances/{NAME}", "instance.json")
    recorded.on("GET", f"{ZONE}/instances", "instances.json")
    recorded.on("DELETE", f"{ZONE}/instances/{NAME}", "delete_done.json")
    recorded.on("GET", f"{ZONE}/operations/operation-delete", "delete_done.json")
    options = GceOptions(
        project="isthmus-burst", zone="europe-west1-b", key_file=str(key_file), token_file=str(tmp_path / "token")
    )
    settings = ProviderSettings(
        driver="gce", image="isthmus-pilot-2611", instance_type="e2-small", driver_options=options
    )
    return LibcloudProvider("gce-b", "m1", settings)


def test_a_lease_sends_the_drivers_own_arguments_then_lists_and_terminates(
    provider: LibcloudProvider, recorded: Recorded
) -> None:
    script = "#!/bin/sh\nexec python3 -m isthmus.agent --node 0/vm1\n"
    assert GceAdapter.instance_name(provider.adapter(), Marks("m1", "gce-b", "0/vm1")) == NAME  # stable
    [leased] = provider.lease([LeaseRequest("0/vm1", "e2-small", "isthmus-pilot-2611", user_data=script)])
    assert not isinstance(leased, Exception), leased
    assert (leased.provider_id, leased.tags["isthmus-vm"]) == (NAME, "0/vm1")

    [token] = recorded.requests("POST", "/o/oauth2/token")
    assert token.host == "accounts.google.com"
    assert token.param("grant_type") == "urn:ietf:params:oauth:grant-type:jwt-bearer"
    claims = (token.param("assertion") or "").split(".")[1]
    assert json.loads(base64.urlsafe_b64decode(claims + "=" * (-len(claims) % 4)))["iss"] == EMAIL
    [insert] = recorded.requests("POST", f"{ZONE}/instances")
    body = insert.json()
    assert body["name"] == NAME
    assert body["machineType"].endswith("/zones/europe-west1-b/machineTypes/e2-small")
    assert body["networkInterfaces"][0]["network"].endswith("/global/networks/default")
    assert body["disks"][0]["initializeParams"]["sourceImage"].endswith("/global/images/isthmus-pilot-2611")
    items = {i["key"]: i["value"] for i in body["metadata"]["items"]}
    assert items == {"isthmus-manager": "m1", "isthmus-site": "gce-b", "isthmus-vm": "0/vm1", "startup-script": script}
    assert body["labels"] == {"isthmus-manager": "m1", "isthmus-site": "gce-b"}

    found = provider.instances()
    assert [(i.provider_id, i.state, i.address) for i in found] == [
        (NAME, "running", "10.132.0.5")
    ]  # not web-1, not another's
    assert found[0].tags == {"isthmus-manager": "m1", "isthmus-site": "gce-b", "isthmus-vm": "0/vm1"}

    assert provider.release([NAME]) == {NAME: None}
    assert len(recorded.requests("DELETE", f"{ZONE}/instances/{NAME}")) == 1
    assert len(recorded.requests("POST", "/o/oauth2/token")) == 1  # the token is kept


def test_asking_again_for_the_same_key_finds_the_vm_the_first_call_made(
    provider: LibcloudProvider, recorded: Recorded
) -> None:
    resource = f"projects/isthmus-burst/zones/europe-west1-b/instances/{NAME}"
    errors = [{"reason": "alreadyExists", "domain": "global", "message": f"The resource '{resource}' already exists"}]
    conflict = {"error": {"code": 409, "message": f"The resource '{resource}' already exists", "errors": errors}}
    recorded.on("POST", f"{ZONE}/instances", body=json.dumps(conflict), status=409)
    [again] = provider.lease([LeaseRequest("0/vm1", "e2-small", "isthmus-pilot-2611")])
    assert not isinstance(again, Exception), again
    assert again.provider_id == NAME
    [other_key] = provider.lease([LeaseRequest("0/vm7", "e2-small", "isthmus-pilot-2611")])
    assert isinstance(other_key, Exception)  # a name clash with a VM of another key is not that VM


@pytest.mark.parametrize(
    ("fixture", "error"), [("insert_quota.json", QuotaError), ("insert_exhausted.json", CapacityError)]
)
def test_each_refusal_is_its_site_error(
    provider: LibcloudProvider, recorded: Recorded, fixture: str, error: type[Exception]
) -> None:
    recorded.on("GET", f"{ZONE}/operations/operation-insert", fixture)
    [refused] = provider.lease([LeaseRequest("0/vm1", "e2-small", "isthmus-pilot-2611")])
    assert type(refused) is error, refused


def test_a_refused_key_is_an_authentication_error(provider: LibcloudProvider, recorded: Recorded) -> None:
    recorded.on("POST", "/o/oauth2/token", "token_invalid_grant.json", status=400)
    [refused] = provider.lease([LeaseRequest("0/vm1", "e2-small", "isthmus-pilot-2611")])
    assert isinstance(refused, AuthenticationError), refused
    assert not recorded.requests("POST", f"{ZONE}/instances")


def test_the_key_file_must_be_a_service_account_key(tmp_path: Path) -> None:
    options = GceOptions(project="p", zone="z", key_file=str(tmp_path / "none.json"))
    with pytest.raises(ValueError, match=r"none\.json"):
        options.credentials()
    (tmp_path / "user.json").write_text(json.dumps({"type": "authorized_user", "client_id": "x"}))
    with pytest.raises(ValueError, match="service account JSON key"):
        GceOptions(project="p", zone="z", key_file=str(tmp_path / "user.json")).credentials()


def test_a_zone_the_project_does_not_have_is_refused_naming_it(provider: LibcloudProvider, recorded: Recorded) -> None:
    missing = "The resource 'projects/isthmus-burst/zones/europe-west9-z' was not found"
    errors = [{"message": missing, "domain": "global", "reason": "notFound"}]
    recorded.on(
        "GET",
        f"{API}/zones/europe-west9-z",
        body=json.dumps({"error": {"code": 404, "message": missing, "errors": errors}}),
        status=404,
    )
    options = provider.settings.driver_options.model_copy(update={"zone": "europe-west9-z"})
    settings = ProviderSettings(
        driver="gce", image="isthmus-pilot-2611", instance_type="e2-small", driver_options=options
    )
    [refused] = LibcloudProvider("gce-b", "m1", settings).lease(
        [LeaseRequest("0/vm1", "e2-small", "isthmus-pilot-2611")]
    )
    assert isinstance(refused, InvalidRequestError) and "zone 'europe-west9-z' not found" in str(refused)
    assert not recorded.requests("POST", f"{ZONE}/instances")
