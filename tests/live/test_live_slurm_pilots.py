"""Pilot mode on a real Slurm (scripts/start_slurm.sh): pilot jobs hold the nodes, isthmus jobs
run in them; pilots lost, renewed before their walltime and re-attached after a restart."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest
from livekit import LiveServer, wait_for, wait_state

TERMINAL = ("completed", "failed", "cancelled", "timeout")

ENV = """
name = "slurm-pilots"
round_interval = "event"
[[sites]]
name = "fs1"
nodes = {nodes}
cores_per_node = 2
[sites.lrm]
driver = "slurm"
config = "{conf}"
poll_interval = 0.3
{extra}
[policies]
allocation = "ff"
provisioning = "none"
"""


def _env(tmp_path: Path, conf: str, nodes: int = 4, extra: str = "") -> Path:
    path = tmp_path / "env.toml"
    path.write_text(ENV.format(conf=conf, nodes=nodes, extra=extra))
    return path


def _pilot_jobs(conf: str) -> list[tuple[str, str, str]]:
    """(Slurm job id, state, node key) of every isthmus pilot job Slurm holds."""
    out = subprocess.run(
        ["squeue", "-h", "-o", "%i %T %k"],
        env={**os.environ, "SLURM_CONF": conf},
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    jobs = []
    for line in out.splitlines():
        sid, state, comment = line.split()
        key = comment.rsplit(":", 1)[-1]
        if "/p" in key:
            jobs.append((sid, state, key))
    return jobs


def _squeue(conf: str, *args: str) -> str:
    """What `squeue -h ARGS` prints for the Slurm of `conf`."""
    return subprocess.run(
        ["squeue", "-h", *args], env={**os.environ, "SLURM_CONF": conf}, capture_output=True, text=True, check=False
    ).stdout


def _squeue_comments(conf: str) -> list[str]:
    return _squeue(conf, "-o", "%k").split()


def _pilot_of(job: dict) -> str:  # type: ignore[type-arg]
    """The node key of the pilot the job's latest run was confirmed running on."""
    keys = [h["detail"].removeprefix("pilot ") for h in job["history"] if h["state"] == "running"]
    return keys[-1] if keys else ""


def _registered(c, n: int) -> None:  # type: ignore[no-untyped-def]
    wait_for(
        lambda: c.request("GET", "/sites")[0]["online"] >= n,
        timeout=60,
        what=f"{n} processors of registered pilots",
    )


def test_pilot_jobs_hold_the_nodes_and_run_jobs(tmp_path: Path, tag: str, slurm_conf: str) -> None:
    live = LiveServer(_env(tmp_path, slurm_conf), tmp_path / "state", f"sqlite:///{tmp_path / 'db'}", tag).start()
    try:
        c = live.client()
        _registered(c, 8)
        pilots = _pilot_jobs(slurm_conf)
        assert len(pilots) == 4 and {s for _, s, _ in pilots} == {"RUNNING"}, pilots
        site = c.request("GET", "/sites")[0]
        assert site["pilots"] == {"registered": 4} and site["lrm"]["mode"] == "pilot", site
        comments = _squeue_comments(slurm_conf)
        assert len(comments) == 4 and all(k.startswith(site["lrm"]["comment"]) for k in comments), comments
        # a job of 8 processors spans the 4 pilots, one per Slurm node: its node file says so
        wide = c.submit(command="sh", args=["-c", "cut -d' ' -f1 $ISTHMUS_NODEFILE"], size=8)
        j = wait_state(c, wide, TERMINAL, timeout=60)
        assert j["state"] == "completed", j["history"]
        assert sorted(c.output(wide)[0].split()) == ["n1", "n2", "n3", "n4"]
        # many short jobs run in the same pilots: no new Slurm job per isthmus job
        jobs = [c.submit(command="true") for _ in range(20)]
        for job in jobs:
            assert wait_state(c, job, TERMINAL, timeout=60)["state"] == "completed"
        assert sorted(_pilot_jobs(slurm_conf)) == sorted(pilots)
        fails = c.submit(command="sh", args=["-c", "exit 3"])
        j = wait_state(c, fails, TERMINAL, timeout=30)
        assert (j["state"], j["exit_code"]) == ("failed", 3)
    finally:
        live.stop()
    # a stop that kills leaves no pilot job behind
    wait_for(lambda: not _pilot_jobs(slurm_conf), timeout=20, what="pilot jobs cancelled at stop")


