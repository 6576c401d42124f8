"""The pilot (KOALA-CS launcher, worker agent): registers with the manager and runs the tasks it gets.

Protocol (HTTP, JSON, `Authorization: Bearer <pilot token>`):

* ``POST /pilot/register`` with the runs it is executing and its unacknowledged reports;
  answers a registration id and the spool directory. Sent at start and again whenever the
  manager answers 409 (it restarted and forgot the registration).
* ``GET /pilot/poll?pilot_id=..&ack=N&wait=W``: long poll, doubling as the heartbeat; answers
  the commands after sequence number N: ``start`` (a run: command, args, env, cwd, output
  files and whether to append to them, the job script's text if it has one, node file path and
  hosts as (name, slots) pairs), ``kill`` (a run), ``exit``.
* ``POST /pilot/report``: ``started`` and ``ended`` (exit code, runtime) events, retried until
  acknowledged; the answer carries the commands after N too (the runs an end made room for),
  which the pilot obeys at once: an end and the next start cost one round trip.

Bags of tasks (KOALA-CS launchers, docs/bags.md): a processor a bag holds is a *lane* of this
pilot. ``tasks`` appends task command lines to a lane's local list; the lane runs them one after
the other (``/bin/sh -c``), starting the next the moment one ends, with no round trip, and
reports each end in ``tasks`` of its next report (``ended``: exit code and runtime; the answer
tops the list up). ``preempt`` kills a lane's task and drops its list; once its process is gone
the lane reports ``preempted``. ``drop`` takes tasks off a lane's list.

The pilot runs next to the jobs on every node, so what it costs per run is kept small: it
talks HTTP with the standard library's `http.client` over one kept-alive connection per thread,
one thread waits for all its runs' exits (`reaper`), and the spool entries a run needs are
made ahead of time and renamed into place (`fresh`).

Each run is a child process in its own session (`start_new_session=True`), so killing it
kills its whole process group. The pilot exits when told to, when its lifetime ends, on
SIGTERM/SIGINT, and when the manager has been unreachable for longer than `timeout` seconds
(a pilot of a dead manager must not run forever); it kills its runs before exiting.
``detach`` (the manager stops but means to come back) lengthens that patience to the command's
``wait`` only while the pilot holds a run or a bag's task: an idle pilot exits at once, and a
detached pilot whose last run ends falls back to the manager's ``pilot_timeout``.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import signal
import socket
import ssl
import stat
import subprocess
import sys
import threading
import time
import urllib.parse
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from isthmus.agent.accounts import Account, AccountError, create_for, lookup, own_dir, own_name
from isthmus.agent.fresh import FreshEntries
from isthmus.agent.jobenv import default_environment, job_environment
from isthmus.agent.outputs import DISCARD, kind_of, open_output
from isthmus.agent.reaper import Reaper
from isthmus.agent.runexit import check_startable, exit_file, switch_failure, switched, wrapped
from isthmus.tls import check_plain_http, client_context

EXIT_OK = 0
LOST_GRACE = 0.5
"""Seconds a run killed by a signal the pilot did not send waits before its end is reported: if
the pilot is stopped by a signal meanwhile, the run is reported lost (see `Pilot._ended`)."""
EXIT_UNREACHABLE = 3
EXIT_REFUSED = 4


class _Stop(Exception):  # noqa: N818
    """Raised in the main thread by SIGTERM/SIGINT."""


class HttpError(OSError):
    """The manager could not be reached, or the connection broke before an answer."""


@dataclass
class Reply:
    """An HTTP answer: status and body."""

    status_code: int
    body: bytes

    def json(self) -> Any:
        """The body as JSON (an empty dict when it is not JSON)."""
        try:
            return json.loads(self.body or b"{}")
        except ValueError:
            return {}

    @property
    def text(self) -> str:
        """The body as text."""
        return self.body.decode(errors="replace")


class Connection:
    """One kept-alive HTTP/1.1 connection to the manager, with the pilot's token on every request."""

    def __init__(self, url: str, token: str, timeout: float, ssl_context: ssl.SSLContext | None = None) -> None:
        u = urllib.parse.urlsplit(url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError(f"manager URL {url!r}: expected http://HOST:PORT or https://HOST:PORT")
        self._https = u.scheme == "https"
        self._ssl = ssl_context
        self._host = u.hostname
        self._port = u.port
        self._base = u.path.rstrip("/")
        self._headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
        self._timeout = timeout
        self._conn: http.client.HTTPConnection | None = None

    def request(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, Any] | None = None,
        body: Any = None,
        timeout: float | None = None,
    ) -> Reply:
        """Send one request and read its answer; raises HttpError when there is none.

        A kept-alive connection the manager closed meanwhile is replaced once (every pilot
        request is safe to repeat: polls read, reports and registrations are idempotent).
        """
        target = self._base + path
        if params:
            target += "?" + urllib.parse.urlencode(params)
        headers = dict(self._headers)
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        limit = self._timeout if timeout is None else timeout
        for attempt in (0, 1):
            conn = self._conn
            reused = conn is not None
            if conn is None:
                if self._https:
                    conn = http.client.HTTPSConnection(self._host, self._port, timeout=limit, context=self._ssl)
                else:
                    conn = http.client.HTTPConnection(self._host, self._port, timeout=limit)
                self._conn = conn
            elif conn.sock is not None:
                conn.sock.settimeout(limit)
            try:
                conn.request(method, target, body=data, headers=headers)
                resp = conn.getresponse()
                payload = resp.read()
            except (OSError, http.client.HTTPException) as exc:
                self.close()
                stale = isinstance(exc, (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError))
                if reused and stale and attempt == 0:
                    continue
                raise HttpError(f"{method} {path}: {exc}") from exc
            if resp.will_close:
                self.close()
            return Reply(resp.status, payload)
        raise AssertionError("unreachable")

    def close(self) -> None:
        """Close the connection (the next request opens a new one)."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None


class LaunchError(Exception):
    """A run cannot be started for a reason the user can act on (its script or output file);
    `code` is the exit status reported for it."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


