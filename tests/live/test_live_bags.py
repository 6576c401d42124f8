"""Live bags of tasks (docs/bags.md): real manager processes, real pilots, SQLite and PostgreSQL.

Each task of these bags appends its index to a file of its own when it completes, so the tests
count how many times each task really ran to its end, beside what the API reports.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from livekit import BAG_ENV, LiveServer, bag_env, ran_counts, tagged_pids, wait_for, wait_state

from isthmus.model.events import EventKind


def cli(server: LiveServer, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run `isthmus ARGS` against `server` with the admin token."""
    env = dict(os.environ, ISTHMUS_URL=server.url, ISTHMUS_TOKEN=server.admin_token)
    proc = subprocess.run(
        [sys.executable, "-m", "isthmus.cli.live_entry", *args],
        check=False,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def bag(c: Any, bag_id: int) -> dict[str, Any]:
    """The bag's progress as GET /jobs/{id} gives it, with its state."""
    j = c.job(bag_id)
    return {**j["bag"], "state": j["state"]}


@pytest.fixture
def bags(request: pytest.FixtureRequest, tmp_path: Path, db_url: str, tag: str) -> Any:
    """A manager on the bag environment (preemption time 10 s), SEP unless parametrized."""
    fairshare = getattr(request, "param", "sep")
    server = LiveServer(bag_env(tmp_path / "env.toml", fairshare), tmp_path / "state", db_url, tag).start()
    yield server
    server.stop()


def test_a_sweep_of_300_tasks_runs_each_task_exactly_once(bags: LiveServer, tmp_path: Path) -> None:
    ran = tmp_path / "ran"
    ran.mkdir()
    out = cli(bags, "submit", "--sweep", f"echo out {{x}}; echo {{x}} >> {ran}/{{x}}.ran", "--param", "x=0..299")
    bag_id = int(out.stdout.split()[-1])
    with bags.client() as c:
        wait_state(c, bag_id, ("completed",), timeout=120)
        b = bag(c, bag_id)
        assert (b["tasks"], b["done"], b["failed"], b["running"], b["queued"]) == (300, 300, 0, 0, 0)
        assert b["throughput"] > 0
    assert ran_counts(ran, 300) == [1] * 300
    index = json.loads(cli(bags, "results", str(bag_id), "--json").stdout)
    assert [r["task"] for r in index] == list(range(300))
    assert all(r["state"] == "done" and r["exit_code"] == 0 and r["attempts"] == 1 for r in index)
    assert [r["command"] for r in index[:2]] == [
        f"echo out 0; echo 0 >> {ran}/0.ran",
        f"echo out 1; echo 1 >> {ran}/1.ran",
    ]
    assert Path(index[7]["output"]).read_text() == "out 7\n"
    assert cli(bags, "logs", str(bag_id), "--task", "7").stdout == "out 7\n"
    shown = cli(bags, "show", str(bag_id)).stdout
    assert "Done 300" in " ".join(shown.split()) and "COMPLETED" in shown
    listed = json.loads(cli(bags, "bags", "--all", "--json").stdout)
    assert [(b["id"], b["progress"]["done"]) for b in listed] == [(bag_id, 300)]


def test_a_task_file_with_retries_and_a_failing_task(bags: LiveServer, tmp_path: Path) -> None:
    ran = tmp_path / "ran"
    ran.mkdir()
    tasks = tmp_path / "tasks.txt"
    tasks.write_text(f"# a comment\n\necho 0 >> {ran}/0.ran\necho 1 >> {ran}/1.ran; exit 3\n  true  \n")
    out = cli(bags, "submit", "--tasks", str(tasks), "--retries", "2")
    bag_id = int(out.stdout.split()[-1])
    with bags.client() as c:
        j = wait_state(c, bag_id, ("failed",), timeout=60)
        assert j["reason"] == "1 of 3 tasks failed"
        assert (j["bag"]["done"], j["bag"]["failed"]) == (2, 1)
        index = c.results(bag_id)
    outcome = [(r["state"], r["exit_code"], r["attempts"]) for r in index]
    assert outcome == [("done", 0, 1), ("failed", 3, 3), ("done", 0, 1)]
    assert ran_counts(ran, 2) == [1, 3]  # the failing task ran once and was retried twice


@pytest.mark.parametrize("bags", ["sep", "gep"], indirect=True)
def test_a_rigid_job_arriving_shrinks_the_bag_and_starts_within_the_preemption_time(
    bags: LiveServer, tmp_path: Path
) -> None:
    ran = tmp_path / "ran"
    ran.mkdir()
    with bags.client() as c:
        bag_id = c.submit_bag(sweep={"template": f"sleep 0.5; echo {{x}} >> {ran}/{{x}}.ran", "params": ["x=0..39"]})
        wait_for(lambda: bag(c, bag_id)["held"].get("c1") == 4, timeout=20, what="the bag holding all 4 processors")
        rigid = c.submit(command="true", size=3)
        j = wait_state(c, rigid, ("completed",), timeout=20)
        assert j["start_time"] - j["submit_time"] < 10.0  # the preemption time
        wait_state(c, bag_id, ("completed",), timeout=90)
        index = c.results(bag_id)
        events = c.events()
    assert all(r["state"] == "done" for r in index)
    assert ran_counts(ran, 40) == [1] * 40  # a preempted task's run was killed before it could end
    shrinks = [e for e in events if e[1] == 22 and e[2] == bag_id]  # SHRINK events of the bag
    assert shrinks and sum(e[5] for e in shrinks) >= 3
    # the processors the bag gave back were held for the rigid job (HOLD), up to its 3, and the
    # hold ended when it started (the same engine code as in simulation)
    holds = [e[5] for e in events if e[1] == 30 and e[2] == rigid]
    assert holds and max(holds) <= 3 and holds[-1] == 0


def test_the_bag_survives_a_manager_kill_without_redoing_a_reported_task(tmp_path: Path, db_url: str, tag: str) -> None:
    ran = tmp_path / "ran"
    ran.mkdir()
    server = LiveServer(bag_env(tmp_path / "env.toml"), tmp_path / "state", db_url, tag).start()
    try:
        with server.client() as c:
            bag_id = c.submit_bag(
                sweep={"template": f"sleep 0.1; echo {{x}} >> {ran}/{{x}}.ran", "params": ["x=0..119"]}, retries=1
            )
            wait_for(lambda: bag(c, bag_id)["done"] >= 30, timeout=60, what="30 tasks done")
        server.kill(signal.SIGKILL)
        server.start()
        with server.client() as c:
            # what the database records as done after the restart: never run again from now on
            reported = {r["task"] for r in c.results(bag_id, ["done"])}
            at_restart = ran_counts(ran, 120)
            assert len(reported) >= 30
            wait_state(c, bag_id, ("completed",), timeout=120)
            index = c.results(bag_id)
    finally:
        server.stop()
    assert all(r["state"] == "done" for r in index)
    counts = ran_counts(ran, 120)
    assert all(counts[t] == at_restart[t] >= 1 for t in reported), {t: counts[t] for t in reported}
    assert all(n >= 1 for n in counts)


def test_cancelling_a_bag_kills_its_tasks_and_keeps_its_results(bags: LiveServer, tmp_path: Path) -> None:
    with bags.client() as c:
        bag_id = c.submit_bag(tasks=["true", "true"] + ["sleep 60"] * 10)
        wait_for(lambda: bag(c, bag_id)["done"] == 2 and bag(c, bag_id)["running"] == 4, 20, what="4 tasks running")
        wait_for(lambda: len(tagged_pids(bags.tag)) >= 1 + 2 + 4, timeout=20, what="the tasks' processes")
        cli(bags, "cancel", str(bag_id))
        assert c.job(bag_id)["state"] == "cancelled"
        wait_for(lambda: len(tagged_pids(bags.tag)) == 1 + 2, timeout=20, what="the tasks killed")
        states = [r["state"] for r in c.results(bag_id)]
        assert states == ["done", "done"] + ["queued"] * 10
        wait_for(lambda: sum(s["free"] for s in c.sites()) == 4, timeout=20, what="the processors free again")


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_launchers_of_a_dead_manager_kill_their_tasks_and_exit(tmp_path: Path, db_url: str, tag: str) -> None:
    server = LiveServer(bag_env(tmp_path / "env.toml"), tmp_path / "state", db_url, tag, pilot_timeout=2.0).start()
    with server.client() as c:
        bag_id = c.submit_bag(tasks=["sleep 60"] * 8)
        wait_for(lambda: bag(c, bag_id)["running"] == 4, timeout=20, what="4 tasks running")
    wait_for(lambda: len(tagged_pids(tag)) >= 1 + 2 + 4, timeout=20, what="the manager, 2 pilots, 4 tasks")
    server.kill(signal.SIGKILL)
    # the launchers notice their manager is gone, kill their tasks and exit (§3.6)
    wait_for(lambda: not tagged_pids(tag), timeout=20, what="pilots and tasks of a dead manager gone")


def test_hostile_bag_input_is_refused_naming_the_field(bags: LiveServer, tmp_path: Path) -> None:
    headers = {"Authorization": f"Bearer {bags.admin_token}"}

    def post(body: Any) -> httpx.Response:
        return httpx.post(bags.url + "/bags", json=body, headers=headers, timeout=30)

    cases: list[tuple[Any, str]] = [
        ({"tasks": ["true"] * 100_001}, "tasks"),
        ({"tasks": ["echo \x00"]}, "tasks"),
        ({"tasks": ["echo a\nrm -rf /"]}, "tasks"),
        ({"tasks": []}, "tasks"),
        ({"tasks": ["x" * 20_000]}, "tasks"),
        ({"sweep": {"template": "echo {y}", "params": ["x=1..3"]}}, "sweep"),
        ({"sweep": {"template": "echo {x}", "params": ["x=1..100000000"]}}, "sweep"),
        ({"sweep": {"template": "echo {x} {y}", "params": ["x=1..1000", "y=1..1000"]}}, "sweep"),
        ({"sweep": {"template": "echo {x}", "params": ["x=5..1"]}}, "sweep"),
        ({"sweep": {"template": "echo {x", "params": ["x=1"]}}, "sweep"),
        ({"tasks": ["true"], "retries": -1}, "retries"),
        ({"tasks": ["true"], "retries": 10**30}, "retries"),
        ({"tasks": ["true"], "env": {"ISTHMUS_JOB_ID": "1"}}, "env"),
        ({"tasks": ["true"], "cwd": "relative"}, "cwd"),
        ({"tasks": ["true"], "sweep": {"template": "echo {x}", "params": ["x=1"]}}, "body"),
        ({"tasks": ["true"], "unknown": 1}, "unknown"),
    ]
    for body, field in cases:
        r = post(body)
        assert r.status_code == 422, (body if len(str(body)) < 200 else field, r.status_code, r.text[:300])
        locs = [e["loc"] for e in r.json()["detail"]]
        assert any(field in loc for loc in locs), (field, locs)
    assert post({"tasks": ["true"]}).status_code == 201
    # the CLI: a bad task file line is named file:line, a bad sweep named, exit status 2
    bad = tmp_path / "bad.txt"
    bad.write_text("true\n\n" + "x" * 20_000 + "\n")
    r = cli(bags, "submit", "--tasks", str(bad), check=False)
    assert r.returncode == 2 and f"{bad}:3:" in r.stderr
    r = cli(bags, "submit", "--sweep", "echo {x}", "--param", "x=1..", check=False)
    assert r.returncode == 2 and "parameter x" in r.stderr
    r = cli(bags, "submit", "--sweep", "echo {x}", "--param", "x=1", "--size", "2", check=False)
    assert r.returncode == 2 and "--size" in r.stderr


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_an_environment_without_a_bag_policy_refuses_bags(tmp_path: Path, db_url: str, tag: str) -> None:
    env = tmp_path / "env.toml"
    env.write_text(BAG_ENV.replace('fairshare = "sep"\n', ""))
    server = LiveServer(env, tmp_path / "state", db_url, tag).start()
    try:
        with server.client() as c:
            r = c.http.post("/bags", json={"tasks": ["true"]})
        assert r.status_code == 400 and "fairshare" in r.json()["detail"]
    finally:
        server.stop()


CLOUD_BAG_ENV = """
name = "cloud-bags"
round_interval = "event"
[[sites]]
name = "c1"
nodes = 1
cores_per_node = 1
[[sites]]
name = "cloud"
kind = "cloud"
max_vms = 1
cores_per_node = 2
boot_time = 0.5
shutdown_time = 0.3
idle_release_time = 3
[policies]
allocation = "fcfs"
provisioning = "on-demand"
fairshare = "sep"
"""


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_a_bag_scavenges_a_vm_leased_for_a_rigid_job_until_its_idle_release(
    tmp_path: Path, db_url: str, tag: str
) -> None:
    # A cluster of 1 processor and a cloud of one 2-core VM (On-Demand, released after 3 s idle).
    # The bag holds the cluster's processor; a rigid job of 2 processors makes On-Demand lease
    # the VM; once it ends the bag grows onto the VM's 2 cores (2 lanes of the VM's pilot), the
    # VM stays idle to On-Demand and is released 3 s after the job's end: its launchers are
    # preempted then (their tasks back in the queue), and the bag completes on the cluster, each
    # task run to its end exactly once.
    ran = tmp_path / "ran"
    ran.mkdir()
    env = tmp_path / "env.toml"
    env.write_text(CLOUD_BAG_ENV)
    server = LiveServer(env, tmp_path / "state", db_url, tag).start()
    try:
        with server.client() as c:
            bag_id = c.submit_bag(
                sweep={"template": f"sleep 0.4; echo {{x}} >> {ran}/{{x}}.ran", "params": ["x=0..59"]}
            )
            wait_for(lambda: bag(c, bag_id)["held"].get("c1") == 1, timeout=20, what="the bag on the cluster")
            rigid = c.submit(command="sleep", args=["1"], size=2)
            wait_state(c, rigid, ("completed",), timeout=30)
            wait_for(lambda: bag(c, bag_id)["held"].get("cloud") == 2, timeout=20, what="the bag on the VM")
            on_vm = [n for n in bag(c, bag_id)["nodes"] if n["site"] == "cloud"]
            assert on_vm == [{"site": "cloud", "node": "1/vm0", "processors": 2}]
            wait_state(c, bag_id, ("completed",), timeout=120)
            index = c.results(bag_id)
            events = c.events()
    finally:
        server.stop()
    assert all(r["state"] == "done" for r in index)
    assert ran_counts(ran, 60) == [1] * 60
    kinds = {k.name: int(k) for k in EventKind}
    end = next(e[0] for e in events if e[1] == kinds["END"] and e[2] == rigid)
    releases = [e for e in events if e[1] == kinds["VM_RELEASE"]]
    assert len(releases) == 1 and next(e for e in events if e[1] == kinds["VM_LEASE"])[4] == releases[0][4]
    assert 3.0 - 0.1 <= releases[0][0] - end < 3.0 + 4.0  # its idle time, as without the bag
    grows = [e for e in events if e[1] == kinds["GROW"] and e[2] == bag_id and e[3] == 1]
    assert grows and grows[0][0] >= end
    # at the release, both launchers on the VM were preempted at once and given back
    shrinks = [e for e in events if e[1] == kinds["SHRINK"] and e[2] == bag_id and e[3] == 1]
    assert [(e[0], e[5]) for e in shrinks] == [(releases[0][0], 2.0)]
    freed = [e for e in events if e[1] == kinds["BAG_RELEASE"] and e[2] == bag_id and e[3] == 1]
    assert len(freed) == 2 and all(e[0] == releases[0][0] for e in freed)
