"""The sites router: what each kind of site shows (asked of its backend, `describe`), the VM
list (`describe_vm`), queues, budgets and the pool over time."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from serverkit import Api, manager_for

from isthmus.server.app import create_app
from isthmus.server.auth import hash_token, new_token

EVERY_KIND = """
name = "kinds"
round_interval = "event"
[[sites]]
name = "plain"
nodes = 1
cores_per_node = 2
[[sites]]
name = "direct"
nodes = 2
cores_per_node = 2
[sites.lrm]
driver = "slurm"
mode = "direct"
keep_free = 1
[[sites]]
name = "pilots"
nodes = 2
cores_per_node = 2
[sites.lrm]
driver = "gridengine"
mode = "pilot"
[[sites]]
name = "local-cloud"
kind = "cloud"
max_vms = 2
cores_per_node = 2
[[sites]]
name = "ec2"
kind = "cloud"
max_vms = 1
cores_per_node = 1
price_per_hour = 0.5
[sites.provider]
driver = "ec2"
endpoint = "http://127.0.0.1:9"
key_env = "ISTHMUS_ROUTER_TEST_KEY"
secret_env = "ISTHMUS_ROUTER_TEST_SECRET"
instance_type = "t2.micro"
image = "ami-12c6146b"
[policies]
allocation = "ff"
provisioning = "on-demand"
"""


def test_each_site_shows_what_its_backend_knows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A manager that is not started (nothing is contacted): the API over its backends."""
    monkeypatch.setenv("ISTHMUS_ROUTER_TEST_KEY", "k")
    monkeypatch.setenv("ISTHMUS_ROUTER_TEST_SECRET", "s")
    manager = manager_for(EVERY_KIND, tmp_path)
    manager.store.create()
    token = new_token()
    with manager.store.begin() as conn:
        manager.store.ensure_user(conn, "admin", admin=True)
        manager.store.add_token(conn, hash_token(token), user="admin", kind="user")
    manager.manager_id = "abc123"
    direct, pilots, ec2 = manager.engine.backends[1], manager.engine.backends[2], manager.engine.backends[4]
    direct.waiting_local = 3  # type: ignore[attr-defined]
    ec2.error_vms, ec2.last_error = 2, "quota exceeded"  # type: ignore[attr-defined]
    with TestClient(create_app(manager, manage_lifecycle=False)) as client:
        answer = client.get("/sites", headers={"Authorization": f"Bearer {token}"})
        metrics = client.get("/metrics", headers={"Authorization": f"Bearer {token}"}).text
    assert answer.status_code == 200, answer.text
    sites: dict[str, dict[str, Any]] = {s["name"]: s for s in answer.json()}
    assert list(sites) == ["plain", "direct", "pilots", "local-cloud", "ec2"]
    common = {"index", "name", "kind", "online", "free", "busy", "running", "max_processors", "unavailable"}
    cloud = {"leased", "booting", "max_vms", "price_per_hour", "vms_by_state", "charged_cost"}
    assert set(sites["plain"]) == common | {"queued_total"}
    assert set(sites["local-cloud"]) == common | cloud | {"queued_total"}
    assert sites["direct"]["lrm"] == {
        "driver": "slurm",
        "mode": "direct",
        "keep_free": 1,
        "waiting_local": 3,
        "comment": "isthmus:abc123:",
    }
    assert "pilots" not in sites["direct"] and "leased" not in sites["direct"]
    assert sites["pilots"]["lrm"]["driver"] == "gridengine" and sites["pilots"]["lrm"]["mode"] == "pilot"
    assert sites["pilots"]["pilots"] == pilots.pilot_counts()  # type: ignore[attr-defined]
    assert sites["ec2"]["provider"] == {
        "driver": "ec2",
        "error_vms": 2,
        "last_error": "quota exceeded",
        "leasing": "ok",
    }
    assert (sites["ec2"]["max_vms"], sites["ec2"]["price_per_hour"], sites["ec2"]["leased"]) == (1, 0.5, 0)
    assert sites["ec2"]["vms_by_state"] == {"booting": 0, "idle": 0, "busy": 0, "releasing": 0}
    assert {s["kind"] for s in sites.values()} == {"cluster", "cloud"}
    # /metrics asks the same descriptions: VM gauges and lease counters for the clouds alone
    for name in sites:
        is_cloud = sites[name]["kind"] == "cloud"
        assert (f'isthmus_vms{{site="{name}",state="idle"}} 0.0' in metrics) is is_cloud, name
        assert (f'isthmus_vm_leases_total{{site="{name}"}} 0.0' in metrics) is is_cloud, name
    assert all(s["queued_total"] == 0 for s in sites.values())


