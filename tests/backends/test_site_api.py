"""Native state translation and the off-loop site worker."""

from __future__ import annotations

import asyncio
import threading
import time

from isthmus.backends.api import SiteWorker
from isthmus.backends.errors import CapacityError, SiteError, TransientError
from isthmus.model.states import JobState, translate


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
