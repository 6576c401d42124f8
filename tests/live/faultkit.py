"""Fault injection against a real manager: one campaign, run short by the suite and long by
scripts/fault_campaign.py.

A campaign starts a manager (a real process, real pilots, a real database), submits a workload
of jobs that each append their run number to a ledger file, and injects faults at random while
it runs:

- ``manager-kill``: SIGKILL of the manager, then a restart on the same database;
- ``manager-stop``: SIGSTOP of the manager for longer than the heartbeat timeout, then SIGCONT;
- ``pilot-kill``: SIGKILL of one pilot (its runs are lost, killed and requeued);
- ``db-refuse``: the database refuses writes for a while (SQLite: an exclusive lock held by the
  campaign; PostgreSQL: the manager's connections are terminated, as a database restart does);
- ``spool-remove``: the output spool of a running job is removed (an operator cleaning up early);
- ``pilot-then-manager`` and ``manager-then-pilot``: SIGKILL of a pilot and of the manager 0-50 ms
  apart, in that order or the other, then a restart: the pilot's runs outlive both and are
  declared lost by the restarted manager, which must kill them before their reruns.

Each job's body appends ``start <run>`` to its ledger file when it starts and ``end <run>`` when
it ends. Then it checks every job: exactly one terminal state and it is the last; completed; its
body ran to its end exactly once (body executions, not recorded runs), in its last recorded run;
no run started twice and every started run recorded; restarts recorded as kills; nothing stamped
before the job's submission; output intact, or said to be lost where its spool was removed;
event times never going backwards; at most one pilot per node; and, after the final stop, no
process left behind.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import random
import shutil
import signal
import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from livekit import LiveServer, wait_for, write_env

from isthmus.live.client import ApiError, Client
from isthmus.live.launch import tagged_pids

TERMINAL = {"completed", "failed", "cancelled", "timeout"}
FAULTS = (
    "manager-kill",
    "manager-stop",
    "pilot-kill",
    "db-refuse",
    "spool-remove",
    "pilot-then-manager",
    "manager-then-pilot",
)


@dataclass
class CampaignReport:
    """What a campaign did and what it found wrong (`problems` empty: nothing lost)."""

    cycles: int = 0
    jobs: int = 0
    runs: int = 0
    body_executions: int = 0  # bodies that ran to their end (ledger), whatever was recorded
    double_executions: int = 0  # bodies that ran to their end beyond once per job
    restarts_recorded: int = 0
    outputs_lost_and_said: int = 0
    faults: Counter[str] = field(default_factory=Counter)
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def summary(self) -> str:
        """One line: the figures docs/reliability.md records."""
        faults = ", ".join(f"{k} {v}" for k, v in sorted(self.faults.items()))
        return (
            f"{self.cycles} cycles, {self.jobs} jobs, {self.runs} runs, {self.body_executions} body executions "
            f"({self.double_executions} beyond one per job), faults: {faults}; "
            f"{self.restarts_recorded} recorded restarts, {self.outputs_lost_and_said} outputs lost and said; "
            f"{len(self.problems)} problems; {self.seconds:.0f} s"
        )


def agents(tag: str) -> list[int]:
    """Pilot processes carrying `tag`."""
    out = []
    for pid in tagged_pids(tag):
        with contextlib.suppress(OSError):
            if b"isthmus.agent" in Path(f"/proc/{pid}/cmdline").read_bytes():
                out.append(pid)
    return out


def _refuse_writes(server: LiveServer, seconds: float) -> None:
    """Make the manager's database refuse writes for about `seconds`."""
    if server.db_url.startswith("sqlite"):
        lock = sqlite3.connect(server.db_url.removeprefix("sqlite:///"), timeout=10, isolation_level=None)
        try:
            lock.execute("BEGIN EXCLUSIVE")
            time.sleep(seconds)
            lock.execute("ROLLBACK")
        finally:
            lock.close()
        return
    import psycopg

    dsn = server.db_url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
    time.sleep(seconds)


