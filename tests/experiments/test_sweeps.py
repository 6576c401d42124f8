"""Sweeps that report progress in jobs, save every finished point, resume, and run on Dask."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import distributed
import pytest
from typer.testing import CliRunner

from isthmus.cli.main import app
from isthmus.experiments import koala_c, runner
from isthmus.experiments.runner import Point, Sweep, SweepStatus, policy, run_points
from isthmus.experiments.store import POINTS_FILE, PointStore, SweepExistsError, TornPointWarning
from isthmus.workloads import resolve_workload
from isthmus.workloads.conversion import IdMapper, record_from_job
from isthmus.workloads.swf import write_swf

LIMITS = (10, 20, 30, 40)


@pytest.fixture(scope="module")
def small_trace(tmp_path_factory) -> str:
    """A 300-job Lublin-Feitelson trace written as SWF."""
    path = tmp_path_factory.mktemp("trace") / "small.swf"
    ids = IdMapper()
    write_swf(path, [record_from_job(j, ids) for j in resolve_workload("lublin:jobs=300", seed=3).jobs])
    return str(path)


@pytest.fixture(scope="module")
def reference(small_trace, tmp_path_factory) -> koala_c.ExperimentResult:
    """koala-c-sets over LIMITS run serially in one go, without a points file."""
    return koala_c.koala_c_sets([small_trace], tmp_path_factory.mktemp("ref"), limits_min=LIMITS, workers=1)


def _same(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows without the wall-clock time of their simulation, the only field that differs between runs."""
    return [{k: v for k, v in r.items() if k != "simulation_seconds"} for r in rows]


def _csv(path: Path) -> list[dict[str, str]]:
    with open(path) as f:
        return _same(list(csv.DictReader(f)))  # type: ignore[arg-type]


def _lines(path: Path) -> int:
    """Complete lines of a points file (a line cut by a kill has no newline)."""
    return path.read_bytes().count(b"\n") if path.exists() else 0


class Counting:
    """An evaluate_point that counts its calls and can stop the sweep like a Ctrl-C after `stop_after`."""

    def __init__(self, stop_after: int | None = None) -> None:
        self.calls: list[Point] = []
        self.stop_after = stop_after
        self.inner = runner.evaluate  # taken before a test patches runner.evaluate with this object

    def __call__(self, point: Point) -> dict[str, Any]:
        if self.stop_after is not None and len(self.calls) == self.stop_after:
            raise KeyboardInterrupt
        self.calls.append(point)
        return self.inner(point)


# ---------------------------------------------------------------------------------- progress


def test_eta_weights_points_by_their_jobs(small_trace):
    """Points of 50, 100 and 150 jobs at 10 jobs/s: after the first, 250 jobs are left, so 25 s (not 2 x 5 s)."""
    now = [0.0]
    points = [
        Point(small_trace, "koala-c-multicluster:k=1", policy("ff"), policy("none"), first=n, labels=(("n", n),))
        for n in (50, 100, 150)
    ]

    def fake(point: Point) -> dict[str, Any]:
        assert point.first is not None
        now[0] += point.first / 10.0
        return {"n": point.first}

    seen: list[SweepStatus] = []
    rows = run_points(points, workers=1, evaluate_point=fake, progress=seen.append, clock=lambda: now[0])
    assert rows == [{"n": 50}, {"n": 100}, {"n": 150}]
    assert [(s.points_done, s.jobs_done, s.jobs_total) for s in seen] == [
        (0, 0, 300),
        (1, 50, 300),
        (2, 150, 300),
        (3, 300, 300),
    ]
    assert seen[0].eta_seconds is None and seen[0].jobs_per_second is None
    assert seen[1].jobs_per_second == pytest.approx(10.0)
    assert seen[1].eta_seconds == pytest.approx(25.0)
    assert seen[2].eta_seconds == pytest.approx(15.0)
    assert seen[3].eta_seconds == 0.0


