"""A VM that never boots is a VM failure: its first pilot exits before it
registers, the engine logs VM_FAILED with the reason and ends the VM's lease, and provisioning
leases another VM on which the waiting job runs."""

from __future__ import annotations

from pathlib import Path

from livekit import LiveServer, wait_state, write_env

from isthmus.model.events import EventKind

TERMINAL = ("completed", "failed", "cancelled")


def test_a_vm_that_never_boots_fails_and_another_is_leased(tmp_path: Path, tag: str) -> None:
    env = write_env(tmp_path / "env.toml")
    live = LiveServer(env, tmp_path / "state", f"sqlite:///{tmp_path / 'db'}", tag, module="vmfail_entry").start()
    try:
        c = live.client()
        hold = c.submit(command="sleep", args=["30"], size=4)  # fills c1
        wait_state(c, hold, ("running",))
        job = c.submit(command="sh", args=["-c", "echo $ISTHMUS_SITE"], size=2)
        j = wait_state(c, job, TERMINAL, timeout=40)
        assert j["state"] == "completed" and j["site"] == "cloud", j
        assert c.output(job)[0] == "cloud\n"
        events = c.request("GET", "/events")
        failed = [e for e in events if int(e[1]) == EventKind.VM_FAILED]
        assert len(failed) == 1, events
        vm = int(failed[0][4])
        # its lease ends when it fails (release, then gone, at the same instant)
        after = [(int(e[1]), e[0]) for e in events if int(e[4]) == vm and int(e[3]) == 1]
        kinds = [k for k, _ in after]
        assert kinds == [EventKind.VM_LEASE, EventKind.VM_FAILED, EventKind.VM_RELEASE, EventKind.VM_GONE], after
        assert after[1][1] == after[2][1] == after[3][1]
        vms = {v["vm"]: v for v in c.vms(all_=True)}
        assert vms[vm]["state"] == "gone" and vms[vm]["ready_at"] is None
        assert any(v["ready_at"] is not None for k, v in vms.items() if k != vm)  # another VM booted
        log = (live.state_dir.parent / f"server-{live.starts}.log").read_text()
        assert "failed to boot" in log
        c.cancel(hold)
    finally:
        live.stop()