def test_a_pilot_job_cancelled_outside_isthmus_loses_its_run_which_runs_again(
    tmp_path: Path, tag: str, slurm_conf: str
) -> None:
    live = LiveServer(_env(tmp_path, slurm_conf, nodes=2), tmp_path / "state", f"sqlite:///{tmp_path / 'db'}", tag)
    live.start()
    try:
        c = live.client()
        _registered(c, 4)
        job = c.submit(command="sh", args=["-c", "[ $ISTHMUS_RUN = 1 ] && exec sleep 60; echo run $ISTHMUS_RUN"])
        j = wait_state(c, job, ("running",), timeout=30)
        key = wait_for(lambda: _pilot_of(c.job(job)), what="the run's pilot")
        (sid,) = [sid for sid, _, k in _pilot_jobs(slurm_conf) if k == key]
        subprocess.run(["scancel", sid], env={**os.environ, "SLURM_CONF": slurm_conf}, check=True)
        j = wait_state(c, job, TERMINAL, timeout=60)
        assert j["state"] == "completed" and j["run"] == 2 and c.output(job)[0] == "run 2\n", j["history"]
        assert any("lost" in h["detail"] and sid in h["detail"] for h in j["history"]), j["history"]
        # the position got a new pilot job
        wait_for(lambda: len(_pilot_jobs(slurm_conf)) == 2, timeout=30, what="a replacement pilot job")
        assert key not in {k for _, _, k in _pilot_jobs(slurm_conf)}
    finally:
        live.stop()


def test_a_pilot_near_its_walltime_is_replaced_without_killing_its_run(
    tmp_path: Path, tag: str, slurm_conf: str
) -> None:
    # Slurm counts minutes: pilots of 1 minute, replaced when 50 s are left, i.e. 10 s after start
    env = _env(tmp_path, slurm_conf, nodes=1, extra="pilot_walltime = 60\nrenew_before = 50")
    live = LiveServer(env, tmp_path / "state", f"sqlite:///{tmp_path / 'db'}", tag).start()
    try:
        c = live.client()
        _registered(c, 2)
        (first,) = _pilot_jobs(slurm_conf)
        job = c.submit(command="sh", args=["-c", "sleep 15; echo run $ISTHMUS_RUN"])
        wait_state(c, job, ("running",), timeout=30)
        # 10 s after it started the pilot retires: its slots leave the site, a second job
        # waits for the replacement, queued in Slurm behind the old pilot on the only node
        wait_for(lambda: c.request("GET", "/sites")[0]["online"] == 0, timeout=30, what="the pilot retiring")
        later = c.submit(command="true")
        j = wait_state(c, job, TERMINAL, timeout=60)
        assert j["state"] == "completed" and j["run"] == 1 and c.output(job)[0] == "run 1\n", j["history"]
        j2 = wait_state(c, later, TERMINAL, timeout=60)
        assert j2["state"] == "completed", j2["history"]
        assert _pilot_of(j) == first[2] and _pilot_of(j2) != first[2], (j["history"], j2["history"])
        wait_for(lambda: first[0] not in {s for s, _, _ in _pilot_jobs(slurm_conf)}, what="the old pilot job gone")
    finally:
        live.stop()


