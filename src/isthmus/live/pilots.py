"""The pilot protocol: pilots register, long-poll for commands and report what their runs did.

A pilot (KOALA-CS launcher) stands for one cluster node or one cloud VM; `PilotHub` keeps one
`Node` per position and one `Assignment` per running job, turns the engine's start and kill
calls (through the local backends) into commands in each node's outbox, and turns pilots'
reports into engine events. It also judges pilots' liveness (heartbeats, registration
deadlines, exited processes) and replaces a lost pilot. Process spawning and signalling live
in `isthmus.backends.local`; the records the database projection needs of each run are kept
here, by (job, run).
"""

from __future__ import annotations

import asyncio
import logging
import math
import secrets
import signal
import socket
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import delete, insert, select, update

from isthmus.agent.fresh import remove_pools
from isthmus.agent.runexit import recorded_exit
from isthmus.backends.host import PilotLauncher
from isthmus.backends.jobfiles import run_files
from isthmus.backends.local import Slot, kill_group, kill_run, spawn_pilot, still_pilot, vm_node_key
from isthmus.backends.node import Node
from isthmus.engine.backend import CloudBackend, Vm
from isthmus.engine.clock import EV_VM_GONE, EV_VM_READY
from isthmus.engine.state import JobEntry, JobState
from isthmus.live.errors import RequestError
from isthmus.live.lost_runs import kill_lost_run, lost_before, poison_reason
from isthmus.model.states import PilotState, VmState
from isthmus.store import tables as db
from isthmus.store.projector import RunRecord
from isthmus.store.tokens import hash_token, new_token

if TYPE_CHECKING:
    from isthmus.live.context import LiveContext

log = logging.getLogger("isthmus.live")

PAUSE_CREDIT_AFTER = 2.0
"""Seconds between two housekeeping calls (normally at most ~0.5 s) that count as a pause of the
manager, credited to the pilots (see `PilotHub.housekeeping`)."""

RESEND_AFTER = 2.0
"""Seconds a command handed out in a report answer may stay unacknowledged before the long poll repeats it."""


@dataclass
class Assignment:
    """Where the current run of a job is: its slots, launched by the pilot of the first slot."""

    job: int
    run: int
    site: int
    slots: list[Slot]
    delivered: bool = False
    pid: int = 0  # the run's process (leader of its process group), as its pilot reported it

    @property
    def launcher(self) -> str:
        """Node key of the pilot that runs the command."""
        return self.slots[0][0]


