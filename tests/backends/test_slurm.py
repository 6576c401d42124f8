"""Slurm as a BatchSystem, against a real Slurm (scripts/start_slurm.sh: 4 emulated nodes x 2
CPUs, started by scripts/test; ISTHMUS_TEST_SLURM names its slurm.conf)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from isthmus.backends.api import RunRequest, WaitingJob
from isthmus.backends.errors import InvalidRequestError, SiteTimeoutError
from isthmus.backends.runner import CommandResult
from isthmus.backends.slurm import SLURM_STATES, SlurmBatch, expand_nodelist
from isthmus.model.states import JobState, translate


def test_nodelists_expand() -> None:
    assert expand_nodelist("n[1-3,5],login,c[01-02]") == ["n1", "n2", "n3", "n5", "login", "c01", "c02"]
    assert expand_nodelist("n7") == ["n7"]


def test_every_documented_state_translates_and_unknown_ones_warn(caplog: pytest.LogCaptureFixture) -> None:
    assert translate(SLURM_STATES, "COMPLETING", system="Slurm") is JobState.RUNNING
    assert translate(SLURM_STATES, "NODE_FAIL", system="Slurm") is JobState.LOST
    assert translate(SLURM_STATES, "TIMEOUT", system="Slurm") is JobState.TIMEOUT
    assert translate(SLURM_STATES, "WEIRD", system="Slurm") is JobState.UNKNOWN
    assert "unknown job state 'WEIRD'" in caplog.text


@pytest.fixture
def slurm(slurm_conf: str) -> SlurmBatch:
    return SlurmBatch("slurm-test", uuid.uuid4().hex[:8], slurm_conf=slurm_conf)


def _wait(batch: SlurmBatch, ids: list[str], done: callable, timeout: float = 30) -> dict:  # type: ignore[valid-type]
    deadline = time.time() + timeout
    while time.time() < deadline:
        st = batch.status(ids)
        if done(st):
            return st
        time.sleep(0.3)
    raise AssertionError(f"timed out: {batch.status(ids)}")


def test_submit_status_multi_node_exit_codes_and_find(slurm: SlurmBatch, tmp_path: Path) -> None:
    out = tmp_path / "wide.out"
    ids = slurm.submit(
        [
            RunRequest("wide", ("srun", "sh", "-c", "echo $SLURMD_NODENAME"), 8, stdout=str(out), name="wide"),
            RunRequest("fails", ("sh", "-c", "exit 3"), 1),
            RunRequest(
                "env", ("sh", "-c", 'echo "$GREETING" > ' + str(tmp_path / "env.out")), 1, env={"GREETING": "hi"}
            ),
        ]
    )
    assert all(isinstance(i, str) and i.isdigit() for i in ids), ids
    st = _wait(slurm, ids, lambda s: len(s) == 3 and all(x.state.terminal for x in s.values()))  # type: ignore[arg-type]
    wide, fails, env = (st[i] for i in ids)  # type: ignore[index]
    assert (wide.state, wide.exit_code, wide.key) == (JobState.COMPLETED, 0, "wide")
    assert sorted(set(out.read_text().split())) == ["n1", "n2", "n3", "n4"]  # 8 tasks on the 4 nodes
    assert set(wide.nodes) == {"n1", "n2", "n3", "n4"}
    assert (fails.state, fails.exit_code) == (JobState.FAILED, 3)
    assert env.state is JobState.COMPLETED and (tmp_path / "env.out").read_text() == "hi\n"
    assert set(slurm.find()) == set(ids)  # this manager's jobs, recognized by their comment
    other = SlurmBatch("slurm-test", "someone-else", slurm_conf=slurm.slurm_conf)
    assert not set(other.find()) & set(ids)


def test_cancel_capacity_and_local_jobs(slurm: SlurmBatch) -> None:
    (hold,) = slurm.submit([RunRequest("hold", ("sleep", "60"), 6)])
    assert isinstance(hold, str)
    _wait(slurm, [hold], lambda s: s[hold].state is JobState.RUNNING)
    cap = slurm.capacity()
    assert (cap.total, cap.usable, cap.free) == (8, 8, 2)
    local = SlurmBatch("slurm-test", "a-local-user", slurm_conf=slurm.slurm_conf)  # not this manager's
    (waiting,) = local.submit([RunRequest("local", ("true",), 4)])
    # `sbatch -N 2 -n 2`: 2 processors over 2 nodes (one node has 2 idle: it cannot start)
    (wide,) = local.submit([RunRequest("wide", ("true",), 2, nodes=2)])
    cap = slurm.capacity()
    assert cap.waiting_local == 6  # other users' pending jobs count against isthmus
    # (Slurm spreads the 4 processors of the first over 2 of its 2-processor nodes too)
    assert sorted((j.nodes, j.cpus) for j in cap.waiting_jobs) == [(2, 2), (2, 4)], cap.waiting_jobs
    assert [j.nodes_needed(2) for j in cap.waiting_jobs] == [2, 2]
    assert cap.node_memory > 0  # sinfo's memory of the nodes
    assert slurm.cancel([hold, waiting, wide]) == {hold: None, waiting: None, wide: None}
    st = _wait(slurm, [hold], lambda s: s[hold].state.terminal)
    assert st[hold].state is JobState.CANCELLED


def test_refusals_carry_slurms_message(slurm: SlurmBatch) -> None:
    bad = SlurmBatch("slurm-test", "m", partition="no-such-partition", slurm_conf=slurm.slurm_conf)
    (err,) = bad.submit([RunRequest("x", ("true",), 1)])
    assert isinstance(err, InvalidRequestError) and "invalid partition" in str(err).lower(), err
    assert slurm.cancel(["999999"]) == {"999999": None}  # nothing to cancel: done (scancel is idempotent)


def test_a_controller_that_does_not_answer_is_a_timeout(tmp_path: Path) -> None:
    conf = tmp_path / "slurm.conf"  # a controller on a port nobody listens on
    conf.write_text("ClusterName=gone\nSlurmctldHost=localhost\nSlurmctldPort=1\nAuthType=auth/none\n")
    batch = SlurmBatch("gone", "m", slurm_conf=str(conf), timeout=3)
    if not Path("/usr/bin/sbatch").exists():
        pytest.skip("Slurm's client commands are not installed (scripts/start_slurm.sh installs them)")
    with pytest.raises((SiteTimeoutError, InvalidRequestError)):
        batch.capacity()


class CannedRunner:
    """Answers sinfo and squeue with canned output (the commands are not run)."""

    def __init__(self, answers: dict[str, str]) -> None:
        self.answers = answers
        self.argvs: list[tuple[str, ...]] = []

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float,
        env: Mapping[str, str] | None = None,
        input_text: str | None = None,
        check: bool = True,
    ) -> CommandResult:
        self.argvs.append(tuple(argv))
        return CommandResult(tuple(argv), 0, self.answers[argv[0]], "", 0.0)


def test_capacity_lists_other_users_pending_jobs_with_their_nodes_processors_and_memory() -> None:
    runner = CannedRunner(
        {
            "sinfo": "n1|2|idle|0/2/0/2|4000\nn2|2|alloc|2/0/0/2|2000\nn3|2|down*|0/0/2/2|1000\n",
            "squeue": (
                "2|2|0|(null)\n"  # sbatch -N 2 -n 2
                "1|3|1G|(null)\n"  # -n 3 --mem=1G
                "1|2|100Mc|(null)\n"  # -n 2 --mem-per-cpu=100M: 200 MiB on its node
                "4|8|0|isthmus:m1:j7r1\n"  # this manager's (any of its sites): not a local user's
                "1|2|0|isthmus:m2:j1r1\n"  # another manager's: a local user's, as any other
            ),
        }
    )
    cap = SlurmBatch("s", "m1", partition="p", runner=runner).capacity()
    assert (cap.total, cap.usable, cap.free, cap.node_memory) == (6, 4, 2, 2000)  # n3 down: not its memory
    assert cap.waiting_jobs == (WaitingJob(2, 2), WaitingJob(1, 3, 1024), WaitingJob(1, 2, 200), WaitingJob(1, 2))
    assert cap.waiting_local == 9
    assert [j.nodes_needed(2, cap.node_memory) for j in cap.waiting_jobs] == [2, 2, 1, 1]
    squeue = next(a for a in runner.argvs if a[0] == "squeue")
    assert "-p" in squeue and "PENDING" in squeue