def test_a_restarted_manager_keeps_its_pilots_and_their_runs(tmp_path: Path, tag: str, slurm_conf: str) -> None:
    # pilots wait 30 s for their manager: the restart must not outlast them on a loaded machine
    live = LiveServer(
        _env(tmp_path, slurm_conf, nodes=2),
        tmp_path / "state",
        f"sqlite:///{tmp_path / 'db'}",
        tag,
        pilot_timeout=30.0,
    )
    live.start()
    try:
        c = live.client()
        _registered(c, 4)
        before = sorted(_pilot_jobs(slurm_conf))
        ledger = tmp_path / "ledger"
        job = c.submit(command="sh", args=["-c", f"echo $ISTHMUS_RUN >> {ledger}; sleep 4; echo done"])
        wait_state(c, job, ("running",), timeout=30)
        live.kill(signal.SIGKILL)
        live.start()
        c = live.client()
        j = wait_state(c, job, TERMINAL, timeout=60)
        assert j["state"] == "completed" and j["run"] == 1, j["history"]
        assert ledger.read_text().split() == ["1"] and c.output(job)[0] == "done\n"
        _registered(c, 4)
        assert sorted(_pilot_jobs(slurm_conf)) == before  # the same pilot jobs: none added, none lost
    finally:
        live.stop()


def test_validate_agrees_with_simulation_on_a_slurm_site_beside_local_sites_and_clouds(
    tmp_path: Path, tag: str, slurm_conf: str
) -> None:
    """`isthmus validate` on the bundled `local` environment whose first cluster is a Slurm site in
    pilot mode: the same reduced workload live and simulated agrees (tolerances of test_validate.py)."""
    from dataclasses import replace

    from isthmus.backends.slurm import SlurmOptions
    from isthmus.config import load_environment
    from isthmus.live.validate import prepare_case, validate
    from isthmus.model.environment import PolicyChoice
    from isthmus.model.site import LrmSettings
    from isthmus.workloads import resolve_workload

    env = load_environment("local")
    slurm_site = replace(
        env.sites[0], lrm=LrmSettings(driver="slurm", driver_options=SlurmOptions(config=slurm_conf), poll_interval=0.3)
    )
    env = replace(env, sites=(slurm_site, *env.sites[1:]))
    case = prepare_case(env, resolve_workload("lublin:jobs=25,procs=6,max_size=4,load=0.9", seed=3), scale=0.0005)
    report = validate(case, [PolicyChoice("ff")], out=tmp_path / "out", work_dir=tmp_path / "work", tag=tag)
    (pv,) = report.policies
    live, sim = pv.live.metrics.summary, pv.simulated.metrics.summary
    assert live["jobs_completed"] == sim["jobs_completed"] == 25, pv.live.notes
    # some jobs really ran in Slurm pilot jobs
    assert any(e.site == 0 for e in pv.live.log if e.job >= 0)
    wait = next(r for r in pv.rows if r["metric"] == "wait_mean")
    assert abs(wait["abs_diff"]) <= 2.0 or abs(wait["rel_diff"]) <= 0.25, wait
    for metric in ("slowdown_mean", "bounded_slowdown_mean"):
        r = next(r for r in pv.rows if r["metric"] == metric)
        assert abs(r["rel_diff"]) <= 0.25, r
    assert abs(next(r for r in pv.rows if r["metric"] == "makespan")["abs_diff"]) <= 5.0, pv.rows


TAGS_ENV = """
name = "slurm-tags"
round_interval = "event"
[[sites]]
name = "fs1"
nodes = 4
cores_per_node = 2
[sites.lrm]
driver = "slurm"
mode = "{mode}"
config = "{conf}"
poll_interval = 0.3
[[sites]]
name = "loc"
nodes = 2
cores_per_node = 1
[policies]
allocation = {{ name = "tags-chain", params = {{ limits = [6] }} }}
provisioning = "none"
"""


