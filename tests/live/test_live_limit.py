"""TAGS live: a runtime limit kills the real process, the job is requeued in the next set and completes.

Both TAGS policies of KOALA-C run on the live manager with an environment file of two cluster
sites: `tags-sets` (set `all` = both sites with a 1 s limit, set `long` = the second site,
unlimited) and `tags-chain` (one chain of the two sites, limit 1 s on the first).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from livekit import LiveServer, tagged_pids, wait_for, wait_state

TAGS_ENV = """
name = "tags-live"
round_interval = "event"

[[sites]]
name = "first"
nodes = 1
cores_per_node = 1

[[sites]]
name = "second"
nodes = 1
cores_per_node = 1

[[sets]]
name = "all"
sites = ["first", "second"]
runtime_limit = 1.0

[[sets]]
name = "long"
sites = ["second"]

[policies]
provisioning = "none"
{allocation}
"""

ALLOCATION = {
    "tags-sets": 'allocation = "tags-sets"',
    "tags-chain": 'allocation = { name = "tags-chain", params = { limits = [1.0] } }',
}


@pytest.mark.parametrize("policy", ["tags-sets", "tags-chain"])
@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_limit_kills_process_and_requeues_in_next_set(tmp_path: Path, db_url: str, tag: str, policy: str) -> None:
    env = tmp_path / "env.toml"
    env.write_text(TAGS_ENV.format(allocation=ALLOCATION[policy]))
    server = LiveServer(env, tmp_path / "state", db_url, tag).start()
    try:
        c = server.client()
        marker = tmp_path / "runs"
        jid = c.submit(command="sh", args=["-c", f"echo run >> {marker}; sleep 2.5; echo finished"])
        j = wait_state(c, jid, ("completed", "failed"), timeout=30)
        assert j["state"] == "completed" and j["run"] == 2 and j["restarts"] == 1
        assert j["site"] == "second"
        states = [(h["state"], h["run"]) for h in j["history"]]
        assert states == [
            ("queued", 0),
            ("starting", 1),
            ("running", 1),
            ("killed", 1),
            ("queued", 1),
            ("starting", 2),
            ("running", 2),
            ("completed", 2),
        ]
        assert j["history"][1]["detail"].startswith("first:")  # run 1 in the first set / chain position
        assert "limit" in j["history"][3]["detail"]
        assert j["history"][3]["time"] - j["history"][1]["time"] == pytest.approx(1.0, abs=0.3)
        assert j["history"][4]["detail"] == "requeued (queue 1)"
        assert j["history"][5]["detail"].startswith("second:")  # run 2 in the next set / chain position
        assert marker.read_text() == "run\nrun\n"  # the first run really ran and was really killed
        assert c.output(jid, run=1)[0] == ""  # killed before "finished"
        assert c.output(jid, run=2)[0] == "finished\n"

        # a job shorter than the limit completes in the first set, without a restart
        short = c.submit(command="sleep", args=["0.2"])
        s = wait_state(c, short, ("completed", "failed"), timeout=20)
        assert s["state"] == "completed" and s["restarts"] == 0 and s["run"] == 1 and s["site"] == "first"

        wait_for(
            lambda: (
                not any(
                    b"sleep" in Path(f"/proc/{p}/cmdline").read_bytes()
                    for p in tagged_pids(tag)
                    if Path(f"/proc/{p}").exists()
                )
            ),
            what="no sleep left",
        )
    finally:
        server.stop()
