"""The dissertation's allocation policies drive the live manager's clouds as they drive the
simulator: FCFS-NW puts a job on a busy VM instead of queueing it (both processes really share
it), and FCFS with VM reservation holds an idle VM for the head job, visible in its status."""

from __future__ import annotations

from pathlib import Path

from livekit import LiveServer, wait_for, wait_state

from isthmus.model.events import EventKind

TERMINAL = ("completed", "failed", "cancelled")

ENV = """
name = "{name}"
round_interval = "event"
[[sites]]
name = "cloud"
kind = "cloud"
min_vms = {min_vms}
max_vms = {max_vms}
cores_per_node = 1
boot_time = {boot}
shutdown_time = 0.3
idle_release_time = 30
[policies]
allocation = "{alloc}"
provisioning = "{prov}"
"""


def server(tmp_path: Path, tag: str, **kw: object) -> LiveServer:
    env = tmp_path / "env.toml"
    env.write_text(ENV.format(name=tmp_path.name[:20] or "t", **kw))
    return LiveServer(env, tmp_path / "state", f"sqlite:///{tmp_path / 'db'}", tag).start()


def test_fcfs_nw_runs_a_second_job_on_the_busy_vm(tmp_path: Path, tag: str) -> None:
    live = server(tmp_path, tag, min_vms=1, max_vms=1, boot=0.3, alloc="fcfs-nw", prov="startup")
    try:
        c = live.client()
        wait_for(lambda: any(v["state"] == "ready" for v in c.vms()), 20, what="the VM to boot")
        first = c.submit(command="sleep", args=["4"])
        wait_state(c, first, ("running",))
        second = c.submit(command="sleep", args=["1"])
        # not queued: it starts on the only VM, which is busy, while the first still runs
        s = wait_state(c, second, ("running", "completed"), timeout=10)
        assert c.job(first)["state"] == "running", c.job(first)
        a, b = wait_state(c, first, TERMINAL, timeout=20), wait_state(c, second, TERMINAL, timeout=20)
        assert a["state"] == b["state"] == "completed", (a, b)
        assert a["site"] == s["site"] == "cloud"
        assert b["start_time"] < a["end_time"] and b["end_time"] < a["end_time"]
        (vm,) = c.vms(all_=True)
        assert vm["vm"] == 0
        # live, sharing is real: no SHARED event (only the simulator knows a run's time alone)
        assert not [e for e in c.events() if int(e[1]) == EventKind.SHARED]
    finally:
        live.stop()


def test_fcfs_reserve_holds_the_idle_vm_for_the_head_job(tmp_path: Path, tag: str) -> None:
    live = server(tmp_path, tag, min_vms=0, max_vms=2, boot=3, alloc="fcfs-reserve", prov="od-s")
    try:
        c = live.client()
        small = c.submit(command="sleep", args=["2"])
        wait_state(c, small, ("running",), timeout=20)  # on the first VM (3 s boot)
        wide = c.submit(command="sleep", args=["1"], size=2)
        wait_state(c, small, ("completed",), timeout=20)
        # the freed VM is held for the wide job while OD-S boots the second one
        held = wait_for(
            lambda: (j := c.job(wide)).get("reason_code") == "held" and "reserved" in (j.get("reason") or "") and j,
            10,
            what="the reservation to show",
        )
        assert (
            held["reason"] == "holds 1 reserved VMs (1 processors) of cloud; needs 2 processors and waits for the rest"
        )
        assert held["reason_policy"] == "fcfs-reserve"
        done = wait_state(c, wide, TERMINAL, timeout=20)
        assert done["state"] == "completed"
        reserve = [(int(e[2]), int(e[4]), e[5]) for e in c.events() if int(e[1]) == EventKind.RESERVE]
        assert reserve[0][1:] == (0, 1.0) and (0, 0.0) in [r[1:] for r in reserve], reserve
        assert len(c.vms(all_=True)) == 2  # one more VM leased, not two
    finally:
        live.stop()
