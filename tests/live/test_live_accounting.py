"""Accounting: `GET /accounting` and `isthmus accounting` on a real manager,
checked against figures computed by hand here from the jobs' histories and the VM leases the
API reports."""

from __future__ import annotations

import csv
import io
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from livekit import LiveServer, bag_env, wait_for, wait_state, write_env

from isthmus.live.client import ApiError

TERMINAL = ("completed", "failed", "cancelled")


def _by_hand(job: dict) -> tuple[float, float, float]:  # type: ignore[type-arg]
    """(processor-seconds of every run, wait of the final run, bounded slowdown) from the history:
    a run holds its processors from its start (the engine's decision) to its end."""
    runs: dict[int, list[float]] = {}
    for h in job["history"]:
        if h["state"] in ("starting", "running") and h["run"] not in runs:
            runs[h["run"]] = [h["time"], math.nan]  # the first: later ones are notes (pid, node)
        elif h["state"] in ("completed", "failed", "killed", "cancelled") and h["run"] in runs:
            runs[h["run"]][1] = h["time"]
    used = sum(job["size"] * (end - start) for start, end in runs.values())
    start, end = runs[job["run"]]
    bsld = max(1.0, (end - job["submit_time"]) / max(end - start, 10.0))
    return used, start - job["submit_time"], bsld


