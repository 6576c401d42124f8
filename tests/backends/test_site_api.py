"""Reconciliation after a restart and the off-loop site worker."""

from __future__ import annotations

import asyncio
import threading
import time

from isthmus.backends.api import RemoteState, SiteWorker, reconcile
from isthmus.backends.errors import CapacityError, SiteError, TransientError
from isthmus.model.states import JobState, translate


def st(pid: str, state: JobState) -> RemoteState:
    return RemoteState(pid, state, state.value)


def test_reconcile_adopts_ends_loses_and_finds_orphans():
    recorded = {"job1": "101", "job2": "102", "job3": "103", "job4": "104"}
    found = {
        "101": st("101", JobState.RUNNING),
        "102": st("102", JobState.COMPLETED),
        "104": st("104", JobState.UNKNOWN),
        "999": st("999", JobState.QUEUED),
    }
    r = reconcile(recorded, found)
    assert set(r.adopt) == {"job1", "job4"}  # unknown is never taken for ended
    assert set(r.end) == {"job2"} and r.end["job2"].state is JobState.COMPLETED
    assert r.lost == ["job3"]
    assert set(r.orphans) == {"999"}


def test_translate_unknown_native_state_warns(caplog):
    table = {"R": JobState.RUNNING}
    assert translate(table, "R", system="slurm") is JobState.RUNNING
    assert translate(table, "WEIRD", system="slurm") is JobState.UNKNOWN
    assert "unknown job state 'WEIRD'" in caplog.text


def test_site_worker_runs_off_the_loop_and_delivers_on_it():
    async def main() -> None:
        loop = asyncio.get_running_loop()
        worker = SiteWorker("slow", loop)
        got: list[object] = []
        loop_thread = threading.get_ident()
        threads: list[int] = []

        def slow(x: int) -> int:
            threads.append(threading.get_ident())
            time.sleep(0.3)
            return x * 2

        def fails() -> int:
            raise CapacityError("no room")

        def buggy() -> int:
            raise KeyError("oops")

        t0 = time.monotonic()
        worker.call(slow, 21, done=lambda r: got.append((r, threading.get_ident() == loop_thread)))
        worker.call(fails, done=got.append)
        worker.call(buggy, done=got.append)
        assert time.monotonic() - t0 < 0.1  # call() does not wait
        ticks = 0
        while len(got) < 3:
            await asyncio.sleep(0.01)
            ticks += 1
        assert ticks > 5  # the loop kept running while the site worked
        assert got[0] == (42, True) and threads[0] != loop_thread
        assert isinstance(got[1], CapacityError) and got[1].site == "slow" and got[1].retry
        assert isinstance(got[2], TransientError) and isinstance(got[2], SiteError)
        assert worker.pending == 0
        worker.close()

    asyncio.run(main())
