"""The pool as the dashboard shows it, through the API of a real manager: queues per set of
sites, VMs with what they do and their cost, and the pool over time read from the event log
(processors queued and running, VMs leased, charged spend) agreeing with the VM listing."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from livekit import LiveServer, wait_for, wait_state, write_env

from isthmus.live.client import ApiError


def test_queues_vms_and_timeseries(tmp_path: Path, db_url: str, tag: str) -> None:
    # 4 cluster processors; a paid cloud of 2-core VMs billed per second (3.6 $/h = 0.001 $/s)
    env = write_env(tmp_path / "env.toml", price=3.6, increment=1.0, boot=3.0)
    live = LiveServer(env, tmp_path / "state", db_url, tag).start()
    try:
        c = live.client()
        t0 = time.time()
        long = [c.submit(command="sleep", args=["6"], size=2, name=f"j{i}") for i in range(3)]
        # two run on the cluster, the third waits for a VM to boot

        def one_waiting() -> list[dict] | None:  # type: ignore[type-arg]
            q = c.request("GET", "/queues")
            return q if q[0]["jobs"] == 1 else None

        queues = wait_for(one_waiting, 10, what="one job waiting")
        assert [(q["name"], q["sites"], q["processors"]) for q in queues] == [("all sites", ["c1", "cloud"], 2)]
        assert 0 <= queues[0]["oldest_wait"] < 10
        vm = wait_for(lambda: [v for v in c.request("GET", "/vms") if v["activity"] == "busy"], 30, what="a busy VM")
        assert vm[0]["site_name"] == "cloud" and vm[0]["charged_cost"] > 0
        for j in long:
            wait_state(c, j, ("completed",), timeout=40)
        assert c.request("GET", "/queues")[0]["jobs"] == 0
        # once idle (idle_release_time 1.5 s) the VM is released: its cost stops growing
        wait_for(lambda: not c.request("GET", "/vms"), 20, what="the VM released")
        every = c.request("GET", "/vms", params={"all": "true"})
        billed = sum(v["charged_cost"] for v in every)
        sites = {s["name"]: s for s in c.request("GET", "/sites")}
        assert sites["cloud"]["charged_cost"] == pytest.approx(billed)
        ts = c.request("GET", "/timeseries", params={"window": 600, "points": 50})
        assert len(ts["times"]) == 50 and ts["times"][0] >= t0 - 5
        assert ts["spend"][-1] == pytest.approx(billed)
        assert ts["spend"] == sorted(ts["spend"])  # charged cost never decreases
        assert max(ts["running_processors"]) == 6  # 2 x 2 on the cluster and 2 on the VM at once
        assert max(ts["queued_processors"]) >= 2  # the third job waited for its VM
        assert max(ts["leased_vms"]) == 1 and ts["leased_vms"][-1] == 0
        assert ts["running_processors"][-1] == 0 and ts["queued_processors"][-1] == 0
        for bad in ({"points": 1}, {"points": 10**6}, {"window": 0}, {"window": "nan"}, {"points": "x"}):
            with pytest.raises(ApiError) as e:
                c.request("GET", "/timeseries", params=bad)
            assert e.value.status == 422, bad
        user = live.client(c.create_token("bob")["token"])
        assert user.request("GET", "/queues")[0]["jobs"] == 0  # users see the queues too
    finally:
        live.stop()
