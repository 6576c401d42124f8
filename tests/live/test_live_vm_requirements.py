"""VM requirements and per-user VMs on a live manager (Cloud Scheduler, Appendix I and §3.3).

On a real EC2 API (a local moto server, its VMs played by `cloudkit.VmPlayer`) two users'
jobs with different requirements get VMs of the right instance type (the provider size of
the cheapest type that fits), each VM serving its user (`isthmus vms`, /vms). A job no site can
ever match is refused at submission with a 400 naming the field, through the API and the CLI.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cloudkit import AMI, VmPlayer, typed_ec2, wait_until
from livekit import LiveServer, wait_state

from isthmus.live.client import ApiError

TERMINAL = ("completed", "failed", "cancelled", "timeout", "rejected")

ENV = """
name = "ec2-typed"
round_interval = "event"
[policies]
allocation = "ff"
provisioning = "none"
fairshare = { name = "vm-share", params = { mode = "graceful" } }
[[sites]]
name = "ec2"
kind = "cloud"
max_vms = 3
boot_time = 2
shutdown_time = 0
billing_increment = 60
networks = ["private"]
"""


def _live(tmp_path: Path, endpoint: str, tag: str, **options: float) -> LiveServer:
    path = tmp_path / "env.toml"
    path.write_text(ENV + typed_ec2(endpoint, small=0.0116, large=0.0928, boot_timeout=30))
    return LiveServer(path, tmp_path / "state", f"sqlite:///{tmp_path / 'db'}", tag, **options)


def _cli(live: LiveServer, *args: str, token: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ISTHMUS_URL": live.url, "ISTHMUS_TOKEN": token or live.admin_token}
    return subprocess.run(  # noqa: PLW1510
        [sys.executable, "-m", "isthmus.cli.live_entry", *args], env=env, capture_output=True, text=True, timeout=60
    )


def test_two_users_jobs_get_vms_of_the_type_their_requirements_need(tmp_path: Path, tag: str, endpoint: str) -> None:
    live = _live(tmp_path, endpoint, tag).start()
    with VmPlayer(endpoint, tmp_path / "vms", tag) as player:
        try:
            admin = live.client()
            alice = live.client(admin.create_token("alice")["token"])
            bob_token = admin.create_token("bob")["token"]
            bob = live.client(bob_token)
            # alice needs 4 GB: only "large" (t2.large) has it; bob asks for nothing: the
            # cheapest type, "small" (t2.micro)
            # 10 s: both CLI calls below (a Python start-up each, slow on a loaded machine) must
            # see the two VMs still busy
            a = alice.submit(command="sh", args=["-c", "sleep 10; echo alice"], vm={"memory_mb": 4096})
            b = bob.submit(command="sh", args=["-c", "sleep 10; echo bob"])
            # while they run, each VM serves its user: `isthmus vms` shows the type and the user
            wait_state(admin, a, ("running",), timeout=60)
            wait_state(admin, b, ("running",), timeout=60)
            rows = json.loads(_cli(live, "vms", "--json").stdout)
            assert sorted((r["type_name"], r["user"]) for r in rows) == [("large", "alice"), ("small", "bob")], rows
            table = _cli(live, "vms").stdout
            assert "USER" in table and "alice" in table and "large" in table, table
            for job in (a, b):
                j = wait_state(admin, job, TERMINAL, timeout=60)
                assert j["state"] == "completed", j["history"]
            assert alice.output(a)[0] == "alice\n" and bob.output(b)[0] == "bob\n"
            # the provider leased the provider sizes of the chosen types, booting the image
            sizes = sorted(i["InstanceType"] for i in player.instances())
            assert sizes == ["t2.large", "t2.micro"], player.instances()
            assert {i["ImageId"] for i in player.instances()} == {AMI}
            # each VM is released once its user has no more work
            wait_until(
                lambda: all(i["State"]["Name"] in ("terminated", "shutting-down") for i in player.instances()),
                timeout=60,
                what="every instance terminated",
            )
            vms = admin.vms(True)
            assert sorted((v["type_name"], v["owner"], v["cores"]) for v in vms) == [
                ("large", "alice", 2),
                ("small", "bob", 1),
            ]
        finally:
            live.stop()


def test_a_job_no_site_can_match_is_refused_with_the_field_named(tmp_path: Path, tag: str, endpoint: str) -> None:
    live = _live(tmp_path, endpoint, tag).start()
    try:
        c = live.client()
        with pytest.raises(ApiError) as info:
            c.submit(command="true", vm={"memory_mb": 65536})
        assert info.value.status == 400
        assert str(info.value) == (
            "400: vm.memory_mb: no site can match its VM requirements (memory=65536 MB): ec2: type small has 1024 MB "
            "of memory, not 65536 MB; type large has 8192 MB of memory, not 65536 MB"
        )
        with pytest.raises(ApiError) as info:
            c.submit(command="true", vm={"network": "public", "cpu_arch": "x86_64"})
        assert info.value.status == 400 and str(info.value).startswith("400: vm.network: no site can match")
        # each alone can be matched, not together: the whole vm object is named
        with pytest.raises(ApiError) as info:
            c.submit(command="true", vm={"vm_type": "small", "memory_mb": 4096})
        assert info.value.status == 400 and str(info.value).startswith("400: vm: no site can match")
        # hostile input is refused by the schema (422 naming the field), nothing stored
        for bad in (
            '{"memory_mb": -1}',
            '{"cores": "4"}',
            '{"storage_gb": 1e999}',
            '{"ram": 1}',
            '{"image": "a\\u0000"}',
            '{"vm_type": "' + "x" * 65 + '"}',
            '{"network": ""}',
        ):
            body = '{"command": "true", "vm": ' + bad + "}"
            r = c.http.post("/jobs", content=body, headers={"content-type": "application/json"})
            assert r.status_code == 422, (bad, r.text)
            assert '"vm"' in r.text, r.text
        assert c.jobs(all_=True) == []
        # the CLI: exit 2 (refused) with the server's reason, nothing submitted
        r = _cli(live, "submit", "--vm-memory", "65536", "--", "true")
        assert r.returncode == 2 and "vm.memory_mb: no site can match" in r.stderr, r.stderr
        # a job that fits is accepted
        ok = c.submit(command="true", vm={"vm_type": "large"})
        assert ok > 0
    finally:
        live.stop()


def test_a_restarted_manager_keeps_each_vms_type_and_user(tmp_path: Path, tag: str, endpoint: str) -> None:
    import signal

    # pilots wait for the restarted manager longer than a restart takes on a loaded machine
    live = _live(tmp_path, endpoint, tag, pilot_timeout=30.0, reattach_timeout=30.0).start()
    with VmPlayer(endpoint, tmp_path / "vms", tag) as player:
        try:
            admin = live.client()
            alice = live.client(admin.create_token("alice")["token"])
            ledger = tmp_path / "ledger"
            job = alice.submit(
                command="sh", args=["-c", f"echo $ISTHMUS_RUN >> {ledger}; sleep 5; echo done"], vm={"memory_mb": 4096}
            )
            wait_state(admin, job, ("running",), timeout=60)
            live.kill(signal.SIGKILL)
            live.start()
            admin = live.client()
            # the VM comes back as what it was: a "large" VM of 2 cores serving alice
            (row,) = admin.vms()
            assert (row["type_name"], row["owner"], row["user"], row["cores"]) == ("large", "alice", "alice", 2), row
            # the engine restored it too: a second 4 GB job of alice's takes its free core at once
            # (restored as a 1-core "small" VM or serving anyone, a second VM would be leased)
            alice = live.client(admin.create_token("alice")["token"])
            second = alice.submit(command="echo", args=["second"], vm={"memory_mb": 4096})
            j = wait_state(admin, second, TERMINAL, timeout=60)
            assert j["state"] == "completed", j["history"]
            j = wait_state(admin, job, TERMINAL, timeout=60)
            assert j["state"] == "completed" and j["run"] == 1, [(h["state"], h["detail"]) for h in j["history"]]
            assert ledger.read_text().split() == ["1"]  # ran once: the VM and its pilot were kept
            assert [i["InstanceType"] for i in player.instances()] == ["t2.large"]
        finally:
            live.stop()