@pytest.mark.parametrize("mode", ["pilot", "direct"])
def test_tags_chain_kills_at_the_slurm_sites_limit_and_restarts_on_the_next_site(
    tmp_path: Path, tag: str, slurm_conf: str, mode: str
) -> None:
    """KOALA-C's TAGS-chain with a Slurm site first (limit 6 s, which a short job's run stays under
    on a loaded machine) and a local cluster second: a long job is killed on Slurm at the limit and
    completes on the next site; a short one and an 8-processor job spread over the 4 Slurm nodes
    complete on Slurm, in either mode."""
    env = tmp_path / "env.toml"
    env.write_text(TAGS_ENV.format(mode=mode, conf=slurm_conf))
    live = LiveServer(env, tmp_path / "state", f"sqlite:///{tmp_path / 'db'}", tag).start()
    try:
        c = live.client()
        if mode == "pilot":
            _registered(c, 8)
            wide = c.submit(command="sh", args=["-c", "cut -d' ' -f1 $ISTHMUS_NODEFILE"], size=8)
        else:
            wide = c.submit(command="srun", args=["sh", "-c", "echo $SLURMD_NODENAME"], size=8)
        long = c.submit(command="sh", args=["-c", "sleep 10; echo run $ISTHMUS_RUN"])
        short = c.submit(command="sh", args=["-c", "echo run $ISTHMUS_RUN"])
        j = wait_state(c, wide, TERMINAL, timeout=60)
        assert j["state"] == "completed", j["history"]
        assert sorted(set(c.output(wide)[0].split())) == ["n1", "n2", "n3", "n4"]
        j = wait_state(c, short, TERMINAL, timeout=60)
        assert j["state"] == "completed" and c.output(short)[0] == "run 1\n", j["history"]
        j = wait_state(c, long, TERMINAL, timeout=60)
        assert j["state"] == "completed" and c.output(long)[0] == "run 2\n", j["history"]
        starts = [h["detail"].split(":")[0] for h in j["history"] if h["state"] == "starting" and ": " in h["detail"]]
        assert starts == ["fs1", "loc"], j["history"]
    finally:
        live.stop()


def _scontrol(conf: str, *args: str, check: bool = True) -> None:
    subprocess.run(["scontrol", *args], env={**os.environ, "SLURM_CONF": conf}, check=check, capture_output=True)


def _node_of_pilot(conf: str, key: str) -> str:
    env = {**os.environ, "SLURM_CONF": conf}
    out = subprocess.run(["squeue", "-h", "-o", "%N %k"], env=env, capture_output=True, text=True, check=False).stdout
    return next(line.split()[0] for line in out.splitlines() if line.endswith(key))


def test_a_node_downed_under_a_running_job_loses_the_run_and_its_pilot_waits_for_a_node(
    tmp_path: Path, tag: str, slurm_conf: str
) -> None:
    live = LiveServer(_env(tmp_path, slurm_conf), tmp_path / "state", f"sqlite:///{tmp_path / 'db'}", tag).start()
    node = ""
    try:
        c = live.client()
        _registered(c, 8)
        job = c.submit(command="sh", args=["-c", "[ $ISTHMUS_RUN = 1 ] && exec sleep 60; echo run $ISTHMUS_RUN"])
        wait_state(c, job, ("running",), timeout=30)
        key = wait_for(lambda: _pilot_of(c.job(job)), what="the run's pilot")
        node = _node_of_pilot(slurm_conf, key)
        _scontrol(slurm_conf, "update", f"nodename={node}", "state=down", "reason=isthmus-test")
        j = wait_state(c, job, TERMINAL, timeout=60)
        assert j["state"] == "completed" and j["run"] == 2 and c.output(job)[0] == "run 2\n", j["history"]
        # the position's new pilot waits in Slurm's queue: three nodes are left for four pilots
        wait_for(
            lambda: c.request("GET", "/sites")[0]["pilots"] == {"registered": 3, "queued": 1},
            timeout=30,
            what="a replacement pilot queued",
        )
        assert c.request("GET", "/sites")[0]["online"] == 6
        # the node back (the test Slurm may already have returned it to service)
        _scontrol(slurm_conf, "update", f"nodename={node}", "state=resume", check=False)
        node = ""
        _registered(c, 8)
    finally:
        if node:
            _scontrol(slurm_conf, "update", f"nodename={node}", "state=resume", check=False)
        live.stop()