def test_a_pool_gets_the_heaviest_points_first_and_rows_keep_the_points_order(small_trace):
    """Points are submitted by falling number of jobs (equal ones in their order), so that the
    last to finish on two workers are short ones; the rows still come back in the points' order."""
    from concurrent.futures import Future, ThreadPoolExecutor

    submitted: list[int] = []

    class Recording(ThreadPoolExecutor):
        def submit(self, fn, /, *args, **kwargs) -> Future:  # type: ignore[no-untyped-def, override]
            submitted.append(args[0].first)
            return super().submit(fn, *args, **kwargs)

    sizes = (50, 150, 100, 150, 20)
    points = [
        Point(small_trace, "koala-c-multicluster:k=1", policy("ff"), policy("none"), first=n, labels=(("i", i),))
        for i, n in enumerate(sizes)
    ]
    with Recording(max_workers=1) as pool:
        rows = run_points(points, executor=pool, evaluate_point=lambda p: {"i": dict(p.labels)["i"]})
    assert submitted == [150, 150, 100, 50, 20]
    assert rows == [{"i": i} for i in range(len(sizes))]


def test_reused_jobs_do_not_inflate_the_rate(small_trace, tmp_path):
    now = [0.0]
    points = [
        Point(small_trace, "koala-c-multicluster:k=1", policy("ff", seed=i), policy("none"), first=100) for i in (1, 2)
    ]

    def fake(point: Point) -> dict[str, Any]:
        now[0] += 20.0
        return {"n": point.first}

    with PointStore.open(tmp_path / POINTS_FILE) as store:
        run_points(points[:1], workers=1, evaluate_point=fake, store=store, experiment="x")
    seen: list[SweepStatus] = []
    with PointStore.open(tmp_path / POINTS_FILE, resume=True) as store:
        run_points(
            points,
            workers=1,
            evaluate_point=fake,
            store=store,
            experiment="x",
            progress=seen.append,
            clock=lambda: now[0],
        )
    assert (seen[0].points_reused, seen[0].jobs_done, seen[0].eta_seconds) == (1, 100, None)
    assert seen[-1].jobs_per_second == pytest.approx(5.0)  # 100 new jobs in 20 s; the 100 reused ones not counted


# ------------------------------------------------------------------------------------- store


def test_store_appends_whole_lines_and_drops_a_torn_last_one(small_trace, tmp_path):
    path = tmp_path / POINTS_FILE
    a = Point(small_trace, "e", policy("ff"), labels=(("k", 1),))
    b = Point(small_trace, "e", policy("ff", seed=2), labels=(("k", 1),))
    with PointStore.open(path) as store:
        store.add("exp", a, 300, {"k": 1, "wait": 1.5, "none": None})
    with open(path, "a") as f:
        f.write('{"key": {"experiment": "exp", "trace"')  # a kill in the middle of a line
    with pytest.warns(TornPointWarning, match=r"points.jsonl:2: ignoring a torn last line"):
        store = PointStore.open(path, resume=True)
    with store:
        assert store.get("exp", a) is not None and store.get("exp", b) is None
        assert store.get("other-experiment", a) is None  # the experiment is part of the key
        assert any("torn" in n for n in store.notes)
        store.add("exp", b, 300, {"k": 1, "wait": 2.0})
    with PointStore.open(path, resume=True) as store:
        saved = store.get("exp", a)
        assert saved is not None and saved.row == {"k": 1, "wait": 1.5, "none": None} and saved.jobs == 300
        assert store.get("exp", b) is not None
    assert _lines(path) == 2 and path.read_text().endswith("\n")


def test_store_refuses_to_mix_runs_and_names_bad_lines(small_trace, tmp_path):
    path = tmp_path / POINTS_FILE
    a = Point(small_trace, "e", policy("ff"))
    with PointStore.open(path) as store:
        store.add("exp", a, 3, {"x": 1})
        with pytest.raises(ValueError, match="another running sweep"):
            PointStore.open(path, resume=True)
    with pytest.raises(SweepExistsError, match=r"1 finished point.*--resume.*--force"):
        PointStore.open(path)
    with pytest.raises(ValueError, match="exclude each other"):
        PointStore.open(path, resume=True, force=True)
    with PointStore.open(path, force=True) as store:
        assert store.get("exp", a) is None
    assert path.read_text() == ""
    PointStore.open(path).close()  # an empty file (nothing finished yet) is not refused
    path.write_text('{"key": {}, "jobs": 1, "row": {}}\nnot json\n{"key": {}, "jobs": 1, "row": {}}\n')
    with pytest.raises(ValueError, match=r"points.jsonl:2: not a JSON line"):
        PointStore.open(path, resume=True)
    path.write_text('{"key": {}, "jobs": "many", "row": {}}\n')
    with pytest.raises(ValueError, match=r"points.jsonl:1: field 'jobs' missing or not a int"):
        PointStore.open(path, resume=True)
    empty = tmp_path / "new" / POINTS_FILE
    with PointStore.open(empty, resume=True) as store:
        assert store.notes == [f"nothing to resume in {empty}: every point is computed"]