def run_campaign(
    workdir: Path,
    db_url: str,
    tag: str,
    *,
    jobs: int,
    cycles: int,
    seed: int,
    faults: Sequence[str] = FAULTS,
    submit_every: float = 0.0,
    log: Callable[[str], None] = lambda _: None,
) -> CampaignReport:
    """Run `jobs` jobs through a manager while injecting `cycles` faults drawn from `faults`;
    `submit_every` seconds between submissions spreads the workload over a long campaign."""
    unknown = set(faults) - set(FAULTS)
    if unknown:
        raise ValueError(f"unknown faults {sorted(unknown)}: expected some of {', '.join(FAULTS)}")
    rng = random.Random(seed)
    report = CampaignReport()
    started = time.monotonic()
    ledger = workdir / "ledger"
    ledger.mkdir(parents=True)
    env = write_env(workdir / "env.toml", nodes=4, cores=2)
    server = LiveServer(
        env,
        workdir / "state",
        db_url,
        tag,
        pilot_timeout=6.0,
        heartbeat_timeout=4.0,
        reattach_timeout=3.0,
        poll_wait=1.0,
    ).start()
    acknowledged: list[int] = []
    attempts_unanswered = 0
    stop = threading.Event()
    spool_removed: set[int] = set()

    def submitter() -> None:
        nonlocal attempts_unanswered
        with Client(server.url, server.admin_token, timeout=5) as c:
            while len(acknowledged) < jobs and not stop.is_set():
                i = len(acknowledged)
                sleep = 0.2 + (i % 5) * 0.2
                mark = f"{ledger}/$ISTHMUS_JOB_ID"
                script = (
                    f'echo "start $ISTHMUS_RUN" >> {mark}; echo start $ISTHMUS_JOB_ID; '
                    f'sleep {sleep}; echo end $ISTHMUS_JOB_ID; echo "end $ISTHMUS_RUN" >> {mark}'
                )
                try:
                    acknowledged.append(c.submit(command="sh", args=["-c", script], size=1 if i % 10 else 2))
                except ApiError as exc:
                    # a lost answer may leave a stored job the campaign did not see: counted below
                    attempts_unanswered += exc.status in (0, 500, 502, 504)
                    time.sleep(0.2)
                if i % 20 == 19:
                    time.sleep(0.3)
                time.sleep(submit_every)

    def inject(fault: str) -> None:
        assert server.proc is not None
        if fault == "manager-kill":
            server.kill(signal.SIGKILL)
            time.sleep(rng.uniform(0.0, 1.0))
            server.start()
        elif fault == "manager-stop":
            server.proc.send_signal(signal.SIGSTOP)
            time.sleep(rng.uniform(5.0, 8.0))  # longer than the heartbeat timeout (4 s)
            server.proc.send_signal(signal.SIGCONT)
        elif fault == "pilot-kill":
            pilots = agents(tag)
            if pilots:
                os.kill(rng.choice(pilots), signal.SIGKILL)
        elif fault in ("pilot-then-manager", "manager-then-pilot"):
            pilots = agents(tag)
            victim = rng.choice(pilots) if pilots else None
            gap = rng.uniform(0.0, 0.05)

            def kill_pilot() -> None:
                if victim is not None:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(victim, signal.SIGKILL)

            first, second = (kill_pilot, server.kill) if fault == "pilot-then-manager" else (server.kill, kill_pilot)
            first()
            time.sleep(gap)
            second()
            time.sleep(rng.uniform(0.0, 1.0))
            server.start()
        elif fault == "db-refuse":
            _refuse_writes(server, rng.uniform(2.0, 5.0))
        elif fault == "spool-remove":
            with contextlib.suppress(ApiError), server.client() as c:
                running = [j["id"] for j in c.jobs() if j["state"] == "running" and j["id"] not in spool_removed]
                if running:
                    victim = rng.choice(running)
                    shutil.rmtree(server.state_dir / "spool" / str(victim), ignore_errors=True)
                    spool_removed.add(victim)

    # every kind in turn, in a shuffled order per turn: a short campaign still injects each
    schedule: list[str] = []
    while len(schedule) < cycles:
        turn = list(faults)
        rng.shuffle(turn)
        schedule.extend(turn)
    t = threading.Thread(target=submitter, daemon=True)
    t.start()
    try:
        for fault in schedule[:cycles]:
            time.sleep(rng.uniform(0.5, 2.5))
            inject(fault)
            report.faults[fault] += 1
            report.cycles += 1
            log(f"cycle {report.cycles}: {fault} ({len(acknowledged)} jobs submitted)")
        t.join(timeout=60 + jobs)
        if t.is_alive():
            report.problems.append("the workload could not be submitted")
            return report
        unanswered = attempts_unanswered + sum(
            report.faults[f] for f in ("manager-kill", "pilot-then-manager", "manager-then-pilot")
        )
        _check(server, report, jobs, acknowledged, unanswered, ledger, spool_removed)
    finally:
        stop.set()
        t.join(timeout=10)
        server.stop()
        report.seconds = time.monotonic() - started
    try:
        wait_for(lambda: not tagged_pids(tag), timeout=15, what="no process left behind")
    except AssertionError as exc:
        report.problems.append(str(exc))
    return report