@dataclass
class Task:
    """A run executing on this pilot."""

    job: int
    run: int
    proc: subprocess.Popen[bytes]
    started: float
    killed: bool = False
    outputs: tuple[str, ...] = ()  # its stdout and stderr files, checked at its end
    #: (account, stdout, stderr, cwd) of a run switched to another account, to explain a failed start
    switched: tuple[str, str, str, str] | None = None


@dataclass
class LaneTask:
    """A task of a bag running on a lane of this pilot."""

    bag: int
    lane: int
    task: int
    proc: subprocess.Popen[bytes] | None
    started: float
    killed: bool = False


@dataclass
class Lane:
    """A processor a bag holds on this pilot: its local list of tasks and the one it runs."""

    bag: int
    lane: int
    spec: dict[str, Any]  # out_dir, cwd, env and Unix account (user) of the bag
    todo: deque[dict[str, Any]] = field(default_factory=deque)
    current: LaneTask | None = None


def task_outputs(out_dir: str, task: int) -> tuple[str, str]:
    """The stdout and stderr files of task `task` of a bag whose outputs go to `out_dir`."""
    return os.path.join(out_dir, f"{task}.out"), os.path.join(out_dir, f"{task}.err")


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
    ca_file: str | None = None  # verify an https manager against this CA file (None: the system's CAs)