def _wait_for(api: Api, path: str, ready: Any, timeout: float = 10.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        body = api.client.get(path, headers=api.admin).json()
        if ready(body) or time.monotonic() > deadline:
            return body
        time.sleep(0.05)


def test_a_leased_vm_and_its_queue_are_listed(api: Api) -> None:
    alice = api.user("alice")
    job = api.client.post("/jobs", json={"command": "true", "size": 2}, headers=alice).json()["id"]
    vms = _wait_for(api, "/vms", lambda rows: len(rows) == 1)
    assert len(vms) == 1, vms
    (vm,) = vms
    assert (vm["site_name"], vm["state"], vm["activity"], vm["retiring"]) == ("cloud", "booting", None, False)
    assert vm["user"] is None  # no vm-share owner and nothing runs on it yet
    assert vm["lease_seconds"] >= 0 and vm["charged_cost"] == 0.0
    (site,) = api.client.get("/sites", headers=alice).json()
    assert (site["leased"], site["booting"], site["queued_total"]) == (1, 1, 1)
    assert site["vms_by_state"] == {"booting": 1, "idle": 0, "busy": 0, "releasing": 0}
    metrics = api.client.get("/metrics", headers=api.admin).text
    assert 'isthmus_vms{site="cloud",state="booting"} 1.0' in metrics
    (queue,) = api.client.get("/queues", headers=alice).json()
    assert queue["jobs"] == 1, queue
    series = api.client.get("/timeseries", params={"window": 60, "points": 3}, headers=alice).json()
    assert len(series["times"]) == 3
    nodes = api.client.get("/nodes", headers=alice).json()
    assert [(n["site"], n["state"], n["cpus_idle"]) for n in nodes if n["site"] == "cloud"] == [
        ("cloud", "booting", 0)
    ], nodes  # the booting VM's position: its pilot does not serve yet
    # the last point is the present: the VM is leased (booting) and the job still waits for it
    assert (series["leased_vms"][-1], series["queued_processors"][-1]) == (1, 2), series
    assert api.client.post(f"/jobs/{job}/cancel", headers=alice).json()["state"] == "cancelled"


CAPPED = """
name = "capped"
round_interval = "event"
[[sites]]
name = "c"
kind = "cloud"
max_vms = 1
cores_per_node = 1
boot_time = 86400
[[budgets]]
name = "daily"
limit = 2
sites = ["c"]
period = "day"
[policies]
allocation = "ff"
provisioning = "on-demand"
"""


def test_the_budgets_router_lists_and_changes_a_cap(tmp_path: Path) -> None:
    """Caps are listed to users and changed by the admin only; `--budget` covers every cloud."""
    manager = manager_for(CAPPED, tmp_path, budget=5.0)
    with TestClient(create_app(manager)) as client:
        admin = {"Authorization": f"Bearer {manager.admin_token}"}
        user = client.post("/tokens", json={"user": "alice"}, headers=admin).json()["token"]
        alice = {"Authorization": f"Bearer {user}"}
        rows = {r["name"]: r for r in client.get("/budgets", headers=alice).json()}
        assert (rows["daily"]["limit"], rows["daily"]["period"], rows["daily"]["sites"]) == (2.0, "day", ["c"])
        assert (rows["--budget"]["sites"], rows["--budget"]["limit"], rows["--budget"]["left"]) == (["c"], 5.0, 5.0)
        assert client.put("/budgets/daily", json={"limit": 3.5}, headers=alice).status_code == 403
        changed = client.put("/budgets/daily", json={"limit": 3.5}, headers=admin)
        assert (changed.status_code, changed.json()["limit"], changed.json()["left"]) == (200, 3.5, 3.5)
        assert client.get("/budgets", headers=alice).json()[0]["limit"] == 3.5
        missing = client.put("/budgets/nope", json={"limit": 1.0}, headers=admin)
        assert missing.status_code == 404 and "daily" in missing.json()["detail"]
