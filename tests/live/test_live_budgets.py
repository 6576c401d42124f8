"""Budget caps on the live manager: GET /budgets, an admin raising a cap at run time (kept
across a restart), `isthmus budget`, and a lease refused over budget with the reason."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

from livekit import LiveServer, wait_state

from isthmus.live.client import ApiError

ENV = """
name = "budget-live"
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
name = "paid-daily"
limit = 0
sites = ["paid"]
period = "day"
[policies]
allocation = "ff"
provisioning = "on-demand"
"""


def test_a_cap_refuses_leases_until_an_admin_raises_it(tmp_path: Path, tag: str) -> None:
    env = tmp_path / "env.toml"
    env.write_text(ENV)
    live = LiveServer(env, tmp_path / "state", f"sqlite:///{tmp_path / 'db'}", tag).start()
    try:
        c = live.client()
        (row,) = c.budgets()
        assert (row["name"], row["sites"], row["period"], row["limit"], row["spent"]) == (
            "paid-daily",
            ["paid"],
            "day",
            0.0,
            0.0,
        )
        blocker = c.submit(command="sleep", args=["60"])
        wait_state(c, blocker, ("running",), timeout=30)
        job = c.submit(command="sh", args=["-c", "echo $ISTHMUS_SITE"])
        time.sleep(2)  # rounds run: On-Demand asks for a VM, the cap refuses it
        assert c.job(job)["state"] == "queued" and not c.vms()
        # one increment costs 36 / 60 = $0.60: raise the cap to pay exactly one
        assert c.set_budget("paid-daily", 0.6)["limit"] == 0.6
        j = wait_state(c, job, ("completed", "failed"), timeout=60)
        assert j["state"] == "completed" and c.output(job)[0] == "paid\n", j["history"]
        row = c.budgets()[0]
        assert (row["spent"], row["left"]) == (0.6, 0.0), row
        # the raised limit survives a restart, and so does what was charged
        live.kill(signal.SIGKILL)
        live.start()
        c = live.client()
        row = c.budgets()[0]
        assert (row["limit"], row["spent"]) == (0.6, 0.6), row
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "isthmus.cli.live_entry",
                "budget",
                "--url",
                live.url,
                "--token",
                live.admin_token,
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout
        assert "paid-daily" in out and "0.6000" in out, out
        try:
            c.set_budget("nope", 1)
            raise AssertionError("an unknown budget was accepted")
        except ApiError as exc:
            assert exc.status == 404 and "paid-daily" in str(exc)
        c.cancel(blocker)
    finally:
        live.stop()