@dataclass
class Pilot:
    """One pilot process; `run()` returns its exit status."""

    cfg: PilotConfig
    tasks: dict[tuple[int, int], Task] = field(default_factory=dict)
    pending: list[dict[str, Any]] = field(default_factory=list)
    #: bag lanes by (bag, lane) and their reports not yet acknowledged
    lanes: dict[tuple[int, int], Lane] = field(default_factory=dict)
    pending_tasks: list[dict[str, Any]] = field(default_factory=list)
    pilot_id: str | None = None
    last_seq: int = 0
    poll_wait: float = 10.0
    last_ok: float = field(default_factory=time.monotonic)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._cv = threading.Condition(self._lock)
        self._cmd_lock = threading.Lock()  # commands are obeyed one poll or report answer at a time
        self._closing = False  # set (under _cmd_lock) by the shutdown: no run starts after it
        self._stopped_by: str | None = None  # the signal that stops this pilot, once one did
        self._done = False
        self._born = time.monotonic()
        self._patience = self.cfg.timeout  # the manager's pilot_timeout, restored when a detach ends
        self._detached = False  # told "detach": cfg.timeout is the longer wait while runs are held
        tls = client_context(self.cfg.ca_file) if self.cfg.url.startswith("https:") else None
        self._http = Connection(self.cfg.url, self.cfg.token, 10.0, tls)  # registration and long polls
        self._http_report = Connection(self.cfg.url, self.cfg.token, 10.0, tls)  # reports (reporter thread)
        self._reaper: Reaper[Task | LaneTask] = Reaper(self._exited)
        self._fresh: FreshEntries | None = None  # once the manager has named its spool directory
        # what every run's environment starts from: the documented defaults only, never the
        # pilot's whole environment (isthmus.agent.jobenv)
        self._base_env = default_environment()
        self._own = own_name()  # a run of this account is not switched
        self._accounts: dict[str, Account] = {}  # the accounts runs were switched to, by name

    # ------------------------------------------------------------------------- main loop

    def run(self) -> int:
        """Register, then poll and obey until told to exit or the manager is gone for too long."""

        def _on_signal(signum: int, _frame: Any) -> None:
            self._stopped_by = signal.Signals(signum).name
            raise _Stop(self._stopped_by)

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
            if self._detached and not self._holding():
                with self._lock:
                    self._detached = False
                    self.cfg.timeout = self._patience
                self._log(f"detached runs have ended: waiting {self._patience:g} s for a manager")
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
                r = self._http.request(
                    "GET",
                    "/pilot/poll",
                    params={"pilot_id": self.pilot_id, "ack": self.last_seq, "wait": wait},
                    timeout=wait + 60.0,
                )
            except HttpError:
                time.sleep(0.2)
                continue
            if r.status_code == 409:
                self._contact()
                self.pilot_id = None
                continue
            if r.status_code in (401, 403, 410):
                self._log(f"manager refused this pilot ({r.status_code}): exiting")
                return EXIT_REFUSED
            if r.status_code == 503:  # the manager is up but cannot store anything yet: wait for it
                self._contact()
                time.sleep(0.5)
                continue
            if r.status_code != 200:
                time.sleep(0.2)
                continue
            self._contact()
            code = self._obey(r.json().get("commands", []), self.pilot_id)
            if code is not None:
                return code

    def _obey(self, commands: list[dict[str, Any]], pilot_id: str | None, *, exit_ok: bool = True) -> int | None:
        """Carry out the commands not seen yet (from a poll or a report answer of registration
        `pilot_id`); returns an exit status when told to exit.

        Starts are reported together once every start of the batch is done, and their exits
        watched after that, so a burst of starts is not slowed down by the reporter
        waking up after each one and an end is never reported before its start. With `exit_ok`
        false (a report answer), processing stops before an ``exit``: the long poll carries it.
        """
        started: list[dict[str, Any]] = []
        waiting: list[Task] = []
        with self._cmd_lock:
            if self._closing:
                return None
            try:
                for cmd in commands:
                    seq = int(cmd.get("seq", 0))
                    if seq <= self.last_seq or pilot_id != self.pilot_id:
                        continue
                    op = cmd.get("op")
                    if op == "exit" and not exit_ok:
                        break
                    if op == "detach" and not exit_ok and not self._holding():
                        break  # it means exiting: the long poll carries it
                    self.last_seq = seq
                    if op == "start":
                        reports, task = self._start(cmd)
                        started.extend(reports)
                        if task is not None:
                            waiting.append(task)
                    elif op == "kill":
                        self._kill(int(cmd["job"]), int(cmd["run"]))
                    elif op == "tasks":
                        self._lane_tasks(cmd)
                    elif op == "preempt":
                        self._lane_preempt(int(cmd["bag"]), int(cmd["lane"]))
                    elif op == "drop":
                        self._lane_drop(int(cmd["bag"]), int(cmd["lane"]), cmd.get("tasks") or [])
                    elif op == "exit":
                        self._log(f"told to exit: {cmd.get('reason', '')}")
                        return EXIT_OK
                    elif op == "detach":
                        # the manager stops but means to come back: keep the runs, wait longer;
                        # with nothing to keep, waiting would only hold the node
                        if not self._holding():
                            self._log(f"detached ({cmd.get('reason', '')}) with nothing running: exiting")
                            return EXIT_OK
                        wait = float(cmd.get("wait", self.cfg.timeout))
                        with self._lock:
                            self._detached = True
                            self.cfg.timeout = max(self._patience, wait)
                        self._log(f"detached ({cmd.get('reason', '')}): runs go on, waiting {wait:g} s for a manager")
            finally:
                if started:
                    self._queue(*started)
                for task in waiting:  # after the started reports: an end is never reported first
                    self._reaper.watch(task.proc.pid, task)
        return None

    def _register(self) -> int | None:
        with self._lock:
            running = [{"job": j, "run": r, "pid": t.proc.pid} for (j, r), t in self.tasks.items() if not t.killed]
            reports = list(self.pending)
            task_reports = list(self.pending_tasks)
            lanes = [{"bag": b, "lane": n} for (b, n) in self.lanes]
        body = {
            "pid": os.getpid(),
            # on a Slurm node its name, which node files and MPI launchers use
            "host": os.environ.get("SLURMD_NODENAME") or socket.gethostname(),
            "slots": self.cfg.slots,
            "running": running,
            "reports": reports,
            "lanes": lanes,
            "tasks": task_reports,
        }
        try:
            r = self._http.request("POST", "/pilot/register", body=body)
        except HttpError:
            time.sleep(0.2)
            return None
        if r.status_code in (401, 403, 410):
            self._log(f"registration refused ({r.status_code}: {r.text}): exiting")
            return EXIT_REFUSED
        if r.status_code != 200:
            if r.status_code == 503:  # up, cannot store the registration yet
                self._contact()
            time.sleep(0.2)
            return None
        self._contact()
        data = r.json()
        with self._cmd_lock, self._lock:
            self.pilot_id = data["pilot_id"]
            self.last_seq = 0
            self.poll_wait = float(data.get("poll_wait", self.poll_wait))
            self.cfg.timeout = float(data.get("pilot_timeout", self._patience))
            self._patience = self.cfg.timeout
            self._detached = False
        if data.get("spool") and self._fresh is None:
            try:  # each start takes a directory and three files: keep two bursts' worth ready
                self._fresh = FreshEntries(
                    str(data["spool"]), self.cfg.node, files=6 * self.cfg.slots, dirs=2 * self.cfg.slots
                )
            except OSError as exc:
                self._log(f"cannot prepare spool entries in {data['spool']}: {exc}")
            sent = {(p["job"], p["run"], p["event"]) for p in reports}
            self.pending = [p for p in self.pending if (p["job"], p["run"], p["event"]) not in sent]
        with self._lock:
            self.pending_tasks = self.pending_tasks[len(task_reports) :]
        self._log(f"registered as {self.pilot_id} for node {self.cfg.node}")
        return None

    def _holding(self) -> bool:
        """Whether a run or a bag's task of this pilot is still running."""
        with self._lock:
            return bool(self.tasks) or any(lane.current is not None for lane in self.lanes.values())

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

        The caller queues the reports after the other commands of the same answer, then has the
        reaper watch the tasks: a burst of starts is not slowed down by the reporter waking up
        after each one, and a run's end is never reported before its start.
        """
        job, run = int(cmd["job"]), int(cmd["run"])
        if (job, run) in self.tasks:
            return [], None
        started = time.time()
        try:
            proc, t0 = self._launch(cmd)
        except Exception as exc:
            # A null byte in an argument (ValueError), a missing cwd or program (OSError), an
            # unwritable spool or output file: the run fails alone, with the reason; the pilot
            # and its other runs go on.
            if isinstance(exc, LaunchError):
                code, why = exc.code, str(exc)
            else:
                code = 127 if isinstance(exc, FileNotFoundError) else 126
                why = f"cannot start {str(cmd.get('command'))!r}: {type(exc).__name__}: {exc}"
            why = why.encode("utf-8", "backslashreplace").decode().replace("\x00", "\\x00")  # JSON- and DB-safe
            self._log(f"job {job} run {run}: {why}")
            self._tell_user(cmd, run, why)
            ended = {"event": "ended", "time": time.time(), "exit_code": code, "runtime": 0.0, "error": why[:4000]}
            return [
                {"job": job, "run": run, "event": "started", "time": started},
                {"job": job, "run": run, **ended},
            ], None
        task = Task(job, run, proc, t0, outputs=(str(cmd["stdout"]), str(cmd["stderr"])))
        if cmd.get("user") and proc.stderr is not None:
            spool = str(cmd["spool"])
            task.switched = (str(cmd["user"]), task.outputs[0], task.outputs[1], str(cmd.get("cwd") or spool))
        with self._lock:
            self.tasks[(job, run)] = task
        return [{"job": job, "run": run, "event": "started", "time": started, "pid": proc.pid}], task

    def _launch(self, cmd: dict[str, Any]) -> tuple[subprocess.Popen[bytes], float]:
        """Prepare the spool entries of a start command and start its process; raises when it cannot."""
        account = self._account(cmd)
        if account is not None:
            return self._launch_as(cmd, account)
        spool = str(cmd["spool"])
        nodefile = str(cmd["nodefile"])
        stdout, stderr = str(cmd["stdout"]), str(cmd["stderr"])
        if self._fresh is not None:
            self._fresh.dir(spool)
            # only spool entries come from the pool: a user's output file is opened where it is
            for path in {nodefile, stdout, stderr}:
                if os.path.dirname(path) == spool:
                    self._fresh.file(path)
        else:
            os.makedirs(spool, exist_ok=True)
        with open(nodefile, "w") as f:
            f.write("".join(_nodefile_line(h) for h in cmd.get("hosts", [])))
        env = job_environment(
            cmd.get("env", {}),
            {"ISTHMUS_NODEFILE": nodefile, "ISTHMUS_PILOT_NODE": self.cfg.node},
            self._base_env,
        )
        argv = [cmd["command"], *cmd.get("args", [])]
        if cmd.get("script") is not None:
            script = os.path.join(spool, "job.script")  # the copy taken at submission
            try:
                with open(script, "w") as f:
                    f.write(cmd["script"])
                os.chmod(script, 0o700)
            except OSError as exc:
                raise LaunchError(f"cannot write the job script {script}: {exc}", 126) from exc
            shebang = cmd["script"].startswith("#!")
            argv = [script, *cmd.get("args", [])] if shebang else ["/bin/sh", script, *cmd.get("args", [])]
        cwd = cmd.get("cwd") or spool
        if "\x00" in "".join(argv):
            raise ValueError("embedded null byte")
        check_startable(argv[0], cwd, env.get("PATH", ""))  # fails here, as starting it directly would
        append = bool(cmd.get("append"))
        t0 = time.monotonic()
        try:
            out = open_output(stdout, append=append)  # closed below, once the child has them
        except OSError as exc:
            raise LaunchError(f"cannot open the output file {stdout}: {exc.strerror or exc}", 1) from exc
        try:
            err = out if stderr == stdout else open_output(stderr, append=append)
        except OSError as exc:
            out.close()
            raise LaunchError(f"cannot open the error file {stderr}: {exc.strerror or exc}", 1) from exc
        try:
            return subprocess.Popen(
                wrapped(argv, spool, int(cmd["run"])),  # records its exit status (isthmus.agent.runexit)
                cwd=cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,
            ), t0
        finally:
            out.close()
            if err is not out:
                err.close()

    def _account(self, spec: dict[str, Any]) -> Account | None:
        """The account a run (or a lane) of command or spec `spec` must be switched to, None when it
        runs as this pilot (the manager named no account, or the pilot runs as it); LaunchError
        when it cannot be run here: the manager has no account for its user, the pilot is not
        root and cannot switch, or the account is root."""
        if "user" not in spec:
            return None
        if not spec["user"]:
            raise LaunchError("the job's user has no Unix account in the environment's [users] table", 126)
        name = str(spec["user"])
        if name == self._own:
            return None
        if os.geteuid() != 0:
            raise LaunchError(
                f"this pilot runs as {self._own} and cannot switch to {name}: "
                f"start it as root, or as {name} (docs/security.md)",
                126,
            )
        account = self._accounts.get(name)
        if account is None:
            try:
                account = lookup(name)
            except AccountError as exc:
                raise LaunchError(f"{exc} (node {self.cfg.node})", 126) from None
            if account.uid == 0:
                raise LaunchError(f"{name!r} is root here: jobs never run as root", 126)
            self._accounts[name] = account
        return account

    def _launch_as(self, cmd: dict[str, Any], account: Account) -> tuple[subprocess.Popen[bytes], float]:
        """Start a run as `account` (this pilot is root): its spool directory becomes the account's,
        the pilot writes there only files it creates itself (never through a link the job left), and
        the run's wrapper opens the output files and enters the working directory as the account."""
        spool = str(cmd["spool"])
        nodefile = str(cmd["nodefile"])
        stdout, stderr = str(cmd["stdout"]), str(cmd["stderr"])
        own_dir(spool, account, None if self._fresh is None else self._fresh.dir)
        hosts = "".join(_nodefile_line(h) for h in cmd.get("hosts", []))
        create_for(nodefile, hosts.encode(), 0o644, account)
        env = job_environment(
            cmd.get("env", {}),
            {"ISTHMUS_NODEFILE": nodefile, "ISTHMUS_PILOT_NODE": self.cfg.node},
            {**self._base_env, "HOME": account.home, "USER": account.name, "LOGNAME": account.name},
        )
        argv = [cmd["command"], *cmd.get("args", [])]
        if cmd.get("script") is not None:
            script = os.path.join(spool, "job.script")  # the copy taken at submission
            try:
                create_for(script, str(cmd["script"]).encode(), 0o700, account)
            except OSError as exc:
                raise LaunchError(f"cannot write the job script {script}: {exc}", 126) from exc
            shebang = cmd["script"].startswith("#!")
            argv = [script, *cmd.get("args", [])] if shebang else ["/bin/sh", script, *cmd.get("args", [])]
        cwd = cmd.get("cwd") or spool
        if "\x00" in "".join([*argv, stdout, stderr, cwd]):
            raise ValueError("embedded null byte")
        for what, path in (("output", stdout), ("error", stderr)):
            problem = _not_a_file(path)  # a FIFO would block the wrapper (never the pilot)
            if problem:
                raise LaunchError(f"cannot open the {what} file {path}: {problem}", 1)
        t0 = time.monotonic()
        return subprocess.Popen(
            switched(argv, exit_file(spool, int(cmd["run"])), stdout, stderr, append=bool(cmd.get("append")), cwd=cwd),
            cwd="/",  # the wrapper enters the run's directory as the account, not as root
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,  # why it could not start, if it could not (runexit.SWITCHED)
            start_new_session=True,
            user=account.uid,
            group=account.gid,
            extra_groups=list(account.groups),
            umask=0o022,
        ), t0

    def _tell_user(self, cmd: dict[str, Any], run: int, why: str) -> None:
        """Write why a run could not start to its error file, or to the spool when that file
        cannot be opened. A run of another account gets it in its spool only, in a file the
        pilot creates for it: a root pilot never opens a path the job's user chose."""
        line = f"isthmus pilot: {why}\n".encode(errors="backslashreplace")
        spooled = os.path.join(str(cmd.get("spool")), f"run{run}.err")
        try:
            account = self._account(cmd)
        except LaunchError:
            account = None
            if os.geteuid() == 0:
                return  # an account this node lacks: nobody to write as
        if account is not None:
            with contextlib.suppress(OSError):
                own_dir(str(cmd.get("spool")), account)
                create_for(spooled, line, 0o644, account)
            return
        for path in (str(cmd.get("stderr")), spooled):
            try:
                with open_output(path, append=True) as f:  # never a FIFO that would block
                    f.write(line)
                return
            except (OSError, ValueError):
                continue

    # ---------------------------------------------------------------------- bag lanes

    def _lane_tasks(self, cmd: dict[str, Any]) -> None:
        """TASKS: append tasks to a lane's local list; an idle lane starts the first at once."""
        key = (int(cmd["bag"]), int(cmd["lane"]))
        with self._lock:
            lane = self.lanes.get(key)
            if lane is None:
                spec = {
                    "out_dir": str(cmd["out_dir"]),
                    "cwd": cmd.get("cwd"),
                    "env": dict(cmd.get("env") or {}),
                }
                if "user" in cmd:
                    spec["user"] = cmd["user"]
                lane = self.lanes[key] = Lane(key[0], key[1], spec)
            lane.todo.extend(cmd.get("tasks") or [])
            idle = lane.current is None
        if idle:
            self._lane_next(lane)

    def _lane_next(self, lane: Lane) -> None:
        """Start the next task of `lane`'s list (a task that cannot start is reported failed, and
        the one after it tried)."""
        while True:
            with self._lock:
                if self._closing or self.lanes.get((lane.bag, lane.lane)) is not lane or not lane.todo:
                    lane.current = None
                    return
                item = lane.todo.popleft()
            task = int(item["task"])
            t0 = time.monotonic()
            try:
                proc = self._lane_launch(lane, item)
            except Exception as exc:
                why = f"cannot start task {task}: {type(exc).__name__}: {exc}".replace("\x00", "\\x00")
                code = 127 if isinstance(exc, FileNotFoundError) else 126
                self._log(f"bag {lane.bag}: {why}")
                self._queue_task(
                    {
                        "bag": lane.bag,
                        "lane": lane.lane,
                        "task": task,
                        "event": "ended",
                        "exit_code": code,
                        "runtime": 0.0,
                        "time": time.time(),
                        "error": why[:4000],
                    }
                )
                continue
            running = LaneTask(lane.bag, lane.lane, task, proc, t0)
            with self._lock:
                lane.current = running
                orphan = self.lanes.get((lane.bag, lane.lane)) is not lane  # preempted meanwhile
                running.killed = orphan
            if orphan:
                _signal_group(proc.pid, signal.SIGKILL)
            self._reaper.watch(proc.pid, running)
            return

    def _task_env(self, lane: Lane, task: int) -> dict[str, str]:
        """The variables naming a task to its process; its manager finds the process by them once
        this pilot is gone (isthmus.live.lost_runs.kill_lost_tasks): ISTHMUS_BAG_DIR is a path in
        that manager's spool, which no other manager's tasks carry."""
        return {
            "ISTHMUS_JOB_ID": str(lane.bag),
            "ISTHMUS_TASK": str(task),
            "ISTHMUS_PILOT_NODE": self.cfg.node,
            "ISTHMUS_BAG_DIR": str(lane.spec["out_dir"]),
        }

    def _lane_launch(self, lane: Lane, item: dict[str, Any]) -> subprocess.Popen[bytes]:
        task = int(item["task"])
        out_dir = lane.spec["out_dir"]
        stdout, stderr = task_outputs(out_dir, task)
        account = self._account(lane.spec)
        if account is not None:  # as for a run (`_launch_as`): the bag's directories become the account's
            own_dir(os.path.dirname(out_dir), account)
            own_dir(out_dir, account)
            argv = ["/bin/sh", "-c", str(item["command"])]
            if "\x00" in "".join(argv):
                raise ValueError("embedded null byte")
            return subprocess.Popen(
                switched(argv, "", stdout, stderr, append=False, cwd=lane.spec.get("cwd") or out_dir),
                cwd="/",
                env=job_environment(
                    lane.spec["env"],
                    self._task_env(lane, task),
                    {**self._base_env, "HOME": account.home, "USER": account.name, "LOGNAME": account.name},
                ),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                start_new_session=True,
                user=account.uid,
                group=account.gid,
                extra_groups=list(account.groups),
                umask=0o022,
            )
        os.makedirs(out_dir, exist_ok=True)
        env = job_environment(
            lane.spec["env"],
            self._task_env(lane, task),
            self._base_env,
        )
        with open_output(stdout, append=False) as out, open_output(stderr, append=False) as err:
            return subprocess.Popen(
                ["/bin/sh", "-c", str(item["command"])],
                cwd=lane.spec.get("cwd") or out_dir,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,
            )

    def _lane_drop(self, bag: int, lane_id: int, tasks: list[Any]) -> None:
        """DROP: take tasks off a lane's local list (one it started already runs on)."""
        gone = {int(t) for t in tasks}
        with self._lock:
            lane = self.lanes.get((bag, lane_id))
            if lane is not None:
                lane.todo = deque(item for item in lane.todo if int(item["task"]) not in gone)

    def _lane_preempt(self, bag: int, lane_id: int) -> None:
        """PREEMPT: kill the lane's task and drop its list; `preempted` is reported once its
        process is gone (at once for a lane between tasks)."""
        with self._lock:
            lane = self.lanes.pop((bag, lane_id), None)
            if lane is None:
                return
            lane.todo.clear()
            current = lane.current
            if current is not None:
                current.killed = True
        if current is None or current.proc is None:
            self._queue_task({"bag": bag, "lane": lane_id, "event": "preempted", "time": time.time()})
            return
        _signal_group(current.proc.pid, signal.SIGTERM)
        proc = current.proc

        def _hard() -> None:
            if proc.poll() is None:
                _signal_group(proc.pid, signal.SIGKILL)

        timer = threading.Timer(self.cfg.kill_grace, _hard)
        timer.daemon = True
        timer.start()

    def _lane_ended(self, t: LaneTask) -> None:
        """A lane's task exited: report it (or the preemption it obeyed), start the next at once."""
        assert t.proc is not None
        code = t.proc.wait()
        if code < 0:
            code = 128 - code
        ended: dict[str, Any] = {
            "bag": t.bag,
            "lane": t.lane,
            "task": t.task,
            "event": "ended",
            "exit_code": code,
            "runtime": time.monotonic() - t.started,
            "time": time.time(),
        }
        if t.proc.stderr is not None:  # switched to the bag's account: did its wrapper start the task?
            with self._lock:
                lane_now = self.lanes.get((t.bag, t.lane))
            spec = lane_now.spec if lane_now is not None else {}
            out_dir = str(spec.get("out_dir", ""))
            stdout, stderr = task_outputs(out_dir, t.task)
            why = switch_failure(
                _said(t.proc),
                account=str(spec.get("user", "")),
                stdout=stdout,
                stderr=stderr,
                cwd=str(spec.get("cwd") or out_dir),
            )
            if why is not None:
                ended["error"] = why[:4000]
        if t.killed:  # preempted; a task that completed before the signal landed still counts
            if code == 0:
                self._queue_task(ended)
            self._queue_task({"bag": t.bag, "lane": t.lane, "event": "preempted", "time": time.time()})
            return
        with self._lock:
            lane = self.lanes.get((t.bag, t.lane))
        if lane is not None:
            self._lane_next(lane)  # before the report: the next task starts with no round trip
        self._queue_task(ended)

    def _queue_task(self, report: dict[str, Any]) -> None:
        with self._cv:
            self.pending_tasks.append(report)
            self._cv.notify()

    def _exited(self, item: Task | LaneTask) -> None:
        if isinstance(item, LaneTask):
            self._lane_ended(item)
        else:
            self._ended(item)

    def _ended(self, task: Task) -> None:
        """The run's process has exited (or is about to): reap it and queue its end report."""
        code = task.proc.wait()
        runtime = time.monotonic() - task.started
        signalled = code < 0 or 128 < code <= 192  # by a signal, or a shell reporting one
        if signalled and not task.killed and self._stopped_by is None:
            # a signal this pilot did not send: when the pilot's batch job is cancelled or hits
            # its walltime, the batch system signals the run and the pilot together, and the run
            # may die first; wait a moment to tell that from a run that died on its own
            time.sleep(LOST_GRACE)
        lost = signalled and self._stopped_by is not None and not task.killed
        if code < 0:
            code = 128 - code  # killed by signal N: 128 + N, as shells report it
        report: dict[str, Any] = {
            "job": task.job,
            "run": task.run,
            "event": "ended",
            "time": time.time(),
            "exit_code": code,
            "runtime": runtime,
        }
        if lost:  # not the job's doing: the manager runs it again
            report["lost"] = f"its pilot was stopped by {self._stopped_by}"
        why = None
        if task.switched is not None:
            account, stdout, stderr, cwd = task.switched
            why = switch_failure(_said(task.proc), account=account, stdout=stdout, stderr=stderr, cwd=cwd)
        gone = sorted({p for p in task.outputs if not os.path.exists(p)})
        if why is not None:  # its wrapper could not open its files or enter its directory as its user
            report["error"] = why[:4000]
            self._log(f"job {task.job} run {task.run}: {why}")
        elif gone:  # written to a deleted file: the output is lost, and the user is told
            report["error"] = f"output lost: {', '.join(gone)} removed while the run ran"[:4000]
            self._log(f"job {task.job} run {task.run}: {report['error']}")
        with self._cv:  # one step: a run is always either in `tasks` or in `pending`
            self.tasks.pop((task.job, task.run), None)
            self.pending.append(report)
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
                while not self.pending and not self.pending_tasks and not self._done:
                    self._cv.wait(0.5)
                if self._done and not self.pending and not self.pending_tasks:
                    return
                batch = list(self.pending)
                task_batch = list(self.pending_tasks)
                pilot_id = self.pilot_id
                ack = self.last_seq
            if pilot_id is None:
                time.sleep(0.05)
                continue
            try:
                r = self._http_report.request(
                    "POST",
                    "/pilot/report",
                    body={"pilot_id": pilot_id, "ack": ack, "reports": batch, "tasks": task_batch},
                )
            except HttpError:
                time.sleep(0.2)
                if self._done:
                    return
                continue
            if r.status_code == 200:
                self._contact()
                with self._lock:
                    self.pending = self.pending[len(batch) :]
                    self.pending_tasks = self.pending_tasks[len(task_batch) :]
                commands = r.json().get("commands")
                if commands and not self._done:
                    self._obey(commands, pilot_id, exit_ok=False)
            else:
                if r.status_code == 503:  # up, cannot store the reports yet: they are kept and resent
                    self._contact()
                time.sleep(0.1)
                if self._done:
                    return

    # --------------------------------------------------------------------------- leaving

    def _shutdown(self) -> None:
        with self._cmd_lock:
            self._closing = True
        if self._fresh is not None:
            self._fresh.close()
        with self._lock:
            tasks: list[Task | LaneTask] = list(self.tasks.values())
            for lane in self.lanes.values():
                lane.todo.clear()
                if lane.current is not None:
                    lane.current.killed = True
                    tasks.append(lane.current)
        for t in tasks:
            assert t.proc is not None
            _signal_group(t.proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + self.cfg.kill_grace
        for t in tasks:
            assert t.proc is not None
            with contextlib.suppress(subprocess.TimeoutExpired):
                t.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        for t in tasks:
            assert t.proc is not None
            _signal_group(t.proc.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                t.proc.wait(timeout=1)
        # give the reporter a moment to deliver the last reports, if the manager is there
        end = time.monotonic() + 1.0
        while time.monotonic() < end:
            with self._lock:
                if not self.pending and not self.pending_tasks:
                    break
            time.sleep(0.05)
        with self._cv:
            self._done = True
            self._cv.notify_all()
        self._http.close()
        self._http_report.close()

    def _log(self, msg: str) -> None:
        print(f"{time.strftime('%H:%M:%S')} pilot {self.cfg.node}[{os.getpid()}]: {msg}", file=sys.stderr, flush=True)


def _nodefile_line(host: Any) -> str:
    """One node-file line: ``host slots=N`` (the format Open MPI's and MPICH's launchers read)."""
    if isinstance(host, list | tuple):
        return f"{host[0]} slots={int(host[1])}\n"
    return f"{host} slots=1\n"


def _not_a_file(path: str) -> str | None:
    """Why existing `path` cannot be a run's output file (a FIFO, a directory, ...), or None."""
    if path == DISCARD:
        return None
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None  # missing (made by the run) or refused: the run's wrapper says so as the account
    return None if stat.S_ISREG(mode) else f"{path} is {kind_of(mode)}, not a regular file"


def _said(proc: subprocess.Popen[bytes]) -> bytes:
    """What the wrapper of a switched run wrote to its stderr pipe before it started the job
    (nothing once it did: the job's stderr is its error file), and close the pipe."""
    pipe = proc.stderr
    if pipe is None:
        return b""
    try:
        os.set_blocking(pipe.fileno(), False)
        return pipe.read(65536) or b""
    except (OSError, ValueError):
        return b""
    finally:
        pipe.close()


def _signal_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def main(argv: list[str] | None = None) -> int:
    """`python -m isthmus.agent --url URL --node KEY [--slots N] [--timeout S] [--lifetime S]`.

    The token comes from ISTHMUS_PILOT_TOKEN, --token-file or --token-stdin (what the manager
    uses: jobs cannot read it from the pilot's environment), never from the command line.
    """
    import argparse

    ap = argparse.ArgumentParser(prog="isthmus agent", description="isthmus pilot")
    ap.add_argument("--url", required=True)
    ap.add_argument("--node", required=True)
    ap.add_argument("--slots", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=30.0)
    ap.add_argument("--lifetime", type=float, default=None)
    ap.add_argument("--token-file", default=None)
    ap.add_argument("--token-stdin", action="store_true", help="read the token from the first line of stdin")
    ap.add_argument("--ca-file", default=None, help="verify an https manager against this CA file (PEM)")
    ap.add_argument("--insecure-http", action="store_true", help="allow http:// to a host outside loopback")
    ns = ap.parse_args(argv)
    try:
        check_plain_http(ns.url, ns.insecure_http, "the manager URL", "--insecure-http")
        if ns.ca_file is not None:
            client_context(ns.ca_file)
    except ValueError as exc:
        print(f"isthmus agent: {exc}", file=sys.stderr)
        return 2
    token = os.environ.get("ISTHMUS_PILOT_TOKEN", "")
    if ns.token_file:
        token = Path(ns.token_file).read_text().strip()
    if ns.token_stdin:
        token = sys.stdin.readline().strip()
    if not token:
        print("isthmus agent: no token (set ISTHMUS_PILOT_TOKEN or use --token-file)", file=sys.stderr)
        return 2
    cfg = PilotConfig(
        url=ns.url,
        node=ns.node,
        token=token,
        slots=ns.slots,
        timeout=ns.timeout,
        lifetime=ns.lifetime,
        ca_file=ns.ca_file,
    )
    return Pilot(cfg).run()
