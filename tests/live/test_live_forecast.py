"""What-if forecasts of the live queue: a hand-computed forecast under strict
FCFS, the same snapshot under another policy, and how close forecast starts come to the actual
ones on the live workload (median and 90th percentile error, printed)."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest
from livekit import LiveServer, wait_state, write_env

from isthmus.live.client import ApiError

TERMINAL = ("completed", "failed", "cancelled", "timeout")
SLACK = 0.15  # each job sleeps this much less than it requests (the walltime kills at the request)
# the running job the others wait for: long enough that every what-if below is asked while it runs,
# even on a loaded machine
HOLD = 6.0
# (size, requested runtime) of the queued jobs, behind a 4-processor job of HOLD s on 4 processors
QUEUED = [(2, 2.0), (2, 3.0), (4, 2.0), (1, 1.5), (3, 2.0), (2, 1.0)]
# strict FCFS by hand, relative to the end H of the running job: (start, end)
FCFS = [(0, 2), (0, 3), (3, 5), (5, 6.5), (5, 7), (7, 8)]


def _job(size: int, request: float) -> dict[str, object]:
    return {"command": "sleep", "args": [str(request - SLACK)], "size": size, "requested_runtime": request}


def _started(job: dict) -> float:  # type: ignore[type-arg]
    return next(h["time"] for h in job["history"] if h["state"] in ("starting", "running"))


def test_forecast_by_hand_what_if_and_accuracy(tmp_path: Path, db_url: str, tag: str) -> None:
    env = write_env(tmp_path / "env.toml", alloc="fcfs", prov="none")  # c1 only: 2 nodes x 2 cores
    live = LiveServer(env, tmp_path / "state", db_url, tag).start()
    try:
        c = live.client()
        hold = c.submit(**_job(4, HOLD))
        h = wait_state(c, hold, ("running",))
        queued = [c.submit(**_job(size, req)) for size, req in QUEUED]
        f = c.forecast()
        assert (f["allocation"], f["provisioning"], f["unfinished"], f["spend"]) == ("fcfs", "none", 0, 0.0)
        by_id = {j["job"]: j for j in f["jobs"]}
        assert set(by_id) == {hold, *queued}
        running = by_id[hold]
        assert running["state"] == "running" and running["runtime_basis"] == "requested runtime"
        end_of_hold = running["end"]
        assert end_of_hold == pytest.approx(running["start"] + HOLD)
        for jid, (start, end) in zip(queued, FCFS, strict=True):
            j = by_id[jid]
            assert (j["state"], j["site"]) == ("queued", "c1")
            assert j["start"] == pytest.approx(end_of_hold + start), (jid, j)
            assert j["end"] == pytest.approx(end_of_hold + end), (jid, j)

        # what if first fit: the 1-processor job starts when the first 2-processor job ends
        ff = {j["job"]: j for j in c.forecast(allocation="ff")["jobs"]}
        assert ff[queued[3]]["start"] == pytest.approx(end_of_hold + 2)
        assert c.job(queued[3])["state"] == "queued"  # the live state was not touched

        with pytest.raises(ApiError) as bad:
            c.forecast(allocation="no-such-policy")
        assert bad.value.status == 422 and "no-such-policy" in str(bad.value)
        with pytest.raises(ApiError) as both:
            c.forecast(budget=1.0, no_budget=True)
        assert both.value.status == 422
        bob = live.client(c.create_token("bob")["token"])
        assert bob.forecast()["jobs"] == []  # a user sees only their own jobs

        r = subprocess.run(  # noqa: PLW1510
            [sys.executable, "-m", "isthmus.cli.live_entry", "forecast", "--allocation", "ff"],
            env={**os.environ, "ISTHMUS_URL": live.url, "ISTHMUS_TOKEN": live.admin_token},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert r.returncode == 0 and "START(WHAT-IF)" in r.stdout and "what if (ff + none" in r.stdout, r.stderr

        # what if a second cluster were added: the first two queued jobs (2 processors each)
        # start at once on it instead of after the running job
        c2 = '[[sites]]\nname = "c2"\nnodes = 2\ncores_per_node = 2\n'
        asked = time.time()
        added = {j["job"]: j for j in c.forecast(add_sites=c2)["jobs"]}
        assert asked < end_of_hold, "the running job ended before the what-if was asked: the machine is too slow"
        for jid in queued[:2]:
            start = added[jid]["start"]
            assert added[jid]["site"] == "c2" and start < end_of_hold and start <= time.time(), (
                added[jid],
                end_of_hold,
            )
        # ... or the whole environment of a file, which must keep the site running a job now
        whole = env.read_text().replace('name = "c1"', 'name = "big"').replace("nodes = 2", "nodes = 8", 1)
        with pytest.raises(ApiError) as lost:
            c.forecast(environment=whole)
        assert lost.value.status == 422 and "'c1' runs jobs or holds VMs now" in str(lost.value)
        with pytest.raises(ApiError) as typo:
            c.forecast(add_sites='[[sites]]\nname = "c3"\nnodez = 2\n')
        assert typo.value.status == 422 and "nodez" in str(typo.value) and "line 3" in str(typo.value)
        with pytest.raises(ApiError) as both_envs:
            c.forecast(add_sites=c2, environment=env.read_text())
        assert both_envs.value.status == 422
        (tmp_path / "c2.toml").write_text(c2)
        r = subprocess.run(  # noqa: PLW1510
            [sys.executable, "-m", "isthmus.cli.live_entry", "forecast", "--add-site", str(tmp_path / "c2.toml")],
            env={**os.environ, "ISTHMUS_URL": live.url, "ISTHMUS_TOKEN": live.admin_token},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert r.returncode == 0 and "START(WHAT-IF)" in r.stdout, r.stderr

        # accuracy: forecast starts against the actual ones
        for jid in queued:
            assert wait_state(c, jid, TERMINAL, timeout=40)["state"] == "completed"
        errors = [abs(_started(c.job(jid)) - by_id[jid]["start"]) for jid in queued]
        median = statistics.median(errors)
        p90 = sorted(errors)[int(0.9 * (len(errors) - 1) + 0.5)]
        print(f"forecast start error over {len(errors)} jobs: median {median:.2f} s, p90 {p90:.2f} s")
        assert median < 1.5 and p90 < 3.0, errors
        assert h["state"] == "running"
    finally:
        live.stop()
