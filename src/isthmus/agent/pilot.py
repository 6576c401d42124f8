"""The pilot (KOALA-CS launcher, worker agent): registers with the manager and runs the tasks it gets.

Protocol (HTTP, JSON, `Authorization: Bearer <pilot token>`):

* ``POST /pilot/register`` with the runs it is executing and its unacknowledged reports;
  answers a registration id. Sent at start and again whenever the manager answers 409
  (it restarted and forgot the registration).
* ``GET /pilot/poll?pilot_id=..&ack=N&wait=W``: long poll, doubling as the heartbeat; answers
  the commands after sequence number N: ``start`` (a run: command, args, env, cwd, output
  files, nodefile, hosts), ``kill`` (a run), ``exit``.
* ``POST /pilot/report``: ``started`` and ``ended`` (exit code, runtime) events, retried until
  acknowledged.

Each run is a child process in its own session (`start_new_session=True`), so killing it
kills its whole process group. The pilot exits when told to, when its lifetime ends, on
SIGTERM/SIGINT, and when the manager has been unreachable for longer than `timeout` seconds
(a pilot of a dead manager must not run forever); it kills its runs before exiting.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

EXIT_OK = 0
EXIT_UNREACHABLE = 3
EXIT_REFUSED = 4


class _Stop(Exception):  # noqa: N818
    """Raised in the main thread by SIGTERM/SIGINT."""


@dataclass
class Task:
    """A run executing on this pilot."""

    job: int
    run: int
    proc: subprocess.Popen[bytes]
    started: float
    killed: bool = False


@dataclass
class PilotConfig:
    """What a pilot needs to know."""

    url: str
    node: str
    token: str
    slots: int = 1
    timeout: float = 30.0  # exit when the manager is unreachable this long
    lifetime: float | None = None  # exit (killing runs) after this many seconds
    kill_grace: float = 2.0


@dataclass
class Pilot:
    """One pilot process; `run()` returns its exit status."""

    cfg: PilotConfig
    tasks: dict[tuple[int, int], Task] = field(default_factory=dict)
    pending: list[dict[str, Any]] = field(default_factory=list)
    pilot_id: str | None = None
    last_seq: int = 0
    poll_wait: float = 10.0
    last_ok: float = field(default_factory=time.monotonic)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._cv = threading.Condition(self._lock)
        self._done = False
        self._born = time.monotonic()
        headers = {"Authorization": f"Bearer {self.cfg.token}"}
        self._http = httpx.Client(base_url=self.cfg.url, headers=headers, timeout=httpx.Timeout(10.0, read=70.0))
        self._http_report = httpx.Client(base_url=self.cfg.url, headers=headers, timeout=10.0)

    # ------------------------------------------------------------------------- main loop

    def run(self) -> int:
        """Register, then poll and obey until told to exit or the manager is gone for too long."""

        def _on_signal(signum: int, _frame: Any) -> None:
            raise _Stop(signal.Signals(signum).name)

        signal.signal(signal.SIGTERM, _on_signal)
        signal.signal(signal.SIGINT, _on_signal)
        reporter = threading.Thread(target=self._reporter, name="reporter", daemon=True)
        reporter.start()
        status = EXIT_OK
        try:
            status = self._loop()
        except _Stop as exc:
            self._log(f"stopping on {exc}")
        finally:
            self._shutdown()
        return status

    def _loop(self) -> int:
        while True:
            if self._unreachable_too_long():
                self._log(f"manager unreachable for more than {self.cfg.timeout:g} s: exiting")
                return EXIT_UNREACHABLE
            if self.cfg.lifetime is not None and time.monotonic() - self._born > self.cfg.lifetime:
                self._log("lifetime over: exiting")
                return EXIT_OK
            if self.pilot_id is None:
                code = self._register()
                if code is not None:
                    return code
                continue
            try:
                wait = self.poll_wait
                if self.cfg.lifetime is not None:
                    wait = max(0.0, min(wait, self.cfg.lifetime - (time.monotonic() - self._born)))
                r = self._http.get(
                    "/pilot/poll", params={"pilot_id": self.pilot_id, "ack": self.last_seq, "wait": wait}
                )
            except httpx.HTTPError:
                time.sleep(0.2)
                continue
            if r.status_code == 409:
                self._contact()
                self.pilot_id = None
                continue
            if r.status_code in (401, 403, 410):
                self._log(f"manager refused this pilot ({r.status_code}): exiting")
                return EXIT_REFUSED
            if r.status_code != 200:
                time.sleep(0.2)
                continue
            self._contact()
            started: list[dict[str, Any]] = []  # reported together once every start is done
            waiting: list[Task] = []
            try:
                for cmd in r.json().get("commands", []):
                    seq = int(cmd.get("seq", 0))
                    if seq <= self.last_seq:
                        continue
                    self.last_seq = seq
                    op = cmd.get("op")
                    if op == "start":
                        reports, task = self._start(cmd)
                        started.extend(reports)
                        if task is not None:
                            waiting.append(task)
                    elif op == "kill":
                        self._kill(int(cmd["job"]), int(cmd["run"]))
                    elif op == "exit":
                        self._log(f"told to exit: {cmd.get('reason', '')}")
                        return EXIT_OK
            finally:
                if started:
                    self._queue(*started)
                for task in waiting:  # after the started reports: an end is never reported first
                    threading.Thread(target=self._wait, args=(task,), daemon=True, name=f"wait-{task.job}").start()

    def _register(self) -> int | None:
        with self._lock:
            running = [{"job": j, "run": r} for (j, r), t in self.tasks.items() if not t.killed]
            reports = list(self.pending)
        body = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "slots": self.cfg.slots,
            "running": running,
            "reports": reports,
        }
        try:
            r = self._http.post("/pilot/register", json=body)
        except httpx.HTTPError:
            time.sleep(0.2)
            return None
        if r.status_code in (401, 403, 410):
            self._log(f"registration refused ({r.status_code}: {r.text}): exiting")
            return EXIT_REFUSED
        if r.status_code != 200:
            time.sleep(0.2)
            return None
        self._contact()
        data = r.json()
        with self._lock:
            self.pilot_id = data["pilot_id"]
            self.last_seq = 0
            self.poll_wait = float(data.get("poll_wait", self.poll_wait))
            self.cfg.timeout = float(data.get("pilot_timeout", self.cfg.timeout))
            sent = {(p["job"], p["run"], p["event"]) for p in reports}
            self.pending = [p for p in self.pending if (p["job"], p["run"], p["event"]) not in sent]
        self._log(f"registered as {self.pilot_id} for node {self.cfg.node}")
        return None

    def _contact(self) -> None:
        with self._lock:
            self.last_ok = time.monotonic()

    def _unreachable_too_long(self) -> bool:
        with self._lock:
            return time.monotonic() - self.last_ok > self.cfg.timeout

    # ------------------------------------------------------------------------------ runs

    def _start(self, cmd: dict[str, Any]) -> tuple[list[dict[str, Any]], Task | None]:
        """Start a run; returns the reports to send (started, and ended when it could not start)
        and the task to wait for.

        The caller queues the reports after the other commands of the same poll, then starts
        the tasks' wait threads: a burst of starts is not slowed down by the reporter waking up
        after each one, and a run's end is never reported before its start.
        """
        job, run = int(cmd["job"]), int(cmd["run"])
        if (job, run) in self.tasks:
            return [], None
        spool = Path(cmd["spool"])
        spool.mkdir(parents=True, exist_ok=True)
        nodefile = Path(cmd["nodefile"])
        nodefile.write_text("".join(f"{h}\n" for h in cmd.get("hosts", [])))
        env = {k: v for k, v in os.environ.items() if k != "ISTHMUS_PILOT_TOKEN"}
        env.update(cmd.get("env", {}))
        env["ISTHMUS_NODEFILE"] = str(nodefile)
        env["ISTHMUS_PILOT_NODE"] = self.cfg.node
        started = time.time()
        t0 = time.monotonic()
        with open(cmd["stdout"], "wb") as out, open(cmd["stderr"], "wb") as err:
            try:
                proc = subprocess.Popen(
                    [cmd["command"], *cmd.get("args", [])],
                    cwd=cmd.get("cwd") or str(spool),
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=err,
                    start_new_session=True,
                )
            except OSError as exc:
                err.write(f"isthmus pilot: cannot start {cmd['command']!r}: {exc}\n".encode())
                err.flush()
                code = 127 if isinstance(exc, FileNotFoundError) else 126
                return [
                    {"job": job, "run": run, "event": "started", "time": started},
                    {"job": job, "run": run, "event": "ended", "time": time.time(), "exit_code": code, "runtime": 0.0},
                ], None
        task = Task(job, run, proc, t0)
        with self._lock:
            self.tasks[(job, run)] = task
        return [{"job": job, "run": run, "event": "started", "time": started}], task

    def _wait(self, task: Task) -> None:
        code = task.proc.wait()
        runtime = time.monotonic() - task.started
        if code < 0:
            code = 128 - code  # killed by signal N: 128 + N, as shells report it
        with self._cv:  # one step: a run is always either in `tasks` or in `pending`
            self.tasks.pop((task.job, task.run), None)
            self.pending.append(
                {
                    "job": task.job,
                    "run": task.run,
                    "event": "ended",
                    "time": time.time(),
                    "exit_code": code,
                    "runtime": runtime,
                }
            )
            self._cv.notify()

    def _kill(self, job: int, run: int) -> None:
        with self._lock:
            task = self.tasks.get((job, run))
        if task is None:
            return
        task.killed = True
        _signal_group(task.proc.pid, signal.SIGTERM)

        def _hard() -> None:
            if task.proc.poll() is None:
                _signal_group(task.proc.pid, signal.SIGKILL)

        timer = threading.Timer(self.cfg.kill_grace, _hard)
        timer.daemon = True
        timer.start()

    def _queue(self, *reports: dict[str, Any]) -> None:
        with self._cv:
            self.pending.extend(reports)
            self._cv.notify()

    # --------------------------------------------------------------------------- reports

    def _reporter(self) -> None:
        while True:
            with self._cv:
                while not self.pending and not self._done:
                    self._cv.wait(0.5)
                if self._done and not self.pending:
                    return
                batch = list(self.pending)
                pilot_id = self.pilot_id
                ack = self.last_seq
            if pilot_id is None:
                time.sleep(0.05)
                continue
            try:
                r = self._http_report.post("/pilot/report", json={"pilot_id": pilot_id, "ack": ack, "reports": batch})
            except httpx.HTTPError:
                time.sleep(0.2)
                if self._done:
                    return
                continue
            if r.status_code == 200:
                self._contact()
                with self._lock:
                    self.pending = self.pending[len(batch) :]
            else:
                time.sleep(0.1)
                if self._done:
                    return

    # --------------------------------------------------------------------------- leaving

    def _shutdown(self) -> None:
        with self._lock:
            tasks = list(self.tasks.values())
        for t in tasks:
            _signal_group(t.proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + self.cfg.kill_grace
        for t in tasks:
            with contextlib.suppress(subprocess.TimeoutExpired):
                t.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        for t in tasks:
            _signal_group(t.proc.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                t.proc.wait(timeout=1)
        # give the reporter a moment to deliver the last reports, if the manager is there
        end = time.monotonic() + 1.0
        while time.monotonic() < end:
            with self._lock:
                if not self.pending:
                    break
            time.sleep(0.05)
        with self._cv:
            self._done = True
            self._cv.notify_all()
        self._http.close()
        self._http_report.close()

    def _log(self, msg: str) -> None:
        print(f"{time.strftime('%H:%M:%S')} pilot {self.cfg.node}[{os.getpid()}]: {msg}", file=sys.stderr, flush=True)


def _signal_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def main(argv: list[str] | None = None) -> int:
    """`python -m isthmus.agent --url URL --node KEY [--slots N] [--timeout S] [--lifetime S]`.

    The token comes from ISTHMUS_PILOT_TOKEN (or --token-file), never from the command line.
    """
    import argparse

    ap = argparse.ArgumentParser(prog="isthmus agent", description="isthmus pilot")
    ap.add_argument("--url", required=True)
    ap.add_argument("--node", required=True)
    ap.add_argument("--slots", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=30.0)
    ap.add_argument("--lifetime", type=float, default=None)
    ap.add_argument("--token-file", default=None)
    ns = ap.parse_args(argv)
    token = os.environ.get("ISTHMUS_PILOT_TOKEN", "")
    if ns.token_file:
        token = Path(ns.token_file).read_text().strip()
    if not token:
        print("isthmus agent: no token (set ISTHMUS_PILOT_TOKEN or use --token-file)", file=sys.stderr)
        return 2
    cfg = PilotConfig(url=ns.url, node=ns.node, token=token, slots=ns.slots, timeout=ns.timeout, lifetime=ns.lifetime)
    return Pilot(cfg).run()
