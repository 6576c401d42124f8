"""Sites behind a batch system, on the fake one: direct mode (a run is a batch job) and pilot
mode (pilot jobs hold the nodes)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

from rig import Rig, spec

from isthmus.backends.api import WaitingJob
from isthmus.backends.batch_site import BatchCluster
from isthmus.backends.errors import InvalidRequestError, SiteTimeoutError
from isthmus.backends.fake import FakeBatchSystem
from isthmus.backends.pilot_jobs_site import PilotJobs
from isthmus.engine.backend import SiteBackend
from isthmus.live.context import LiveContext
from isthmus.model.site import Site

ENV = """
name = "unit-batch"
round_interval = "event"
[[sites]]
name = "hpc"
nodes = 2
cores_per_node = 2
[sites.lrm]
driver = "slurm"
mode = "{mode}"
poll_interval = 5
[policies]
allocation = "fcfs"
provisioning = "none"
"""


def on(fake: FakeBatchSystem) -> Callable[[LiveContext, int, Site], SiteBackend]:
    def make(ctx: LiveContext, index: int, site: Site) -> SiteBackend:
        assert site.lrm is not None
        if site.lrm.mode == "pilot":
            backend = PilotJobs(index, site, fake.connect, ctx)
            ctx.hub.launchers[index] = backend
            return backend
        return BatchCluster(index, site, fake.connect, ctx, site.lrm.poll_interval)

    return make


def run(tmp_path: Path, mode: str, body: Callable[[Rig, FakeBatchSystem], Awaitable[None]], **config: object) -> None:
    fake = FakeBatchSystem(nodes=2, cores_per_node=2)
    rig = Rig(tmp_path, ENV.format(mode=mode), on(fake), **config)

    async def main() -> None:
        rig.begin()
        await rig.settle()
        rig.step()
        await body(rig, fake)

    try:
        asyncio.run(main())
    finally:
        rig.close()


async def turn(rig: Rig, seconds: float = 0.0) -> None:
    """Advance the clock, run what is due and wait for the system's answers, twice (an answer
    may ask again at once)."""
    for _ in range(2):
        rig.step(seconds)
        await rig.settle()
        seconds = 0.0
    rig.step()


# --------------------------------------------------------------------------- direct mode


def test_a_run_is_a_batch_job_followed_to_its_end(tmp_path: Path) -> None:
    async def body(rig: Rig, fake: FakeBatchSystem) -> None:
        job = rig.intake.submit("alice", spec(2, name="sim"))
        await turn(rig)
        batch = fake.by_key(f"j{job}r1")
        assert batch.request.size == 2 and batch.request.name == "sim"
        assert batch.request.env["ISTHMUS_JOB_ID"] == str(job)
        assert rig.store.job(job)["slots"] == [[batch.provider_id, 0]]  # type: ignore[index]
        fake.run(batch.provider_id, nodes=("n1",))
        await turn(rig, 5.0)
        assert rig.state(job) == "running"
        fake.finish(batch.provider_id, exit_code=3)
        await turn(rig, 5.0)
        row = rig.store.job(job)
        assert row is not None and row["state"] == "failed" and row["exit_code"] == 3

    run(tmp_path, "direct", body)


def test_a_refused_submission_fails_the_run_with_the_systems_reason(tmp_path: Path) -> None:
    async def body(rig: Rig, fake: FakeBatchSystem) -> None:
        fake.refuse_next(InvalidRequestError("invalid partition"))
        job = rig.intake.submit("alice", spec(1))
        await turn(rig)
        row = rig.store.job(job)
        assert row is not None and row["state"] == "failed"
        assert any("invalid partition" in (h["detail"] or "") for h in rig.store.history(job))

    run(tmp_path, "direct", body)


def test_a_lost_batch_job_is_requeued_and_submitted_again(tmp_path: Path) -> None:
    async def body(rig: Rig, fake: FakeBatchSystem) -> None:
        job = rig.intake.submit("alice", spec(1))
        await turn(rig)
        first = fake.by_key(f"j{job}r1").provider_id
        fake.run(first)
        await turn(rig, 5.0)
        fake.lose(first)
        await turn(rig, 5.0)
        row = rig.store.job(job)
        assert row is not None and row["restarts"] == 1
        second = fake.by_key(f"j{job}r2")
        assert second.provider_id != first

    run(tmp_path, "direct", body)


def test_a_silent_system_makes_the_site_unavailable_until_it_answers(tmp_path: Path) -> None:
    async def body(rig: Rig, fake: FakeBatchSystem) -> None:
        site = rig.backends[0]
        fake.unavailable = SiteTimeoutError("slurmctld does not answer")
        await turn(rig, 5.0)
        assert "does not answer" in site.unavailable
        job = rig.intake.submit("alice", spec(1))
        await turn(rig)
        assert rig.state(job) == "queued"  # no start on an unavailable site
        fake.unavailable = None
        await turn(rig, 5.0)
        assert site.unavailable == ""
        assert rig.state(job) == "starting"

    run(tmp_path, "direct", body)


def test_cancel_cancels_the_batch_job(tmp_path: Path) -> None:
    async def body(rig: Rig, fake: FakeBatchSystem) -> None:
        job = rig.intake.submit("alice", spec(1))
        await turn(rig)
        pid = fake.by_key(f"j{job}r1").provider_id
        assert rig.intake.cancel(job)
        await rig.settle()
        assert fake.cancelled == [pid]
        assert rig.state(job) == "cancelled"

    run(tmp_path, "direct", body)


# ---------------------------------------------------------------------------- pilot mode


def test_pilot_jobs_of_an_https_manager_verify_it_against_its_ca_file(tmp_path: Path) -> None:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"

    async def body(rig: Rig, fake: FakeBatchSystem) -> None:
        await turn(rig)
        command = next(iter(fake.jobs.values())).request.command
        assert command[command.index("--url") + 1].startswith("https://")
        assert command[command.index("--ca-file") + 1] == str(cert) and "--insecure-http" not in command

    run(tmp_path, "pilot", body, tls_cert=cert, tls_key=key, pilot_ca_file=cert)


def test_pilot_jobs_hold_the_nodes_and_runs_go_to_their_pilots(tmp_path: Path) -> None:
    async def body(rig: Rig, fake: FakeBatchSystem) -> None:
        await turn(rig)
        pilots = {j.request.key: j for j in fake.jobs.values()}
        assert len(pilots) == 2, pilots  # one pilot job a node
        key = sorted(pilots)[0]
        assert pilots[key].request.nodes == 1 and "--token-file" in pilots[key].request.command
        fake.run(pilots[key].provider_id)
        await turn(rig, 5.0)
        assert rig.hub.nodes[key].state == "spawned"
        pilot = rig.hub.register(key, {"pid": 0, "host": "n1"})["pilot_id"]
        job = rig.intake.submit("alice", spec(2))
        await turn(rig)
        assert rig.hub.assign[job].launcher == key
        rig.hub.report(key, pilot, {"ack": 0, "reports": [{"job": job, "run": 1, "event": "started"}]})
        assert rig.state(job) == "running"
        # the pilot job ends under it: the pilot is lost, its run requeued, a new pilot job submitted
        fake.finish(pilots[key].provider_id)
        await turn(rig, 5.0)
        row = rig.store.job(job)
        assert row is not None and row["restarts"] == 1
        assert key not in rig.hub.nodes
        assert len([j for j in fake.jobs.values() if not j.state.terminal]) == 2

    run(tmp_path, "pilot", body)


# ----------------------------------------------------------------- yielding to local users


def test_a_waiting_job_needs_its_nodes_or_its_processors_in_whole_nodes() -> None:
    # nodes of 2 processors (and 4000 MiB): hand-computed
    assert WaitingJob(nodes=2, cpus=2).nodes_needed(2) == 2  # sbatch -N 2 -n 2: two nodes, not one
    assert WaitingJob(nodes=1, cpus=3).nodes_needed(2) == 2  # -n 3 on one node at least: two by processors
    assert WaitingJob(nodes=1, cpus=1).nodes_needed(2) == 1
    assert WaitingJob(nodes=3, cpus=8).nodes_needed(2) == 4
    assert WaitingJob(nodes=1, cpus=1, memory_per_node=3000).nodes_needed(2, 4000) == 1
    # more memory a node than any node has: no number of freed nodes starts it
    assert WaitingJob(nodes=1, cpus=1, memory_per_node=8000).nodes_needed(2, 4000) == 0


def test_pilots_yield_to_local_jobs_by_the_nodes_they_ask(tmp_path: Path) -> None:
    fake = FakeBatchSystem(nodes=4, cores_per_node=2)
    rig = Rig(tmp_path, ENV.format(mode="pilot").replace("nodes = 2", "nodes = 4"), on(fake))

    async def main() -> None:
        rig.begin()
        await rig.settle()
        rig.step()
        await turn(rig)
        site = rig.backends[0]
        assert isinstance(site, PilotJobs)
        for job in list(fake.jobs.values()):
            fake.run(job.provider_id)
        await turn(rig, 5.0)
        for key in sorted(rig.hub.nodes):
            rig.hub.register(key, {"pid": 0, "host": key})
        await turn(rig)
        assert site.online == 8 and len(site.nodes()) == 4
        # a local `sbatch -N 2 -n 2`: 2 processors, but 2 whole nodes (not ceil(2 / 2) = 1)
        fake.waiting_jobs = (WaitingJob(nodes=2, cpus=2),)
        await turn(rig, 5.0)
        assert (site.waiting_local, site.waiting_nodes, site.positions_allowed()) == (2, 2, 2)
        assert len(site.nodes()) == 2  # two idle pilots ended at once
        # and a 3-processor job on top: ceil(3 / 2) = 2 more nodes, 2 + 2 = 4
        fake.waiting_jobs = (WaitingJob(nodes=2, cpus=2), WaitingJob(nodes=1, cpus=3))
        await turn(rig, 5.0)
        assert (site.waiting_nodes, site.positions_allowed(), len(site.nodes())) == (4, 0, 0)
        # the local jobs gone, the positions are held again
        fake.waiting_jobs = ()
        await turn(rig, 5.0)
        assert site.positions_allowed() == 4 and len(site.nodes()) == 4

    try:
        asyncio.run(main())
    finally:
        rig.close()


def test_a_system_that_lists_no_job_yields_by_processors_and_keep_free_adds_to_them(tmp_path: Path) -> None:
    fake = FakeBatchSystem(nodes=4, cores_per_node=2)
    env = ENV.format(mode="pilot").replace("nodes = 2", "nodes = 4") + ""
    env = env.replace("poll_interval = 5", "poll_interval = 5\nkeep_free = 1")
    rig = Rig(tmp_path, env, on(fake))

    async def main() -> None:
        rig.begin()
        await rig.settle()
        rig.step()
        await turn(rig)
        site = rig.backends[0]
        assert isinstance(site, PilotJobs)
        assert site.positions_allowed() == 3  # keep_free = 1: ceil(1 / 2) = 1 position
        fake.waiting_local = 3  # processors only: ceil((1 + 3) / 2) = 2 positions
        await turn(rig, 5.0)
        assert (site.waiting_nodes, site.positions_allowed()) == (2, 2)
        fake.waiting_local, fake.waiting_jobs = 0, (WaitingJob(nodes=2, cpus=2),)
        await turn(rig, 5.0)  # max(ceil((1 + 2) / 2), 2) = 2
        assert site.positions_allowed() == 2
        fake.waiting_jobs = (WaitingJob(nodes=3, cpus=3),)
        await turn(rig, 5.0)  # max(ceil((1 + 3) / 2), 3) = 3
        assert site.positions_allowed() == 1

    try:
        asyncio.run(main())
    finally:
        rig.close()
