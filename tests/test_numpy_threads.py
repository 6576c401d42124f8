"""isthmus.numpy_threads: the computing commands and sweep workers import NumPy with OpenBLAS on
one thread, and leave the environment of the processes they start as it was."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from isthmus.numpy_threads import BLAS_THREAD_VARIABLES

CORES = len(os.sched_getaffinity(0))
THREADS = "print(len(os.listdir('/proc/self/task')), os.environ.get('OPENBLAS_NUM_THREADS'))"


def _run(code: str, **env: str) -> list[str]:
    """Standard output words of `code` run in a fresh interpreter with `env` added."""
    clean = {k: v for k, v in os.environ.items() if k not in BLAS_THREAD_VARIABLES}
    proc = subprocess.run(
        [sys.executable, "-c", "import os\n" + code], capture_output=True, text=True, check=True, env={**clean, **env}
    )
    return proc.stdout.split()


def test_numpy_alone_starts_a_blas_thread_per_core() -> None:
    """What the module prevents (and the check that the thread count below can tell)."""
    if CORES < 2:
        pytest.skip("one core: OpenBLAS starts no thread of its own")
    assert _run("import numpy\n" + THREADS) == [str(CORES), "None"]


def test_one_thread_and_the_environment_given_back() -> None:
    code = "from isthmus.numpy_threads import import_numpy_single_threaded as f\nprint(f(), f())\n" + THREADS
    assert _run(code) == ["True", "False", "1", "None"]


@pytest.mark.parametrize("name", BLAS_THREAD_VARIABLES)
def test_a_thread_count_the_user_set_wins(name: str) -> None:
    if CORES < 2:
        pytest.skip("one core")
    code = "from isthmus.numpy_threads import import_numpy_single_threaded as f\nf()\n" + THREADS
    assert _run(code, **{name: "2"}) == ["2", "2" if name == "OPENBLAS_NUM_THREADS" else "None"]


def test_a_computing_command_loads_numpy_single_threaded_and_a_live_one_does_not_load_it() -> None:
    code = (
        "import sys, typer\nfrom isthmus.cli.main import app\ngroup = typer.main.get_group(app)\n"
        "group.get_command(None, 'submit')\nprint('numpy' in sys.modules)\n"
        "group.get_command(None, 'simulate')\n" + THREADS
    )
    assert _run(code) == ["False", "1", "None"]


def _worker_threads() -> tuple[int, str | None]:
    """The threads of this worker process once a point's modules (NumPy) are loaded."""
    import numpy  # noqa: F401

    return len(os.listdir("/proc/self/task")), os.environ.get("OPENBLAS_NUM_THREADS")


def test_sweep_workers_import_numpy_single_threaded(monkeypatch: pytest.MonkeyPatch) -> None:
    from isthmus.experiments.cluster import process_pool

    for name in BLAS_THREAD_VARIABLES:  # (a Dask test in this process may have set them)
        monkeypatch.delenv(name, raising=False)

    with process_pool(2) as (pool, _):
        seen = {pool.submit(_worker_threads).result(timeout=120) for _ in range(4)}
    assert seen == {(1, None)}