def _check(
    server: LiveServer,
    report: CampaignReport,
    n_jobs: int,
    acknowledged: list[int],
    unanswered: int,
    ledger: Path,
    spool_removed: set[int],
) -> None:
    """Every job checked as the module docstring says; findings go to `report.problems`."""
    c = server.client()

    def all_done() -> bool:
        try:
            listed = c.jobs(all_=True)
        except ApiError:
            return False
        return len(listed) >= n_jobs and all(j["state"] in TERMINAL for j in listed)

    wait_for(all_done, timeout=60 + n_jobs, interval=0.5, what="every job terminal")
    jobs = {j["id"]: j for j in c.jobs(all_=True)}
    report.jobs = len(jobs)
    problems = report.problems
    if not set(acknowledged) <= set(jobs):
        problems.append(f"acknowledged jobs missing: {sorted(set(acknowledged) - set(jobs))}")
    if len(jobs) > n_jobs + unanswered:
        problems.append(f"{len(jobs)} jobs stored for {n_jobs} submissions and {unanswered} unanswered attempts")
    for jid in jobs:
        j = c.job(jid)
        hist = j["history"]
        terminal = [h for h in hist if h["state"] in TERMINAL]
        if len(terminal) != 1 or hist[-1]["state"] not in TERMINAL:
            problems.append(f"job {jid}: {len(terminal)} terminal states: {hist}")
        if j["state"] != "completed":
            problems.append(f"job {jid} ended {j['state']}: {hist}")
        marks = ledger / str(jid)
        lines = [ln.split() for ln in marks.read_text().splitlines()] if marks.exists() else []
        runs = [int(r) for what, r in lines if what == "start"]
        ends = [int(r) for what, r in lines if what == "end"]
        report.runs += len(runs)
        report.body_executions += len(ends)
        if len(runs) != len(set(runs)):
            problems.append(f"job {jid}: a run executed twice: {runs}")
        if not (set(runs) <= set(range(1, j["run"] + 1)) and j["run"] in runs):
            problems.append(f"job {jid}: executed runs {runs} are not the recorded ones (last run {j['run']})")
        if ends != [j["run"]]:
            report.double_executions += max(0, len(ends) - 1)
            problems.append(f"job {jid}: its body ran to its end in runs {ends}, not once in its last run {j['run']}")
        killed = sum(1 for h in hist if h["state"] == "killed")
        if j["restarts"] != j["run"] - 1 or killed != j["restarts"]:
            problems.append(f"job {jid}: {j['restarts']} restarts, {killed} kills, run {j['run']}")
        report.restarts_recorded += j["restarts"]
        if any(h["time"] < j["submit_time"] for h in hist):
            problems.append(f"job {jid}: stamped before its submission {j['submit_time']}: {hist}")
        try:
            out, _ = c.output(jid)
        except ApiError as exc:
            if jid in spool_removed and exc.status == 410:
                report.outputs_lost_and_said += 1
            else:
                problems.append(f"job {jid}: output refused: {exc.status} {exc}")
            continue
        if out != f"start {jid}\nend {jid}\n" and not (jid in spool_removed and out == ""):
            problems.append(f"job {jid}: output {out!r}")
    times = [row[0] for row in c.request("GET", "/events")]
    if not all(b >= a for a, b in itertools.pairwise(times)):
        problems.append("an event stamped before the one logged ahead of it")
    # pilots of earlier incarnations are gone: at most one pilot per node (4) and VM (2)
    try:
        wait_for(lambda: len(agents(server.tag)) <= 6, timeout=10, what="at most one pilot per node and VM")
    except AssertionError:
        problems.append(f"{len(agents(server.tag))} pilots for 4 nodes and 2 VMs")
