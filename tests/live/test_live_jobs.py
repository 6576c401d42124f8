"""End to end: a real manager, real pilots, real jobs; over SQLite and PostgreSQL."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from livekit import LiveServer, tagged_pids, wait_for, wait_state

from isthmus.live.client import ApiError

TERMINAL = ("completed", "failed", "cancelled")


def test_job_lifecycle_output_and_history(live: LiveServer) -> None:
    c = live.client()
    ok = c.submit(
        command="sh",
        args=["-c", "echo out-$ISTHMUS_JOB_ID; echo err >&2; sleep 0.5; echo done"],
        requested_runtime=30,
        priority="super-high",
        env={"FOO": "bar"},
    )
    bad = c.submit(command="sh", args=["-c", "exit 7"])
    missing = c.submit(command="/no/such/program")
    j = wait_state(c, ok, ("running",))
    # output is readable while the job runs
    wait_for(lambda: c.output(ok)[0].startswith(f"out-{ok}"), what="output while running")
    j = wait_state(c, ok, TERMINAL)
    assert j["state"] == "completed" and j["exit_code"] == 0
    assert j["site"] == "c1" and len(j["slots"]) == 1
    assert j["runtime"] is not None and 0.4 < j["runtime"] < 5
    assert j["start_time"] >= j["submit_time"] and j["end_time"] >= j["start_time"]
    assert [h["state"] for h in j["history"]] == ["queued", "starting", "running", "completed"]
    assert c.output(ok)[0] == f"out-{ok}\ndone\n"
    assert c.output(ok, "stderr")[0] == "err\n"
    assert wait_state(c, bad, TERMINAL)["exit_code"] == 7
    assert c.job(bad)["state"] == "failed"
    m = wait_state(c, missing, TERMINAL)
    assert m["state"] == "failed" and m["exit_code"] == 127
    assert "cannot start" in c.output(missing, "stderr")[0]
    # the event log is persisted, row for row
    events = c.request("GET", "/events")
    kinds = [int(e[1]) for e in events if int(e[2]) == ok]
    assert kinds == [0, 1, 2]  # SUBMIT, START, END


def test_cancel_running_and_queued(live: LiveServer) -> None:
    c = live.client()
    running = c.submit(command="sleep", args=["30"], size=4)  # fills c1
    wait_state(c, running, ("running",))
    queued = c.submit(command="sleep", args=["30"], size=4)  # does not fit on the cloud (2 x 2 -> 4: fits?)
    c.cancel(running)
    j = wait_state(c, running, ("cancelled",))
    assert [h["state"] for h in j["history"]][-2:] == ["killed", "cancelled"]
    c.cancel(queued)
    assert wait_state(c, queued, ("cancelled",))["state"] == "cancelled"
    with pytest.raises(ApiError) as e:
        c.cancel(queued)
    assert e.value.status == 409
    # the killed process is gone (its process group was killed by the pilot)
    wait_for(lambda: not any(b"sleep\x0030" in _cmdline(p) for p in tagged_pids(live.tag)), what="sleep killed")


def test_requested_runtime_is_enforced_and_the_job_ends_timeout(live: LiveServer) -> None:
    c = live.client()
    job = c.submit(command="sleep", args=["37"], requested_runtime=1.5)
    j = wait_state(c, job, ("timeout",), timeout=30)
    assert j["end_time"] - j["start_time"] < 5
    assert any(h["state"] == "killed" and "timeout" in h["detail"] for h in j["history"]), j["history"]
    assert c.jobs(states=["timeout"])[0]["id"] == job
    wait_for(lambda: not any(b"sleep\x0037" in _cmdline(p) for p in tagged_pids(live.tag)), what="sleep killed")


def test_a_waiting_job_says_why_with_code_and_policy(live: LiveServer) -> None:
    c = live.client()
    first = c.submit(command="sleep", args=["30"], size=4)  # fills c1
    second = c.submit(command="sleep", args=["30"], size=4)  # fills the cloud's 2 VMs x 2 cores
    wait_state(c, first, ("running",))
    wait_state(c, second, ("running",))
    third = c.submit(command="sleep", args=["30"], size=4)
    j = c.job(third)
    assert j["state"] == "queued", j
    assert j["reason_code"] == "no capacity" and j["reason_policy"] == "ff", j
    assert "needs 4 processors" in j["reason"]
    for job_id in (first, second, third):
        c.cancel(job_id)
    assert c.job(first)["reason_code"] is None  # only a queued job carries a reason code


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def test_multi_slot_job_gets_slot_list_and_nodefile(live: LiveServer) -> None:
    c = live.client()
    jid = c.submit(
        command="sh",
        args=["-c", 'echo "$ISTHMUS_NPROCS|$ISTHMUS_SLOTS|$ISTHMUS_HOSTS"; cat "$ISTHMUS_NODEFILE"'],
        size=3,
    )
    j = wait_state(c, jid, TERMINAL)
    assert j["state"] == "completed"
    out = c.output(jid)[0].splitlines()
    nprocs, slots, hosts = out[0].split("|")
    assert nprocs == "3" and len(slots.split(",")) == 3
    # local pilots all run on this machine: one host with the run's 3 slots, as MPI launchers read it
    assert hosts == f"{socket.gethostname()}:3"
    assert out[1:] == [f"{socket.gethostname()} slots=3"]
    assert len({tuple(s) for s in j["slots"]}) == 3


def test_cloud_vm_leased_used_and_released(live: LiveServer) -> None:
    c = live.client()
    hold = c.submit(command="sleep", args=["4"], size=4)  # fills the cluster
    wait_state(c, hold, ("running",))
    on_cloud = c.submit(command="sh", args=["-c", "echo $ISTHMUS_SITE"], size=2)
    j = wait_state(c, on_cloud, TERMINAL, timeout=30)
    assert j["state"] == "completed" and j["site"] == "cloud"
    assert c.output(on_cloud)[0] == "cloud\n"
    # the idle VM of the free cloud is released after idle_release_time, its pilot stops
    vms = wait_for(
        lambda: (lambda v: v if v and all(x["state"] == "gone" for x in v) else None)(c.vms(all_=True)),  # noqa: PLC3002
        timeout=20,
        what="VMs gone",
    )
    for v in vms:
        assert v["ready_at"] - v["leased_at"] >= 0.5 - 0.05  # boot delay
        assert v["charged_cost"] == 0.0
    c.cancel(hold)


def test_validation_rejects_and_stores_nothing(live: LiveServer) -> None:
    c = live.client()
    bad_bodies = [
        {},
        {"command": ""},
        {"command": "true", "size": 0},
        {"command": "true", "size": -3},
        {"command": "true", "priority": "urgent"},
        {"command": "true", "requested_runtime": -1},
        {"command": "true", "env": {"1BAD": "x"}},
        {"command": "true", "env": {"ISTHMUS_JOB_ID": "x"}},
        {"command": "true", "cwd": "relative/dir"},
        {"command": "true", "unknown_field": 1},
        {"command": "true", "vm": {"cores": 0}},
        {"command": "true", "args": "not-a-list"},
    ]
    for body in bad_bodies:
        r = c.http.post("/jobs", json=body)
        assert r.status_code == 422, (body, r.text)
        assert r.json()["detail"], body
    r = c.http.post("/jobs", json={"command": "true", "size": 1000})
    assert r.status_code == 400 and "larger than any site" in r.json()["detail"]
    r = c.http.post("/jobs", content=b"{not json", headers={"content-type": "application/json"})
    assert r.status_code == 422
    assert c.jobs(all_=True) == []
    assert c.request("GET", "/events") == []


def test_cli_commands(live: LiveServer, tmp_path: Path) -> None:
    env = dict(os.environ, ISTHMUS_URL=live.url, ISTHMUS_TOKEN=live.admin_token)

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(  # noqa: PLW1510
            [sys.executable, "-m", "isthmus.cli.live_entry", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            cwd=tmp_path,
        )

    r = cli(
        "submit",
        "--json",
        "-n",
        "2",
        "-t",
        "1:00",
        "--priority",
        "low",
        "--env",
        "GREETING=hello",
        "--",
        "sh",
        "-c",
        "echo $GREETING from $(pwd)",
    )
    assert r.returncode == 0, r.stderr
    jid = json.loads(r.stdout)["id"]
    c = live.client()
    wait_state(c, jid, TERMINAL)
    r = cli("jobs", "--all")
    assert r.returncode == 0 and "COMPLETED" in r.stdout and "JOBID" in r.stdout
    r = cli("jobs", "--all", "--json")
    rows = json.loads(r.stdout)
    assert rows[0]["id"] == jid and rows[0]["priority"] == "low" and rows[0]["requested_runtime"] == 60
    r = cli("show", str(jid))
    assert "COMPLETED" in r.stdout and "History:" in r.stdout and "STARTING" in r.stdout
    r = cli("logs", str(jid))
    assert r.stdout == f"hello from {tmp_path}\n"
    r = cli("sites")
    assert "c1" in r.stdout and "cloud" in r.stdout
    r = cli("vms", "--json")
    assert r.returncode == 0 and isinstance(json.loads(r.stdout), list)
    r = cli("token", "create", "alice")
    assert r.returncode == 0 and r.stdout.strip().startswith("ist_")
    alice = r.stdout.strip()

    # an sbatch script runs unchanged: #SBATCH read, -t in minutes, %x/%u/%j expanded, and the
    # submitter's environment travels with the job (--export=ALL) but never an ISTHMUS_* variable
    script = '#!/bin/sh\n#SBATCH --job-name=sb -t 1 -o %x-%u-%j.out\necho "$SUBMITTER_SETTING:${ISTHMUS_TOKEN:-none}"\n'
    (tmp_path / "sb.sh").write_text(script)
    env["SUBMITTER_SETTING"] = "exported"
    r = cli("submit", "--json", "sb.sh")
    assert r.returncode == 0, r.stderr
    sb = wait_state(c, json.loads(r.stdout)["id"], TERMINAL)
    assert sb["state"] == "completed" and sb["requested_runtime"] == 60 and sb["name"] == "sb"
    assert (tmp_path / f"sb-{sb['user']}-{sb['id']}.out").read_text() == "exported:none\n"

    # cancel by filters; a user's filters reach only their own jobs; --format prints Slurm's fields
    ids = [
        json.loads(cli("submit", "--json", "-J", n, "--", "sleep", "60").stdout)["id"] for n in ("nap", "nap", "keep")
    ]
    r = cli("jobs", "--format", "JobID,JobName,State,TimeLimit")
    assert r.returncode == 0 and r.stdout.split("\n")[0].split() == ["JOBID", "NAME", "STATE", "TIMELIMIT"]
    assert f"{ids[2]} keep" in " ".join(r.stdout.split()) and "UNLIMITED" in r.stdout
    r = subprocess.run(  # noqa: PLW1510
        [sys.executable, "-m", "isthmus.cli.live_entry", "cancel", "-n", "keep"],
        env=dict(env, ISTHMUS_TOKEN=alice),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0 and "no active job matches" in r.stderr
    r = cli("cancel", "-n", "nap", "-t", "PENDING,RUNNING")
    assert r.returncode == 0 and r.stdout.split() == ["Cancelled", "job", str(ids[0]), "Cancelled", "job", str(ids[1])]
    assert [c.job(i)["state"] for i in ids[:2]] == ["cancelled", "cancelled"]
    assert c.job(ids[2])["state"] in ("queued", "starting", "running")
    assert cli("cancel", str(ids[2])).returncode == 0
    r = cli("submit", "-n", "0", "--", "true")
    assert r.returncode == 2 and "size" in r.stderr
    r = cli("cancel", str(jid))
    assert r.returncode == 2 and "already ended" in r.stderr
    r = subprocess.run(  # noqa: PLW1510
        [sys.executable, "-m", "isthmus.cli.live_entry", "jobs"],
        env=dict(env, ISTHMUS_TOKEN="nope"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2 and "invalid token" in r.stderr


def test_openapi_served(live: LiveServer) -> None:
    spec = httpx.get(live.url + "/openapi.json").json()
    for path in (
        "/jobs",
        "/jobs/{job_id}",
        "/jobs/{job_id}/cancel",
        "/jobs/{job_id}/output",
        "/sites",
        "/vms",
        "/tokens",
        "/pilot/register",
        "/pilot/poll",
        "/pilot/report",
    ):
        assert path in spec["paths"], path


def test_stop_kill_jobs_leaves_no_process(live: LiveServer) -> None:
    c = live.client()
    jid = c.submit(command="sleep", args=["60"])
    wait_state(c, jid, ("running",))
    assert len(tagged_pids(live.tag)) >= 3  # manager, pilots, the job
    spool = live.state_dir / "spool"
    assert any(p.name.startswith(".fresh-") for p in spool.iterdir())  # pilots keep entries ready
    t0 = time.time()
    assert c.stop("kill") == {"mode": "kill", "running": 1, "tasks": 0}
    assert live.proc is not None
    live.proc.wait(timeout=10)
    assert time.time() - t0 < 10
    wait_for(lambda: not tagged_pids(live.tag), timeout=10, what="all processes gone")
    assert not [p.name for p in spool.iterdir() if p.name.startswith(".fresh-")]  # pilots removed their pools