# ------------------------------------------------------------------------------------ resume


def test_interrupted_sweep_resumes_without_recomputing(small_trace, reference, tmp_path):
    first = Counting(stop_after=2)
    with PointStore.open(tmp_path / POINTS_FILE) as store, pytest.raises(KeyboardInterrupt):
        koala_c.koala_c_sets(
            [small_trace], tmp_path, limits_min=LIMITS, sweep=Sweep(workers=1, store=store, evaluate_point=first)
        )
    assert _lines(tmp_path / POINTS_FILE) == 2
    second = Counting()
    with PointStore.open(tmp_path / POINTS_FILE, resume=True) as store:
        res = koala_c.koala_c_sets(
            [small_trace], tmp_path, limits_min=LIMITS, sweep=Sweep(workers=1, store=store, evaluate_point=second)
        )
    assert [dict(p.labels)["limit_min"] for p in second.calls] == [30, 40]  # only the two unfinished points
    assert _same(res.rows) == _same(reference.rows)
    assert res.markdown == reference.markdown
    assert _csv(res.files["csv"]) == _csv(reference.files["csv"])
    assert _lines(tmp_path / POINTS_FILE) == 4


def test_cli_resumes_a_killed_run(small_trace, reference, tmp_path, monkeypatch):
    out = tmp_path / "sets"
    limits = ",".join(map(str, LIMITS))
    args = ["experiment", "koala-c-sets", "-t", small_trace, "-o", str(out), "--limits", limits, "-j", "1"]
    # A separate process killed with SIGKILL as soon as its first point is on disk.
    proc = subprocess.Popen(
        [sys.executable, "-c", "from isthmus.cli.main import app; app()", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "COLUMNS": "120"},
    )
    deadline = time.monotonic() + 60
    while _lines(out / POINTS_FILE) < 1 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    finished = _lines(out / POINTS_FILE)
    assert 1 <= finished < len(LIMITS), "the run ended before it could be killed"
    cli = CliRunner()
    refused = cli.invoke(app, args)
    assert refused.exit_code == 2 and f"already holds {finished} finished point(s)" in " ".join(refused.output.split())
    counting = Counting()
    monkeypatch.setattr(runner, "evaluate", counting)
    resumed = cli.invoke(app, [*args, "--resume"])
    assert resumed.exit_code == 0, resumed.output
    assert len(counting.calls) == len(LIMITS) - finished
    assert f"({finished} reused from" in " ".join(resumed.output.split())
    assert _csv(out / "koala-c-sets.csv") == _csv(reference.files["csv"])
    assert (out / "summary.md").read_text() == reference.markdown
    again = cli.invoke(app, [*args, "--resume"])
    assert again.exit_code == 0 and len(counting.calls) == len(LIMITS) - finished  # nothing left to compute
    assert cli.invoke(app, [*args, "--resume", "--force"]).exit_code == 2


# -------------------------------------------------------------------------------------- dask