def test_direct_mode_capacity_follows_drained_nodes_and_keeps_processors_for_local_users(
    tmp_path: Path, tag: str, slurm_conf: str
) -> None:
    env = tmp_path / "env.toml"
    env.write_text(ENV.format(nodes=4, conf=slurm_conf, extra='mode = "direct"\nkeep_free = 1'))
    live = LiveServer(env, tmp_path / "state", f"sqlite:///{tmp_path / 'db'}", tag).start()
    try:
        c = live.client()
        wait_for(lambda: c.request("GET", "/sites")[0]["free"] == 7, what="8 processors, 1 kept for local users")
        _scontrol(slurm_conf, "update", "nodename=n4", "state=drain", "reason=isthmus-test")
        wait_for(lambda: c.request("GET", "/sites")[0]["online"] == 6, what="a drained node offline")
        assert c.request("GET", "/sites")[0]["free"] == 5
    finally:
        _scontrol(slurm_conf, "update", "nodename=n4", "state=resume", check=False)
        live.stop()


def test_pilot_mode_yields_idle_nodes_to_waiting_local_jobs_and_keeps_processors_free(
    tmp_path: Path, tag: str, slurm_conf: str
) -> None:
    # keep_free = 1 on 2-CPU positions: 3 of the 4 positions are held
    live = LiveServer(
        _env(tmp_path, slurm_conf, extra="keep_free = 1"), tmp_path / "state", f"sqlite:///{tmp_path / 'db'}", tag
    ).start()
    local = ""
    try:
        c = live.client()
        _registered(c, 6)
        assert len(_pilot_jobs(slurm_conf)) == 3
        busy = c.submit(command="sleep", args=["30"], size=2, name="isthmus-run")
        wait_state(c, busy, ("running",), timeout=30)
        # a local user's job wants two whole nodes: the free one and one held by an idle pilot
        out = subprocess.run(
            ["sbatch", "--parsable", "-N2", "--ntasks-per-node=2", f"--output={tmp_path}/local.out", "--wrap=sleep 3"],
            env={**os.environ, "SLURM_CONF": slurm_conf},
            capture_output=True,
            text=True,
            check=True,
        )
        local = out.stdout.strip().split(";")[0]
        site = wait_for(
            lambda: (lambda s: s if s["lrm"]["waiting_local"] >= 4 else None)(c.request("GET", "/sites")[0]),  # noqa: PLC3002
            timeout=20,
            what="the local job seen waiting",
        )
        assert site["lrm"]["keep_free"] == 1
        # positions allowed: 4 - ceil((1 + 4) / 2) = 1: both idle pilots end, the busy one stays
        wait_for(lambda: _slurm_state(slurm_conf, local) in ("RUNNING", "COMPLETED", ""), 30, what="local job ran")
        assert c.job(busy)["state"] == "running"  # isthmus's run was not killed for it
        wait_for(lambda: _slurm_state(slurm_conf, local) in ("COMPLETED", ""), 30, what="local job done")
        # the local job gone, the positions are held again
        _registered(c, 6)
    finally:
        if local:
            subprocess.run(["scancel", local], env={**os.environ, "SLURM_CONF": slurm_conf}, check=False)
        live.stop()


def _slurm_state(conf: str, job_id: str) -> str:
    """The job's state in squeue ('' once Slurm no longer lists it)."""
    return _squeue(conf, "-j", job_id, "-o", "%T").strip()


def test_elastic_pilots_grow_with_a_burst_and_shrink_when_idle(tmp_path: Path, tag: str, slurm_conf: str) -> None:
    extra = 'pilots = "elastic"\nmin_pilots = 1\nidle_release = 1.0'
    live = LiveServer(_env(tmp_path, slurm_conf, extra=extra), tmp_path / "state", f"sqlite:///{tmp_path / 'db'}", tag)
    live.start()
    try:
        c = live.client()
        _registered(c, 2)
        assert len(_pilot_jobs(slurm_conf)) == 1  # no demand: the minimum
        # a burst of three 2-processor jobs: three positions wanted, pilots submitted for them
        burst = [c.submit(command="sleep", args=["4"], size=2) for _ in range(3)]
        wait_for(lambda: len(_pilot_jobs(slurm_conf)) == 3, timeout=30, what="pilots grown to 3")
        for j in burst:
            assert wait_state(c, j, TERMINAL, timeout=60)["state"] == "completed"
        # idle beyond the demand for idle_release: back to the minimum, the runs were not cut
        wait_for(lambda: len(_pilot_jobs(slurm_conf)) == 1, timeout=30, what="pilots shrunk to 1")
        assert c.request("GET", "/sites")[0]["pilots"].get("registered") == 1
    finally:
        live.stop()


