"""Recovery without processes: a new manager on the database and batch system of one that
stopped, with jobs running, lost and queued."""

from __future__ import annotations

import asyncio
from pathlib import Path

from rig import Rig, spec
from test_batch_sites_unit import ENV, on, turn

from isthmus.backends.fake import FakeBatchSystem
from isthmus.live.recovery import recover


def test_a_restart_adopts_running_jobs_requeues_lost_ones_and_keeps_the_queue(tmp_path: Path) -> None:
    fake = FakeBatchSystem(nodes=2, cores_per_node=2)
    env = ENV.format(mode="direct").replace('"fcfs"', '"ff"')  # first fit: no head-of-queue blocking

    async def before() -> tuple[int, int, int, float]:
        rig = Rig(tmp_path, env, on(fake))
        try:
            rig.begin()
            await rig.settle()
            kept = rig.intake.submit("alice", spec(2))
            lost = rig.intake.submit("bob", spec(2))
            queued = rig.intake.submit("carol", spec(4))
            await turn(rig)
            for job in (kept, lost):
                fake.run(fake.by_key(f"j{job}r1").provider_id)
            await turn(rig, 5.0)
            assert [rig.state(j) for j in (kept, lost, queued)] == ["running", "running", "queued"]
            submitted = rig.store.job(queued)["submit_time"]  # type: ignore[index]
            return kept, lost, queued, submitted
        finally:
            rig.close()  # a crash: nothing is cancelled

    kept, lost, queued, submitted = asyncio.run(before())
    fake.forget(fake.by_key(f"j{lost}r1").provider_id)  # purged while the manager was down

    async def after() -> None:
        rig = Rig(tmp_path, env, on(fake))
        try:
            recover(rig.ctx)
            rig.ctx.persist()
            assert set(rig.engine.entries) == {kept, lost, queued}
            assert rig.engine.entries[queued].job.submit == submitted
            rig.begin()
            await rig.settle()
            await turn(rig)
            await turn(rig, 5.0)  # the first poll: the lost job is missing
            assert rig.state(kept) == "running"
            assert rig.store.job(kept)["restarts"] == 0  # type: ignore[index]
            row = rig.store.job(lost)
            assert row is not None and row["restarts"] == 1
            fake.by_key(f"j{lost}r2")  # submitted again
            fake.finish(fake.by_key(f"j{kept}r1").provider_id)
            await turn(rig, 5.0)
            assert rig.state(kept) == "completed"
            assert rig.intake.submit("dave", spec(1)) == queued + 1  # ids go on after the stored ones
        finally:
            rig.close()

    asyncio.run(after())
