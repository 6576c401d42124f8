"""A restarted manager predicts runtimes as before the restart: the user-last-two predictor's
history (each user's last completed runtimes, the mean of all) is rebuilt from the stored event
log (engine/history.py, called by recovery), so SJF orders the queued jobs as it did."""

from __future__ import annotations

from pathlib import Path

import pytest
from livekit import LiveServer, wait_for, wait_state, write_env

from isthmus.live.client import Client

SHORT, LONG = 0.1, 2.0  # what alice's and bob's jobs sleep


def _queued_forecast(c: Client, jobs: list[int]) -> tuple[list[int], dict[int, float]]:
    """The forecast order of `jobs` (by start) and each one's forecast runtime (its prediction)."""
    f = {j["job"]: j for j in c.forecast()["jobs"]}
    for jid in jobs:
        assert (f[jid]["state"], f[jid]["runtime_basis"]) == ("queued", "predictor"), f[jid]
    order = sorted(jobs, key=lambda jid: f[jid]["start"])
    return order, {jid: f[jid]["end"] - f[jid]["start"] for jid in jobs}


def _started(job: dict) -> float:  # type: ignore[type-arg]
    return next(h["time"] for h in job["history"] if h["state"] in ("starting", "running"))


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_sjf_orders_the_queue_as_before_a_restart(tmp_path: Path, db_url: str, tag: str) -> None:
    # one processor, SJF with the user-last-two predictor; no job requests a runtime, so every
    # prediction comes from the completed runs
    env = write_env(tmp_path / "env.toml", nodes=1, cores=1, alloc="sjf", prov="none")
    live = LiveServer(env, tmp_path / "state", db_url, tag, on_stop="detach").start()
    try:
        admin = live.client()
        alice = live.client(admin.create_token("alice")["token"])
        bob = live.client(admin.create_token("bob")["token"])
        done = [bob.submit(command="sleep", args=[str(LONG)]) for _ in range(2)]
        done += [alice.submit(command="sleep", args=[str(SHORT)]) for _ in range(2)]
        for jid in done:
            wait_state(admin, jid, ("completed",), timeout=60)
        # a job holds the processor while bob's, then alice's, wait
        hold = admin.submit(command="sleep", args=["120"])
        wait_state(admin, hold, ("running",))
        queued = [bob.submit(command="sleep", args=[str(SHORT)]), alice.submit(command="sleep", args=[str(SHORT)])]
        order, predicted = _queued_forecast(admin, queued)
        assert order == queued[::-1], predicted  # alice's (predicted short) before bob's (predicted long)
        assert predicted[queued[0]] > LONG > predicted[queued[1]]

        live.stop()  # SIGTERM: the runs stay (detached), the next start re-attaches them
        live.start()
        admin = live.client()
        assert admin.job(hold)["state"] == "running"
        after_order, after_predicted = _queued_forecast(admin, queued)
        assert after_order == order
        # the forecast's end - start: Unix times near 1.8e9 s are float64 in steps of 2.4e-7 s,
        # so the same prediction reads back within a few such steps wherever it starts
        assert after_predicted == pytest.approx(predicted, abs=1e-6)

        # and the queue runs in that order
        admin.cancel(hold)
        ended = [wait_state(admin, jid, ("completed",), timeout=30) for jid in queued]
        assert _started(ended[1]) < _started(ended[0])
        wait_for(lambda: admin.job(hold)["state"] == "cancelled", what="the holding job cancelled")
    finally:
        live.stop("kill")