def test_sweep_on_a_dask_scheduler_equals_the_serial_run(small_trace, reference, tmp_path):
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None, host="127.0.0.1"
    ) as cluster:
        out = tmp_path / "dask"
        result = CliRunner().invoke(
            app,
            [
                "experiment",
                "koala-c-sets",
                "-t",
                small_trace,
                "-o",
                str(out),
                "--limits",
                ",".join(map(str, LIMITS)),
                "--scheduler",
                cluster.scheduler_address,
                "--json",
            ],
        )
        assert result.exit_code == 0, result.output
        with distributed.Client(cluster) as client:  # the points ran in the cluster's worker processes
            imported = client.run(lambda: "isthmus.experiments.runner" in sys.modules)
        assert len(imported) == 2 and any(imported.values())
    report = json.loads(result.stdout[result.stdout.index("{") :])
    assert _same(report["rows"]) == _same(reference.rows)
    assert _csv(out / "koala-c-sets.csv") == _csv(reference.files["csv"])
    assert _lines(out / POINTS_FILE) == len(LIMITS)


def test_workers_run_local_processes_and_scheduler_local_a_local_dask_cluster(small_trace, reference, tmp_path):
    args = ["experiment", "koala-c-sets", "-t", small_trace, "--limits", ",".join(map(str, LIMITS))]
    pool = CliRunner().invoke(app, [*args, "-o", str(tmp_path / "pool"), "--workers", "2"])
    assert pool.exit_code == 0, pool.output
    assert "in 2 local worker processes" in " ".join(pool.output.split())
    assert _csv(tmp_path / "pool" / "koala-c-sets.csv") == _csv(reference.files["csv"])
    out = tmp_path / "local"
    result = CliRunner().invoke(app, [*args, "-o", str(out), "--scheduler", "local", "--workers", "2"])
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    assert "on a local Dask cluster at tcp://127.0.0.1:" in said and "with 2 worker(s)" in said
    assert _csv(out / "koala-c-sets.csv") == _csv(reference.files["csv"])
    both = CliRunner().invoke(app, [*args, "-o", str(out), "--workers", "2", "--scheduler", "tcp://127.0.0.1:1"])
    assert both.exit_code == 2 and "exclude each other" in both.output


def test_the_local_dask_cluster_runs_without_the_profiler():
    """The local cluster's workers get LOCAL_DASK_CONFIG (no stack sampling of the simulations)."""
    import dask

    from isthmus.experiments.cluster import dask_executor

    with dask_executor(workers=1) as (_, info), distributed.Client(info.address) as client:
        seen = client.run(lambda: dask.config.get("distributed.worker.profile.enabled"))
    assert list(seen.values()) == [False]


def _sleep_and_report(path: str) -> int:
    """Write this process's id to `path`, then sleep far longer than any test."""
    Path(path).write_text(str(os.getpid()))
    time.sleep(600)
    return 0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a terminated child not yet reaped is a zombie: not running
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1][0] != "Z"
    except OSError:
        return False


def test_a_process_pool_left_by_an_error_stops_its_running_workers(tmp_path):
    """Ctrl-C or a failed point must not wait for the points still running: their processes are
    terminated, and the pool's exit is immediate."""
    from isthmus.experiments.cluster import process_pool

    marker = tmp_path / "pid"
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt), process_pool(2) as (pool, info):
        assert info.workers == 2
        pool.submit(_sleep_and_report, str(marker))
        deadline = time.monotonic() + 60
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        raise KeyboardInterrupt
    assert time.monotonic() - started < 60
    pid = int(marker.read_text())
    deadline = time.monotonic() + 10
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(pid)