def test_accounting_by_user_site_and_policy(tmp_path: Path, db_url: str, tag: str) -> None:
    env = write_env(tmp_path / "env.toml", price=0.36, increment=60)  # $0.006 per started minute
    live = LiveServer(env, tmp_path / "state", db_url, tag).start()
    try:
        admin = live.client()
        alice_token = admin.create_token("alice")["token"]
        alice = live.client(alice_token)
        before = time.time()
        hold = admin.submit(command="sleep", args=["1.5"], size=4)  # fills c1
        wait_state(admin, hold, ("running",))
        mine = [alice.submit(command="sleep", args=["0.3"], size=2), alice.submit(command="true")]
        for j in [hold, *mine]:
            wait_state(admin, j, TERMINAL, timeout=30)
        vms = wait_for(
            lambda: (lambda v: v if v and all(x["state"] == "gone" for x in v) else None)(admin.vms(all_=True)),  # noqa: PLC3002
            timeout=20,
            what="VMs released",
        )
        jobs = {j: admin.job(j) for j in [hold, *mine]}
        assert all(j["state"] == "completed" for j in jobs.values())

        by_user = {r["key"]: r for r in admin.accounting("user")}
        assert set(by_user) == {"admin", "alice"}
        a = by_user["alice"]
        assert a["jobs"] == a["completed"] == 2
        hand = [_by_hand(jobs[j]) for j in mine]
        assert a["processor_hours"] == pytest.approx(sum(h[0] for h in hand) / 3600, abs=1e-9)
        assert a["mean_wait"] == pytest.approx(sum(h[1] for h in hand) / 2, abs=1e-6)
        assert a["mean_bounded_slowdown"] == pytest.approx(sum(h[2] for h in hand) / 2, abs=1e-9)
        assert a["vm_hours"] is None and a["charged_cost"] is None  # VMs are not a user's

        by_site = {r["key"]: r for r in admin.accounting("site")}
        per_site: dict[str, float] = {}
        for j in jobs.values():
            per_site[j["site"]] = per_site.get(j["site"], 0.0) + _by_hand(j)[0] / 3600
        for site, hours in per_site.items():
            assert by_site[site]["processor_hours"] == pytest.approx(hours, abs=1e-9)
        assert "cloud" in per_site, "a job should have run on a leased VM"
        assert by_site["cloud"]["vm_hours"] == pytest.approx(sum(v["lease_seconds"] for v in vms) / 3600, abs=1e-9)
        assert by_site["cloud"]["charged_cost"] == pytest.approx(sum(v["charged_cost"] for v in vms), abs=1e-12)
        assert by_site["cloud"]["charged_cost"] > 0

        by_policy = {r["key"]: r for r in admin.accounting("policy")}
        assert by_policy["ff"]["jobs"] == 3 and by_policy["on-demand"]["vm_hours"] == by_site["cloud"]["vm_hours"]

        # the window: nothing ended before the first submission; a user sees only their own jobs
        assert admin.accounting("user", since=0, until=before) == []
        assert [r["key"] for r in alice.accounting("site")] == sorted({jobs[j]["site"] for j in mine})
        assert all(r["vm_hours"] is None for r in alice.accounting("site"))
        with pytest.raises(ApiError) as bad:
            admin.request("GET", "/accounting", params={"by": "group"})
        assert bad.value.status == 422 and "by" in str(bad.value)
        with pytest.raises(ApiError) as backwards:
            admin.accounting("user", since=100, until=50)
        assert backwards.value.status == 422

        r = subprocess.run(  # noqa: PLW1510
            [sys.executable, "-m", "isthmus.cli.live_entry", "accounting", "--by", "site", "--csv"],
            env={**os.environ, "ISTHMUS_URL": live.url, "ISTHMUS_TOKEN": live.admin_token},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert r.returncode == 0, r.stderr
        rows = {row["key"]: row for row in csv.DictReader(io.StringIO(r.stdout))}
        assert float(rows["cloud"]["charged_cost"]) == pytest.approx(by_site["cloud"]["charged_cost"])
        r = subprocess.run(  # noqa: PLW1510
            [sys.executable, "-m", "isthmus.cli.live_entry", "accounting", "--since", "yesterday"],
            env={**os.environ, "ISTHMUS_URL": live.url, "ISTHMUS_TOKEN": live.admin_token},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert r.returncode == 2 and "--since" in r.stderr and "ISO" in r.stderr, r.stderr
    finally:
        live.stop()


def test_bags_count_the_processors_they_held(tmp_path: Path, tag: str) -> None:
    """A bag of tasks is accounted for the processors it held (GROW to BAG_RELEASE), computed
    here from the events table of the manager's database."""
    import sqlite3

    env = bag_env(tmp_path / "env.toml")
    db = tmp_path / "db"
    live = LiveServer(env, tmp_path / "state", f"sqlite:///{db}", tag).start()
    try:
        admin = live.client()
        alice = live.client(admin.create_token("alice")["token"])
        bag = alice.submit_bag(tasks=[f"sleep 0.{i % 3 + 1}" for i in range(12)], name="b")
        rigid = admin.submit(command="sleep", args=["0.5"], size=2)
        for j in (bag, rigid):
            wait_state(admin, j, TERMINAL, timeout=60)
        assert admin.job(bag)["state"] == "completed"
        results = alice.results(bag)
        ran = sum(r["runtime"] for r in results)
        with sqlite3.connect(db) as con:
            rows = con.execute(
                "SELECT kind, time, value FROM events WHERE job = ? AND kind IN (21, 23, 27) ORDER BY id", (bag,)
            ).fetchall()
        end = next(t for k, t, _ in rows if k == 27)
        held = sum(v * (end - t) for k, t, v in rows if k == 21) - sum(v * (end - t) for k, t, v in rows if k == 23)
        assert held >= ran > 0  # the processors held ran every task, and idled between them

        by_user = {r["key"]: r for r in admin.accounting("user")}
        a = by_user["alice"]
        assert (a["jobs"], a["completed"]) == (1, 1)
        assert a["processor_hours"] == pytest.approx(held / 3600, abs=1e-9)
        assert a["mean_wait"] is None and a["mean_bounded_slowdown"] is None  # a bag has none
        assert by_user["admin"]["jobs"] == 1  # the rigid job, as before
        by_site = {r["key"]: r for r in admin.accounting("site")}
        assert by_site["c1"]["jobs"] == 2
        rigid_hours = _by_hand(admin.job(rigid))[0] / 3600
        assert by_site["c1"]["processor_hours"] == pytest.approx(held / 3600 + rigid_hours, abs=1e-9)
        assert {r["key"]: r["jobs"] for r in admin.accounting("policy")} == {"fcfs": 1, "sep": 1}
        # alice sees her bag, in her own rows only
        assert [(r["key"], r["jobs"]) for r in alice.accounting("user")] == [("alice", 1)]
    finally:
        live.stop()
