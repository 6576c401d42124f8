"""A per-user budget cap on the live manager: alice's cap ($0) keeps her jobs from cloud VMs
(On-Demand asks none for her: View.user_can_pay) while bob's job gets a VM; alice's job waits
and runs on the cluster once it frees; GET /budgets and `isthmus budget` show the cap's users,
spent, committed and refusals."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from livekit import LiveServer, wait_state

ENV = """
name = "user-budget-live"
round_interval = "event"
[[sites]]
name = "local"
nodes = 1
cores_per_node = 1
[[sites]]
name = "paid"
kind = "cloud"
cores_per_node = 1
max_vms = 2
boot_time = 1
shutdown_time = 0
price_per_hour = 36
billing_increment = 60
idle_release_time = 2
[[budgets]]
name = "alice-cap"
limit = 0
users = ["alice"]
on_limit = "finish"
[policies]
allocation = "ff"
provisioning = "on-demand"
"""


def test_a_users_cap_stops_their_leases_while_another_users_jobs_get_vms(tmp_path: Path, tag: str) -> None:
    env = tmp_path / "env.toml"
    env.write_text(ENV)
    live = LiveServer(env, tmp_path / "state", f"sqlite:///{tmp_path / 'db'}", tag).start()
    try:
        admin = live.client()
        alice = live.client(admin.create_token("alice")["token"])
        bob = live.client(admin.create_token("bob")["token"])
        blocker = admin.submit(command="sleep", args=["120"])
        wait_state(admin, blocker, ("running",), timeout=30)
        # bob first: his lease is granted and his job runs on the cloud (for 20 s)
        b = bob.submit(command="sh", args=["-c", "echo $ISTHMUS_SITE; sleep 20"])
        wait_state(bob, b, ("running",), timeout=60)
        assert bob.job(b)["site"] == "paid"
        a = alice.submit(command="sh", args=["-c", "echo $ISTHMUS_SITE"])
        time.sleep(3)  # rounds run: On-Demand asks no VM for alice's job (her cap cannot pay one)
        assert alice.job(a)["state"] == "queued"
        assert len(admin.vms()) == 1  # bob's only
        (row,) = admin.budgets()
        assert (row["name"], row["users"], row["on_limit"], row["limit"], row["spent"], row["committed"]) == (
            "alice-cap",
            ["alice"],
            "finish",
            0.0,
            0.0,
            0.0,
        ), row
        assert row["refused_leases"] == 0, row
        out = subprocess.run(
            [sys.executable, "-m", "isthmus.cli.live_entry", "budget", "--url", live.url, "--token", live.admin_token],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout
        assert "alice-cap" in out and "alice" in out and "COMMITTED" in out and "finish" in out, out
        # the cluster frees: alice's job runs there while bob's still holds the VM
        admin.cancel(blocker)
        j = wait_state(alice, a, ("completed", "failed"), timeout=60)
        assert j["state"] == "completed" and alice.output(a)[0] == "local\n", j
        assert bob.job(b)["state"] == "running"
        jb = wait_state(bob, b, ("completed", "failed"), timeout=60)
        assert jb["state"] == "completed" and bob.output(b)[0] == "paid\n", jb
        assert admin.budgets()[0]["spent"] == 0.0  # nothing was charged to alice
    finally:
        live.stop()