class PilotHub:
    """Pilots of the local sites: their nodes, the runs assigned to them, the protocol and liveness.

    The local backends call `launch`, `kill`, `released`, `vm_boot` and `vm_shutdown`
    (isthmus.backends.local.PilotHub); the REST API calls `register`, `poll` and `report`.
    """

    def __init__(self, ctx: LiveContext) -> None:
        self.ctx = ctx
        self.nodes: dict[str, Node] = {}
        #: sites whose pilots a batch system runs (pilot mode), by site index
        self.launchers: dict[int, PilotLauncher] = {}
        self.assign: dict[int, Assignment] = {}
        #: slots and limit of each started run, by (job, run), for the database projection
        self.records: dict[tuple[int, int], RunRecord] = {}
        #: what pilots reported of ended runs, by (job, run)
        self.ended: dict[tuple[int, int], dict[str, Any]] = {}
        #: why runs were lost, by (job, run)
        self.lost_reasons: dict[tuple[int, int], str] = {}
        #: how many runs of each job were lost, counted in memory (the database is read once per job
        #: and manager start: a loss whose history line is not written yet still counts)
        self.lost_counts: dict[int, int] = {}
        #: True while recovery re-attaches runs (their start commands are not sent again)
        self.recovering = False
        #: Bumped whenever pilot tokens are deleted; the API's token cache is valid per generation.
        self.token_generation = 0
        self._incarnation = secrets.token_hex(3)
        self._pilot_counter = 0
        self._last_housekeeping = 0.0
        self._unwritten_rows: dict[str, PilotState] = {}  # node -> state whose pilot row a failed write lost

    # --------------------------------------------------------- what the projector asks

    def run_record(self, job: int, run: int) -> RunRecord | None:
        """The slots and limit of a started run."""
        return self.records.get((job, run))

    def run_end(self, job: int, run: int) -> dict[str, Any]:
        """What the pilot reported of an ended run."""
        return self.ended.get((job, run), {})

    def lost_reason(self, job: int, run: int) -> str | None:
        """Why a run was lost."""
        return self.lost_reasons.get((job, run))

    def forget(self, job: int) -> None:
        """Drop what is kept of the runs of a job that ended (after its end is stored)."""
        for d in (self.records, self.ended, self.lost_reasons):
            for key in [k for k in d if k[0] == job]:
                del d[key]
        self.lost_counts.pop(job, None)

    # --------------------------------------------------------------- the protocol

    def launch(self, entry: JobEntry, site: int, slots: Sequence[Slot]) -> None:
        """PilotHub: send a run to the pilot of its first slot (after the step's commit)."""
        job_id = entry.job.id
        a = Assignment(job_id, entry.run, site, [tuple(s) for s in slots])  # type: ignore[misc]
        self.assign[job_id] = a
        self.records[(job_id, entry.run)] = RunRecord(tuple(a.slots), entry.limit)
        if self.recovering:
            a.delivered = True
            return
        node = self.nodes.get(a.launcher)
        if node is None:
            log.error("job %s: no node %s", job_id, a.launcher)
            return
        node.send(self._start_command(a))

    def _start_command(self, a: Assignment) -> dict[str, Any]:
        spec = self.ctx.intake.specs.get(a.job, {})
        spool = self.ctx.spool / str(a.job)
        stdout, stderr, custom = run_files(spec, a.job, spool, a.run)
        hosts = self._hosts(a)
        env = {str(k): str(v) for k, v in (spec.get("env") or {}).items()}
        env.update(
            {
                "ISTHMUS_JOB_ID": str(a.job),
                "ISTHMUS_RUN": str(a.run),
                "ISTHMUS_NPROCS": str(len(a.slots)),
                "ISTHMUS_SLOTS": ",".join(f"{k}:{c}" for k, c in a.slots),
                "ISTHMUS_HOSTS": ",".join(f"{h}:{n}" for h, n in hosts),
                "ISTHMUS_SITE": self.ctx.env.sites[a.site].name,
            }
        )
        if self.ctx.config.tag:
            env["ISTHMUS_TAG"] = self.ctx.config.tag
        return {
            "op": "start",
            "job": a.job,
            "run": a.run,
            "command": spec.get("command", "true"),
            "args": list(spec.get("args") or []),
            "env": env,
            "cwd": spec.get("cwd") or str(spool),
            "spool": str(spool),
            "stdout": stdout,
            "stderr": stderr,
            "append": custom and a.run > 1,  # a restart keeps the earlier runs' output
            "script": spec.get("script"),
            "nodefile": str(spool / f"run{a.run}.nodes"),
            "hosts": hosts,
            # the Unix account the run is switched to ([users]; absent: the pilot's own)
            **self.ctx.run_as(self.ctx.intake.users.get(a.job, "")),
        }

    def _hosts(self, a: Assignment) -> list[tuple[str, int]]:
        """(host name, slots) of a run, in slot order, one entry per host: what an MPI launcher
        needs. A node's host is what its pilot reported at registration (this machine's name for
        local sites)."""
        counts: dict[str, int] = {}
        for key, _ in a.slots:
            node = self.nodes.get(key)
            host = (node.host if node is not None else "") or socket.gethostname()
            counts[host] = counts.get(host, 0) + 1
        return list(counts.items())

    def kill(self, entry: JobEntry) -> None:
        """PilotHub: tell the launcher pilot to kill the current run."""
        a = self.assign.get(entry.job.id)
        if a is None or a.run != entry.run:
            return
        node = self.nodes.get(a.launcher)
        if node is None:
            return
        if not a.delivered:
            # never delivered: withdraw the start command instead of killing
            node.outbox = [(s, c) for s, c in node.outbox if not (c.get("job") == a.job and c.get("run") == a.run)]
        node.send({"op": "kill", "job": a.job, "run": a.run})

    def released(self, entry: JobEntry) -> None:
        """PilotHub: the run ended; forget its assignment."""
        a = self.assign.get(entry.job.id)
        if a is not None and a.run == entry.run:
            del self.assign[entry.job.id]

    def vm_boot(self, site: int, vm: Vm, delay: float) -> None:
        """PilotHub: start the VM's pilot after the boot delay."""
        key = vm_node_key(site, vm.id)
        self.nodes[key] = Node(key, site, vm.cores, vm=vm.id)
        self.ctx.later(delay, self.boot_vm, key)

    def boot_vm(self, key: str) -> None:
        node = self.nodes.get(key)
        if node is None or node.state != PilotState.DOWN:
            return
        node.booting = True
        self.spawn(node)

    def vm_discarded(self, site: int, vm_id: int) -> None:
        """PilotHub: a failed VM is gone: stop whatever is left of its pilot."""
        node = self.nodes.pop(vm_node_key(site, vm_id), None)
        if node is not None and node.state != PilotState.DOWN:
            self.retire(node, "VM failed")

    def vm_shutdown(self, site: int, vm: Vm, delay: float) -> None:
        """PilotHub: stop the VM's pilot after the shutdown delay, then report it gone."""
        self.ctx.later(delay, self.shutdown_vm, site, vm.id)

    def shutdown_vm(self, site: int, vm_id: int) -> None:
        key = vm_node_key(site, vm_id)
        node = self.nodes.pop(key, None)
        if node is not None:
            self.retire(node, "VM released")
            # the pilot removes its spool pool when it exits; this catches one that was killed
            self.ctx.later(10.0, self.sweep_pools)
        with self.ctx.external():
            self.ctx.engine.handle(EV_VM_GONE, site, vm_id)

    def sweep_pools(self) -> None:
        """Remove the spool pools (see isthmus.agent.fresh) of nodes this manager no longer has."""
        remove_pools(self.ctx.spool, set(self.nodes))

    def spawn(self, node: Node) -> None:
        token = new_token()
        self.token_generation += 1  # the API forgets cached pilot tokens
        with self.ctx.store.begin() as conn:
            conn.execute(delete(db.tokens).where(db.tokens.c.node == node.key))
            self.ctx.store.add_token(conn, hash_token(token), user=None, kind="pilot", node=node.key)
        launcher = self.launchers.get(node.site)
        if launcher is not None:
            node.pilot_id = None
            launcher.launch_pilot(node, token)
            self.set_pilot_row(node, node.state)
            return
        extra = {"ISTHMUS_TAG": self.ctx.config.tag} if self.ctx.config.tag else {}
        proc = spawn_pilot(
            url=self.ctx.config.url,
            node=node.key,
            slots=node.slots,
            token=token,
            log_dir=self.ctx.state_dir / "pilots",
            pilot_timeout=self.ctx.config.pilot_timeout,
            extra_env=extra,
            extra_args=self.ctx.config.pilot_tls_args(),
        )
        node.proc = proc
        node.pid = proc.pid
        node.state = PilotState.SPAWNED
        node.pilot_id = None
        node.deadline = time.time() + self.ctx.config.spawn_timeout
        self.set_pilot_row(node, PilotState.SPAWNED)

    def retire(self, node: Node, reason: str) -> None:
        """Tell the pilot of `node` to exit (its runs end with it); its token stops working."""
        node.send({"op": "exit", "reason": reason})
        node.state = PilotState.EXITING
        pid, proc = node.pid, node.proc
        self.ctx.later(2.0, self.terminate, pid, proc)
        self.token_generation += 1  # the API forgets cached pilot tokens
        with self.ctx.store.begin() as conn:
            conn.execute(delete(db.tokens).where(db.tokens.c.node == node.key))
        self.set_pilot_row(node, PilotState.EXITED)

    def terminate(self, pid: int | None, proc: subprocess.Popen[bytes] | None) -> None:
        """SIGTERM a pilot's group now (it kills its runs), SIGKILL it 3 s later; never blocks."""
        if pid is None or not still_pilot(pid, proc):
            return
        kill_group(pid, signal.SIGTERM)

        def _hard() -> None:
            if still_pilot(pid, proc):
                kill_group(pid, signal.SIGKILL)
            if proc is not None:
                proc.poll()

        self.ctx.later(3.0, _hard)

    def set_pilot_row(self, node: Node, state: PilotState) -> None:
        """Record a pilot's state in the pilots table (what `isthmus sites` shows). Best effort:
        while the database refuses writes the row is rewritten by housekeeping once it works."""
        try:
            self._write_pilot_row(node, state)
            self._unwritten_rows.pop(node.key, None)
        except Exception as exc:
            log.debug("pilot row of %s not written: %s", node.key, exc)
            self._unwritten_rows[node.key] = state

    def _write_pilot_row(self, node: Node, state: PilotState) -> None:
        now = time.time()
        values = {
            "site": node.site,
            "slots": node.slots,
            "pid": node.pid,
            "host": node.host or None,
            "state": state.value,
            "last_seen": node.last_seen or None,
        }
        with self.ctx.store.begin() as conn:
            if conn.execute(select(db.pilots.c.node).where(db.pilots.c.node == node.key)).first() is None:
                conn.execute(insert(db.pilots).values(node=node.key, registered_at=None, **values))
            else:
                if state is PilotState.REGISTERED:
                    values["registered_at"] = now
                conn.execute(update(db.pilots).where(db.pilots.c.node == node.key).values(**values))

    def register(self, node_key: str, body: dict[str, Any]) -> dict[str, Any]:
        """A pilot (re)registers: reconcile what it runs with what the manager assigned."""
        node = self.nodes.get(node_key)
        if node is None or node.state == PilotState.EXITING:
            raise RequestError(410, f"node {node_key} is not part of this manager any more")
        with self.ctx.external():
            now = time.time()
            self._pilot_counter += 1
            node.pilot_id = f"{self._incarnation}-{self._pilot_counter}"
            if not node.remote:  # a remote pilot's pid means nothing on this machine
                node.pid = int(body.get("pid") or 0) or node.pid
            node.host = str(body.get("host") or "")
            node.last_seen = now
            node.deadline = math.inf
            node.state = PilotState.REGISTERED
            node.booting = False
            running = {(int(t["job"]), int(t["run"])) for t in body.get("running", [])}
            pids = {(int(t["job"]), int(t["run"])): _pid(t.get("pid")) for t in body.get("running", [])}
            # rebuild the outbox: re-send undelivered starts, drop everything else
            old = node.outbox
            node.outbox = []
            node.seq = 0
            node.sent = 0
            for a in [a for a in self.assign.values() if a.launcher == node.key]:
                if (a.job, a.run) in running:
                    a.delivered = True
                    a.pid = pids.get((a.job, a.run)) or a.pid
                    continue
                if any(r["job"] == a.job and r["run"] == a.run for r in body.get("reports", [])):
                    continue
                if not a.delivered and any(c.get("job") == a.job and c.get("run") == a.run for _, c in old):
                    node.send(self._start_command(a))
                    continue
                self.lose(a, f"pilot of {node.key} does not know run {a.run}")
            for job, run in running:
                current = self.assign.get(job)
                if current is None or current.run != run or current.launcher != node.key:
                    node.send({"op": "kill", "job": job, "run": run})
                    self.history_note(job, run, "stray run on a re-registered pilot killed")
            self._reports(node, body.get("reports", []))
            # bag launchers: the task ends it kept while unheard count; the lanes it (re)registers
            # with are preempted, those it lost failed (their tasks go back to their bags)
            self.ctx.bags.reports(node, body.get("tasks", []))
            self.ctx.bags.launchers_failed(node, "its pilot registered afresh")
            for lane in body.get("lanes", []):
                node.send({"op": "preempt", "bag": int(lane["bag"]), "lane": int(lane["lane"])})
            self.set_pilot_row(node, PilotState.REGISTERED)
            launcher = self.launchers.get(node.site)
            if launcher is not None:
                launcher.registered(node)
            if node.vm is not None:
                backend = self.ctx.engine.backends[node.site]
                assert isinstance(backend, CloudBackend)
                vm = backend.vms.get(node.vm)
                if vm is not None and vm.state is VmState.BOOTING:
                    self.ctx.engine.handle(EV_VM_READY, node.site, node.vm)
        return {
            "pilot_id": node.pilot_id,
            "poll_wait": self.ctx.config.poll_wait,
            "pilot_timeout": self.ctx.config.pilot_timeout,
            "spool": str(self.ctx.spool),
        }

    def history_note(self, job: int, run: int, detail: str) -> None:
        row = self.ctx.store.job(job)
        if row is None:
            return
        with self.ctx.store.begin() as conn:
            conn.execute(
                insert(db.job_history).values(job_id=job, time=time.time(), state=row["state"], run=run, detail=detail)
            )

    def _node_for(self, node_key: str, pilot_id: str) -> Node:
        node = self.nodes.get(node_key)
        if node is None or node.state == PilotState.EXITING:
            raise RequestError(410, f"node {node_key} is not part of this manager any more")
        if node.pilot_id != pilot_id:
            raise RequestError(409, "unknown pilot registration; register again")
        node.last_seen = time.time()
        return node

    async def poll(self, node_key: str, pilot_id: str, ack: int, wait: float) -> list[dict[str, Any]]:
        """Long poll: commands after `ack` for the pilot, waiting up to `wait` seconds for one.

        Commands the pilot already got in a report answer (see `report`) do not end the wait
        unless they stay unacknowledged for RESEND_AFTER seconds (that answer was lost).
        """
        node = self._node_for(node_key, pilot_id)
        self._drop_acked(node, ack)
        deadline = time.monotonic() + wait
        while not self._news(node, ack):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            ev = asyncio.Event()
            node.waiter = ev
            try:
                await asyncio.wait_for(ev.wait(), min(remaining, RESEND_AFTER))
            except TimeoutError:
                pass
            finally:
                if node.waiter is ev:
                    node.waiter = None
            node = self._node_for(node_key, pilot_id)
        self.ctx.persist()  # a command never reaches a pilot before what it implies is stored
        return self._commands_after(node, ack)

    @staticmethod
    def _news(node: Node, ack: int) -> bool:
        """Whether the pilot has commands after `ack` it has not been handed yet (or handed too long ago)."""
        if not node.outbox or node.outbox[-1][0] <= ack:
            return False
        return node.outbox[-1][0] > node.sent or time.monotonic() - node.sent_at > RESEND_AFTER

    @staticmethod
    def _commands_after(node: Node, ack: int, *, upto_exit: bool = False) -> list[dict[str, Any]]:
        """The outbox after `ack` as the pilot receives it; with `upto_exit`, only the commands
        before the first ``exit`` (which is left to the long poll)."""
        out = []
        for seq, cmd in node.outbox:
            if seq <= ack:
                continue
            if upto_exit and cmd.get("op") == "exit":
                break
            out.append({"seq": seq, **cmd})
        return out

    def _drop_acked(self, node: Node, ack: int) -> None:
        if not node.outbox or node.outbox[0][0] > ack:
            return
        keep = []
        for seq, cmd in node.outbox:
            if seq <= ack:
                if cmd.get("op") == "start":
                    a = self.assign.get(int(cmd["job"]))
                    if a is not None and a.run == cmd["run"]:
                        a.delivered = True
            else:
                keep.append((seq, cmd))
        node.outbox = keep

    def report(self, node_key: str, pilot_id: str, body: dict[str, Any]) -> list[dict[str, Any]]:
        """A pilot reports task events (started, ended); answers its commands after its ack.

        The answer carries the commands the reports led to (an end frees slots, the round it
        triggers starts the next runs on them), so a pilot gets its next run without waiting for
        its long poll to return and be sent again: one round trip per end instead of two. A
        pilot that never reads them still gets them from its long poll after RESEND_AFTER seconds.
        """
        node = self._node_for(node_key, pilot_id)
        ack = int(body.get("ack", 0))
        self._drop_acked(node, ack)
        with self.ctx.external():  # persists: what the commands imply is stored before they are answered
            self._reports(node, body.get("reports", []))
            self.ctx.bags.reports(node, body.get("tasks", []))
        cmds = self._commands_after(node, ack, upto_exit=True)
        if cmds and cmds[-1]["seq"] > node.sent:
            node.sent = cmds[-1]["seq"]
            node.sent_at = time.monotonic()
        return cmds

    def _reports(self, node: Node, reports: Sequence[dict[str, Any]]) -> None:
        started: list[tuple[int, int, float]] = []
        for r in reports:
            job, run = int(r["job"]), int(r["run"])
            a = self.assign.get(job)
            if a is None or a.run != run or a.launcher != node.key:
                # Only the pilot a run was given may report on it: a job that read its pilot's
                # token cannot end or start another node's runs. Stale reports (a run killed
                # and restarted meanwhile) end here too.
                if a is not None and a.run == run:
                    log.warning(
                        "pilot of %s reported on job %s run %s, given to %s: ignored", node.key, job, run, a.launcher
                    )
                continue
            if r.get("event") == "started":
                started.append((job, run, float(r.get("time", time.time()))))
                a.delivered = True
                a.pid = _pid(r.get("pid"))
            elif r.get("event") == "ended" and r.get("lost"):
                # killed with its pilot (a batch system ended the pilot's job): not the job's doing
                self.lose(a, f"pilot of {node.key} {str(r['lost'])[:200]}")
            elif r.get("event") == "ended":
                code = int(r.get("exit_code", -1))
                self.ended[(job, run)] = r
                self.ctx.engine.job_ended(job, run, code)
        if started:
            self.mark_running([(job, run, t, f"pilot {node.key}") for job, run, t in started])

    def mark_running(self, started: Sequence[tuple[int, int, float, str]]) -> None:
        """Runs (job, run, time, detail) confirmed running by their site: the store says so."""
        with self.ctx.store.begin() as conn:
            history = []
            for job, run, t, detail in started:
                res = conn.execute(db.UPDATE_JOB_RUNNING, {"b_id": job, "b_run": run})
                if res.rowcount:
                    history.append({"job_id": job, "time": t, "state": "running", "run": run, "detail": detail})
            if history:
                conn.execute(db.INSERT_HISTORY, history)

    def lose(self, a: Assignment, why: str) -> None:
        """The run of `a` was lost (its pilot died or forgot it): kill its processes, then kill it
        as LOST and requeue it, or fail its job when it lost too many runs (isthmus.live.lost_runs)."""
        entry = self.ctx.engine.entries.get(a.job)
        if entry is None or entry.state is not JobState.RUNNING or entry.run != a.run:
            self.assign.pop(a.job, None)
            kill_lost_run(self.ctx.spool, a.job, a.run, a.pid)
            return
        kill_lost_run(self.ctx.spool, a.job, a.run, a.pid)  # before its rerun can start
        code = recorded_exit(str(self.ctx.spool / str(a.job)), a.run)
        if code is not None and not 128 < code <= 192:
            # it ended by itself while nobody heard: that end counts, its body is not run again
            # (one killed by a signal died with its pilot, as the pilot itself judges: lost)
            log.warning("job %s run %s ended (%s) while its pilot was gone (%s): counted", a.job, a.run, code, why)
            self.ended[(a.job, a.run)] = {"exit_code": code}
            self.ctx.engine.job_ended(a.job, a.run, code)
            return
        count = self.lost_counts.get(a.job)
        count = (lost_before(self.ctx.store, a.job) if count is None else count) + 1
        self.lost_counts[a.job] = count
        poison = poison_reason(count, self.ctx.config.max_lost_runs, why)
        if poison is not None:
            log.warning("job %s run %s lost: %s; the job fails: %s", a.job, a.run, why, poison)
            self.ended[(a.job, a.run)] = {"error": poison}
            self.ctx.engine.job_ended(a.job, a.run, 1)
            return
        log.warning("job %s run %s lost: %s", a.job, a.run, why)
        self.lost_reasons[(a.job, a.run)] = why
        self.ctx.engine.lost(entry.job.id, entry.run)

    def housekeeping(self) -> None:
        """Judge pilots' liveness (heartbeats, registration deadlines, exited processes).

        A pause of the manager itself (SIGSTOP, a blocked loop) is not held against the pilots:
        the time since the previous housekeeping beyond its usual period is credited to every
        pilot's last heartbeat and registration deadline before judging. Nor is the time the
        store refuses every use (an immutable SQLite `-shm` file): no pilot is judged meanwhile.
        """
        now = time.time()
        since = now - self._last_housekeeping
        if since < 0.25:
            return
        if self._last_housekeeping and since > PAUSE_CREDIT_AFTER:
            log.warning("the manager did not run for %.1f s: pilots are not judged on that pause", since)
            for node in self.nodes.values():
                if node.last_seen:
                    node.last_seen += since
                node.deadline += since
        self._last_housekeeping = now
        if db.store_unsafe(self.ctx.store) is not None:
            # pilots cannot even be authenticated while the store may not be read: not held against them
            for node in self.nodes.values():
                node.last_seen = now if node.last_seen else 0.0
                node.deadline += since
            return
        if self._unwritten_rows and self.ctx.persist_error is None:
            for key, state in list(self._unwritten_rows.items()):
                if key in self.nodes:
                    self.set_pilot_row(self.nodes[key], state)
                else:
                    self._unwritten_rows.pop(key, None)
        lost: list[tuple[Node, str]] = []
        for node in list(self.nodes.values()):
            if node.state == PilotState.REGISTERED and now - node.last_seen > self.ctx.config.heartbeat_timeout:
                lost.append((node, "no heartbeat"))
            elif node.state in (PilotState.SPAWNED, PilotState.AWAITING) and now > node.deadline:
                lost.append((node, "did not register in time"))
            elif (
                node.state in (PilotState.SPAWNED, PilotState.REGISTERED)
                and node.proc is not None
                and node.proc.poll() is not None
            ):
                lost.append((node, f"pilot exited with {node.proc.returncode}"))
        if lost:
            with self.ctx.external():
                for node, why in lost:
                    self.node_lost(node, why)

    def node_lost(self, node: Node, why: str) -> bool:
        self.ctx.catch_up()  # the caller brackets the event
        if node.vm is not None and node.booting:
            # the VM never came up (its first pilot never registered): the VM failed; the
            # provisioning policy decides whether to lease another
            log.warning("VM %s failed to boot: its pilot %s", node.key, why)
            self.terminate(node.pid, node.proc)
            self.set_pilot_row(node, PilotState.LOST)
            self.ctx.engine.vm_failed(node.site, node.vm, f"boot failed: its pilot {why}")
            return True
        log.warning("pilot of %s lost: %s", node.key, why)
        self.terminate(node.pid, node.proc)
        self.ctx.bags.pilot_lost(node, f"pilot lost ({why})")
        for a in [a for a in self.assign.values() if a.launcher == node.key]:
            # "killed" means killed: the run's processes do not outlive their pilot here, so
            # that its rerun never runs beside it (they are in their own process group)
            if a.pid:
                kill_run(a.pid, a.job, a.run)
            self.lose(a, f"pilot of {node.key} lost ({why})")
        self.set_pilot_row(node, PilotState.LOST)
        launcher = self.launchers.get(node.site)
        if launcher is not None:
            launcher.pilot_lost(node)  # a new pilot job, under a new key
            return True
        node.proc = None
        node.pid = None
        node.outbox = []
        node.pilot_id = None
        if not self.ctx.stopping:
            self.spawn(node)  # the node (cluster node or leased VM) is still there: new pilot
        return True


def _pid(value: Any) -> int:
    """A process id from a pilot's report: a positive int, else 0 (unknown)."""
    try:
        pid = int(value)
    except (TypeError, ValueError):
        return 0
    return pid if 0 < pid < 2**31 else 0