def test_a_local_multi_node_job_gets_whole_nodes_from_the_pilots_within_their_yield_time(
    tmp_path: Path, tag: str, slurm_conf: str
) -> None:
    live = LiveServer(_env(tmp_path, slurm_conf), tmp_path / "state", f"sqlite:///{tmp_path / 'db'}", tag).start()
    local = ""
    try:
        c = live.client()
        _registered(c, 8)
        assert len(_pilot_jobs(slurm_conf)) == 4
        # a local user's `sbatch -N 2 -n 2`: 2 processors, but 2 whole nodes of the 4 the pilots hold
        out = subprocess.run(
            ["sbatch", "--parsable", "-N", "2", "-n", "2", "--output=/dev/null", "--wrap", "sleep 1"],
            env={**os.environ, "SLURM_CONF": slurm_conf},
            capture_output=True,
            text=True,
            check=True,
        )
        local = out.stdout.strip().split(";")[0]
        # the yield: a poll (0.3 s), the idle pilots' exit, their jobs cancelled 5 s later at most
        wait_for(lambda: _slurm_state(slurm_conf, local) in ("RUNNING", "COMPLETED", ""), 15, what="local job ran")
        site = c.request("GET", "/sites")[0]
        assert site["lrm"]["waiting_nodes"] in (0, 2), site["lrm"]
        wait_for(lambda: _slurm_state(slurm_conf, local) in ("COMPLETED", ""), 30, what="local job done")
        _registered(c, 8)  # the local job gone, all positions are held again
    finally:
        if local:
            subprocess.run(["scancel", local], env={**os.environ, "SLURM_CONF": slurm_conf}, check=False)
        live.stop()


TWO_SITES = """
name = "slurm-two-sites"
round_interval = "event"
[[sites]]
name = "pilots"
nodes = 2
cores_per_node = 2
[sites.lrm]
driver = "slurm"
config = "{conf}"
poll_interval = 0.3
[[sites]]
name = "direct"
nodes = 4
cores_per_node = 2
[sites.lrm]
driver = "slurm"
mode = "direct"
config = "{conf}"
poll_interval = 0.3
[policies]
allocation = "ff"
provisioning = "none"
"""


def test_a_pilot_site_and_a_direct_site_on_one_partition_both_run_jobs(
    tmp_path: Path, tag: str, slurm_conf: str
) -> None:
    env = tmp_path / "env.toml"
    env.write_text(TWO_SITES.format(conf=slurm_conf))
    live = LiveServer(env, tmp_path / "state", f"sqlite:///{tmp_path / 'db'}", tag).start()
    try:
        c = live.client()
        _registered(c, 4)
        # first fit: two jobs fill the pilots, the next ones go to the direct site's free nodes
        jobs = [c.submit(command="sleep", args=["4"], size=2) for _ in range(4)]
        sites = {}
        for job in jobs:
            j = wait_state(c, job, TERMINAL, timeout=60)
            assert j["state"] == "completed", j["history"]
            sites[job] = j["site"]
        assert set(sites.values()) == {"pilots", "direct"}, sites
        # neither site counted the other's Slurm jobs (this manager's) as local users' work
        for site in c.request("GET", "/sites"):
            assert site["lrm"]["waiting_local"] == 0, site
        # more jobs than both hold: those waiting in Slurm for the direct site do not make the pilots yield
        more = [c.submit(command="sleep", args=["2"], size=2) for _ in range(6)]
        for job in more:
            assert wait_state(c, job, TERMINAL, timeout=90)["state"] == "completed"
        assert len(_pilot_jobs(slurm_conf)) == 2
    finally:
        live.stop()