def _sweep_cli(small_trace: str, out: Path) -> tuple[list[str], subprocess.Popen[bytes]]:
    """koala-c-sets over LIMITS on two local workers, started as the installed `isthmus` command
    starts (`isthmus.cli.run`), as a program of its own process group (a terminal's Ctrl-C
    reaches the whole group); returns its arguments (without -j) and the process."""
    args = ["experiment", "koala-c-sets", "-t", small_trace, "-o", str(out), "--limits", ",".join(map(str, LIMITS))]
    proc = subprocess.Popen(
        [sys.executable, "-c", "from isthmus.cli import run; run()", *args, "-j", "2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "COLUMNS": "200"},
        start_new_session=True,
    )
    return args, proc


def test_ctrl_c_stops_a_sweep_on_local_processes_and_resume_finishes_it(small_trace, reference, tmp_path):
    """SIGINT to the whole process group (what a terminal's Ctrl-C does): the command says how to
    resume and exits 130 without tracebacks from its workers; --resume computes the rest."""
    out = tmp_path / "sets"
    args, proc = _sweep_cli(small_trace, out)
    deadline = time.monotonic() + 60
    while _lines(out / POINTS_FILE) < 1 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    os.killpg(proc.pid, signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    said = " ".join((stdout + stderr).decode().split())
    if proc.returncode == 0:
        pytest.skip("the sweep finished before it could be interrupted")
    assert proc.returncode == 130, said
    assert "run the same command with --resume" in said and "Traceback" not in said
    resumed = CliRunner().invoke(app, [*args, "-j", "2", "--resume"])
    assert resumed.exit_code == 0, resumed.output
    assert _csv(out / "koala-c-sets.csv") == _csv(reference.files["csv"])


def _die_once(marker: str, value: int) -> int:
    """Kill this worker process the first time (`marker` not yet written), else return `value`."""
    if not os.path.exists(marker):
        Path(marker).write_text(str(os.getpid()))
        os.kill(os.getpid(), signal.SIGKILL)
    return value


def test_a_worker_killed_from_outside_is_replaced_and_its_points_run_again(tmp_path):
    """SIGKILL of a worker (the out-of-memory killer, an operator) breaks a ProcessPoolExecutor for
    good; the sweep's pool starts new workers, runs the lost calls again and says so."""
    from isthmus.experiments.cluster import RespawningPool

    said: list[str] = []
    pool = RespawningPool(2, notice=said.append)
    try:
        futures = [pool.submit(_die_once, str(tmp_path / "died"), k) for k in range(6)]
        assert [f.result(timeout=120) for f in futures] == list(range(6))
    finally:
        pool.shutdown()
    assert pool.breaks == 1 and len(said) == 1 and "a worker process died" in said[0], said


def test_a_failing_notice_does_not_stop_the_calls(tmp_path):
    from isthmus.experiments.cluster import RespawningPool

    def broken_notice(message: str) -> None:
        raise OSError("the terminal is gone")

    pool = RespawningPool(1, notice=broken_notice)
    try:
        assert pool.submit(_die_once, str(tmp_path / "died"), 7).result(timeout=120) == 7
    finally:
        pool.shutdown()
    assert pool.breaks == 1


def _always_die() -> int:
    os.kill(os.getpid(), signal.SIGKILL)
    return 0


def test_workers_that_keep_dying_fail_the_call_after_the_allowed_restarts():
    from isthmus.experiments.cluster import RespawningPool, WorkersDiedError

    said: list[str] = []
    pool = RespawningPool(1, allowed_breaks=2, notice=said.append)
    try:
        with pytest.raises(WorkersDiedError, match="died 3 times"):
            pool.submit(_always_die).result(timeout=120)
    finally:
        pool.shutdown()
    assert pool.breaks == 2 and len(said) == 2


def _workers_of(pid: int) -> list[int]:
    """The spawned pool workers among the children of process `pid`."""
    found = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            cmdline = (d / "cmdline").read_bytes()
        except (OSError, IndexError, ValueError):
            continue
        if ppid == pid and b"multiprocessing.spawn" in cmdline:
            found.append(int(d.name))
    return found


def test_cli_sweep_survives_a_worker_killed_from_outside(small_trace, reference, tmp_path):
    """`-j 2` with one worker SIGKILLed mid-sweep: the command says so, finishes, and its CSV is the serial run's."""
    out = tmp_path / "sets"
    _, proc = _sweep_cli(small_trace, out)
    deadline = time.monotonic() + 60
    while not (workers := _workers_of(proc.pid)) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    killed = False
    if workers:
        try:
            os.kill(workers[0], signal.SIGKILL)
            killed = True
        except ProcessLookupError:
            pass
    stdout, stderr = proc.communicate(timeout=300)
    said = " ".join((stdout + stderr).decode().split())
    assert proc.returncode == 0, said
    if not killed:
        pytest.skip("the sweep finished before a worker could be killed")
    assert "a worker process died" in said and "restart 1 of at most 3" in said, said
    assert _csv(out / "koala-c-sets.csv") == _csv(reference.files["csv"])


def test_ctrl_c_while_the_workers_start_is_no_traceback_of_theirs(small_trace, tmp_path):
    """Ctrl-C reaches the whole process group, workers starting up included (importing, before
    their initializer ignores it): they start with SIGINT blocked, so only the command speaks."""
    out = tmp_path / "sets"
    _, proc = _sweep_cli(small_trace, out)
    deadline = time.monotonic() + 60
    while not _workers_of(proc.pid) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    os.killpg(proc.pid, signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    said = (stdout + stderr).decode()
    if proc.returncode == 0:
        pytest.skip("the sweep finished before it could be interrupted")
    assert proc.returncode == 130 and "Traceback" not in said and "KeyboardInterrupt" not in said, said


def _sigint_blocked_here() -> bool:
    return signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, [])


def _report_mask(queue: Any) -> None:
    queue.put(_sigint_blocked_here())


def test_workers_start_with_sigint_blocked_and_then_ignore_it():
    import multiprocessing

    from isthmus.experiments.cluster import _sigint_blocked, process_pool

    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    with _sigint_blocked():
        child = ctx.Process(target=_report_mask, args=(queue,))
        child.start()
    assert not _sigint_blocked_here()  # given back to this thread
    assert queue.get(timeout=60) is True  # inherited through the spawn's exec
    child.join(60)
    with process_pool(1) as (pool, _):
        assert pool.submit(_sigint_state).result(timeout=60) == (False, True)


def _sigint_state() -> tuple[bool, bool]:
    """(SIGINT blocked, SIGINT ignored) in this worker once its initializer ran."""
    return _sigint_blocked_here(), signal.getsignal(signal.SIGINT) is signal.SIG_IGN


def test_a_ctrl_c_while_a_submission_starts_a_worker_is_raised_after_it():
    """The KeyboardInterrupt of a Ctrl-C that arrives while a worker is being started is raised
    once the start is over, never inside it (it cut the worker's start-up data, which printed
    the worker's `EOFError` traceback); the handler in place before is back afterwards."""
    from isthmus.experiments.cluster import _sigint_deferred

    before = signal.getsignal(signal.SIGINT)
    reached_the_end = False
    with pytest.raises(KeyboardInterrupt), _sigint_deferred():
        signal.raise_signal(signal.SIGINT)
        for _ in range(1000):  # bytecodes enough for Python to have run a handler
            pass
        reached_the_end = True
    assert reached_the_end
    assert signal.getsignal(signal.SIGINT) is before
    with _sigint_deferred():
        pass  # nothing caught, nothing raised
    with pytest.raises(KeyboardInterrupt) as interrupted, _sigint_deferred():
        signal.raise_signal(signal.SIGINT)
        raise OSError("the block failed after the Ctrl-C")
    assert isinstance(interrupted.value.__context__, OSError)  # not lost behind the block's error


def test_a_ctrl_c_while_pools_start_their_workers_prints_no_worker_traceback(tmp_path):
    """One Ctrl-C per pool, sent a little later each time (0 to 15 ms) while the pool starts its
    workers: the caller sees each KeyboardInterrupt, and no worker prints a traceback (before the
    fix, about a third of the pools had a worker print `EOFError: Ran out of input`)."""
    script = tmp_path / "submit.py"
    script.write_text(
        "import os, signal, threading, time\n"
        "from isthmus.experiments.cluster import process_pool\n"
        "def ctrl_c(delay):\n"
        "    time.sleep(delay)\n"
        "    os.kill(os.getpid(), signal.SIGINT)\n"
        "if __name__ == '__main__':\n"
        "    for i in range(30):\n"
        "        try:\n"
        "            with process_pool(2) as (pool, _):\n"
        "                threading.Thread(target=ctrl_c, args=(i * 0.0005,), daemon=True).start()\n"
        "                while True:\n"
        "                    pool.submit(abs, -1)\n"
        "        except KeyboardInterrupt:\n"
        "            print('interrupted', flush=True)\n"
    )
    proc = subprocess.run(
        [sys.executable, str(script)], check=False, capture_output=True, text=True, timeout=120, start_new_session=True
    )
    assert proc.stdout.split() == ["interrupted"] * 30, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
