"""How a pilot obeys commands from its long poll and from report answers (no manager needed)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from isthmus.agent.pilot import EXIT_OK, Pilot, PilotConfig


def _start(tmp: Path, seq: int, job: int, command: str = "true", args: list[str] | None = None) -> dict[str, Any]:
    spool = tmp / str(job)
    return {
        "seq": seq,
        "op": "start",
        "job": job,
        "run": 1,
        "command": command,
        "args": args or [],
        "env": {"ISTHMUS_JOB_ID": str(job)},
        "spool": str(spool),
        "stdout": str(spool / "run1.out"),
        "stderr": str(spool / "run1.err"),
        "nodefile": str(spool / "run1.nodes"),
        "hosts": [["node-a", 3], ["node-b", 1]],
    }


@pytest.fixture
def pilot() -> Pilot:
    p = Pilot(PilotConfig(url="http://127.0.0.1:9", node="0/n0", token="t", slots=4))
    p.pilot_id = "reg-1"
    return p


def _events(p: Pilot, timeout: float = 5.0, want: int = 0) -> list[tuple[int, str]]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with p._lock:
            events = [(r["job"], r["event"]) for r in p.pending]
        if len([e for e in events if e[1] == "ended"]) >= want:
            return events
        time.sleep(0.01)
    return events


def test_starts_once_per_sequence_number_and_reports_start_before_end(pilot: Pilot, tmp_path: Path) -> None:
    script = "echo hi; echo oops >&2; cat $ISTHMUS_NODEFILE"
    cmds = [_start(tmp_path, 1, 10, "sh", ["-c", script]), _start(tmp_path, 2, 11)]
    assert pilot._obey(cmds, "reg-1") is None
    assert pilot._obey(cmds, "reg-1") is None  # the same answer again (a poll repeating a report answer)
    events = _events(pilot, want=2)
    assert sorted(events) == [(10, "ended"), (10, "started"), (11, "ended"), (11, "started")]
    for job in (10, 11):
        assert events.index((job, "started")) < events.index((job, "ended"))
    assert pilot.last_seq == 2
    out = tmp_path / "10" / "run1.out"
    assert (
        out.read_text() == "hi\nnode-a slots=3\nnode-b slots=1\n"
        and (tmp_path / "10" / "run1.err").read_text() == "oops\n"
    )


def test_report_answer_stops_before_exit_and_poll_obeys_it(pilot: Pilot, tmp_path: Path) -> None:
    cmds = [_start(tmp_path, 1, 20), {"seq": 2, "op": "exit", "reason": "bye"}, _start(tmp_path, 3, 21)]
    assert pilot._obey(cmds, "reg-1", exit_ok=False) is None
    assert pilot.last_seq == 1  # the exit (and what follows) is left to the long poll
    assert not (tmp_path / "21").exists()
    assert pilot._obey(cmds, "reg-1") == EXIT_OK
    assert pilot.last_seq == 2


def test_answer_to_an_old_registration_is_ignored(pilot: Pilot, tmp_path: Path) -> None:
    assert pilot._obey([_start(tmp_path, 1, 30)], "reg-0") is None
    assert pilot.last_seq == 0 and not (tmp_path / "30").exists()


def test_unstartable_command_reports_start_and_end_127(pilot: Pilot, tmp_path: Path) -> None:
    pilot._obey([_start(tmp_path, 1, 40, "/no/such/program")], "reg-1")
    with pilot._lock:
        reports = list(pilot.pending)
    assert [(r["event"], r.get("exit_code")) for r in reports] == [("started", None), ("ended", 127)]
    assert "cannot start" in (tmp_path / "40" / "run1.err").read_text()


def test_script_without_shebang_runs_under_sh_and_output_files_append_on_restart(pilot: Pilot, tmp_path: Path) -> None:
    out = tmp_path / "user" / "out.txt"
    out.parent.mkdir()
    out.write_text("run 1 said hi\n")
    cmd = _start(tmp_path, 1, 50, "/home/u/job.sh", ["x"])
    cmd.update(run=2, script='echo "script got $1"\necho err >&2\n', stdout=str(out), stderr=str(out), append=True)
    pilot._obey([cmd], "reg-1")
    events = _events(pilot, want=1)
    assert (50, "ended") in events
    with pilot._lock:
        ended = [r for r in pilot.pending if r["event"] == "ended"]
    assert ended[0]["exit_code"] == 0
    assert out.read_text() == "run 1 said hi\nscript got x\nerr\n"  # run 2 appended; stderr joined stdout
    assert (tmp_path / "50" / "job.script").read_text().startswith('echo "script got $1"')


def test_unopenable_output_file_fails_the_run_with_the_reason(pilot: Pilot, tmp_path: Path) -> None:
    cmd = _start(tmp_path, 1, 60)
    cmd["stdout"] = str(tmp_path / "missing-dir" / "out")
    pilot._obey([cmd], "reg-1")
    with pilot._lock:
        reports = list(pilot.pending)
    assert [(r["event"], r.get("exit_code")) for r in reports] == [("started", None), ("ended", 1)]
    assert "cannot open the output file" in (tmp_path / "60" / "run1.err").read_text()
