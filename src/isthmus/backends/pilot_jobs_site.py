"""A live cluster site behind a batch system in pilot mode (KOALA-CS launchers).

KOALA-CS (seeds/koala-cs-cycle-scavenging-thesis.txt, §3.3 "The Launcher Mechanism") does not
hand each task to the local resource manager: it submits *launchers* (pilot jobs) that hold
nodes and run the tasks it gives them, so that thousands of short tasks do not each wait in the
LRM's queue (§4.2, Table 4.1: 105.5% of the ideal makespan against 152% for direct submission). Here each position
of the site (`nodes` of them) is held by one pilot job of `cores_per_node` processors on one node;
once that job runs, its `isthmus agent` registers with the manager and its slots join the site
like those of a local node (the engine's bookkeeping is `LocalCluster`'s). The pilots are polled
in one batch per `poll_interval`:

- a pilot job queued in the LRM is "queued" (no deadline: it waits as long as the LRM makes it);
  once the LRM runs it, it must register within the manager's `spawn_timeout`;
- only registered pilots' slots count as online, so capacity follows the pilots the LRM grants;
- a pilot job that ends (cancelled, node failure, its walltime) is lost: its runs are killed as
  lost and requeued, and a new pilot job is submitted for the position;
- walltime renewal: a pilot with less than `renew_before` seconds of `pilot_walltime` left takes
  no new run and a replacement is submitted; the old one ends once its runs have ended, so
  renewing never kills a run (a run longer than `renew_before` may still meet the limit: it is
  then lost and requeued, never silently cut);
- local users first (KOALA-CS §3.2.1): each poll also reads what jobs this manager did not submit
  wait for in the LRM; positions are held only up to `nodes` less what `keep_free` and those
  waiting jobs need: `keep_free` plus their processors in whole positions, and at least the sum,
  job by job, of what each asks: its node count, at least its processors divided by
  `cores_per_node` (rounded up), so a `sbatch -N 2 -n 2` job gets two positions, not one (a job
  asking more memory a node than the LRM's nodes have gets none: no freed node would start it).
  Jobs of any site of this manager (their comment names it) are not local users': a direct
  site on the same partition does not make the pilots yield. Idle pilots beyond that are ended
  and pilot jobs still queued in the LRM cancelled, so that a local job waits for isthmus at most
  about a poll interval while isthmus's runs are never killed for it; pilots that run only bags'
  tasks are vacated for them (the bags' launchers there are preempted, the fair-share policy
  grows no bag on them, and they end once free), so bags on the site shrink within a poll
  interval plus the preemption time;
- elastic pilots (`pilots = "elastic"`): instead of every position, isthmus holds as many as its
  jobs need (the processors running here plus those queued for queues that may use this site,
  in whole positions, at least `min_pilots`): a burst submits pilot jobs, and a pilot running
  nothing for `idle_release` seconds beyond that demand ends (pilot jobs still queued in the
  LRM beyond it are cancelled at once). This is the backend's own rule, not a provisioning
  policy: a simulation treats the site as the cluster of its `nodes`;
- after a manager restart, the pilot jobs of this manager the LRM still holds are found by their
  comment: their pilots re-register and keep their runs (their slots count meanwhile); a pilot
  job no node is recorded for is cancelled (nothing runs twice), a recorded node whose job is
  gone is lost.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import secrets
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from isthmus.agent.jobenv import pilot_environment
from isthmus.backends.api import BatchSystem, Capacity, RemoteState, RunRequest
from isthmus.backends.errors import SiteError
from isthmus.backends.external import WorkerThread, cancel_quietly
from isthmus.backends.host import SiteHost
from isthmus.backends.local import LocalCluster
from isthmus.backends.node import Node
from isthmus.engine.state import JobEntry
from isthmus.model.site import Site
from isthmus.model.states import JobState, PilotState

log = logging.getLogger("isthmus.backends.pilot_jobs_site")

RETRY_AFTER = 10.0
"""Seconds before positions are filled again after the LRM refused a pilot job."""


def pilot_key(site: int, position: int) -> str:
    """A fresh node key for a pilot of `position` (each pilot job gets its own key)."""
    return f"{site}/p{position}-{secrets.token_hex(3)}"


def position_of(key: str) -> int:
    """The position in a pilot key `<site>/p<position>-<hex>`; -1 for any other key."""
    _, _, rest = key.partition("/p")
    pos, sep, _ = rest.partition("-")
    return int(pos) if sep and pos.isdigit() else -1


class PilotJobs(WorkerThread, LocalCluster):
    """A cluster site whose slots are held by pilot jobs of a batch system (see the module docstring)."""

    def __init__(self, index: int, site: Site, make: Callable[[str], BatchSystem], ctx: SiteHost) -> None:
        super().__init__(index, site, ctx.hub)
        assert site.lrm is not None
        self.ctx = ctx
        self.lrm = site.lrm
        self._make = make
        self.batch: BatchSystem | None = None
        self.all_slots = []  # slots of registered pilots that take new runs
        self.online = self.free = 0
        self.job_of: dict[str, str] = {}  # node key -> provider id of its pilot job
        self.since: dict[str, float] = {}  # node key -> when its pilot job was first seen running
        self.retiring: set[str] = set()  # pilots near their walltime: no new run
        self.vacating: set[str] = set()  # pilots whose bag launchers are preempted for local jobs: no new run
        self.cancel_when_known: set[str] = set()  # ended before the LRM answered their submission
        self._polling = False
        self._filling_after: float = 0.0  # no new pilot job before this (after a refusal)
        #: processors local users' jobs (not this manager's) wait for in the LRM, at the last poll
        self.waiting_local = 0
        #: positions (whole nodes) those jobs need, at the last poll
        self.waiting_nodes = 0
        self.idle_since: dict[str, float] = {}  # node key -> since when its pilot runs nothing

    # ------------------------------------------------------------------------ plumbing

    @property
    def system(self) -> BatchSystem:
        """The batch system (connected by `begin`)."""
        if self.batch is None:
            raise RuntimeError(f"site {self.name} is used before the manager started it")
        return self.batch

    def nodes(self) -> list[Node]:
        """This site's pilot positions' nodes, current and retiring."""
        return [n for n in self.ctx.hub.nodes.values() if n.site == self.index]

    def restore(self, rows: Sequence[dict[str, Any]], now: float) -> None:
        """Before a restart's recovery: the pilots recorded as alive become nodes awaiting their
        pilot's re-registration (`begin` then checks their jobs with the LRM)."""
        for row in rows:
            key = str(row["node"])
            if (
                row["site"] != self.index
                or position_of(key) < 0
                or row["state"] in (PilotState.EXITED, PilotState.LOST)
            ):
                continue
            node = Node(key, self.index, int(row["slots"]), remote=True)
            node.state = PilotState.AWAITING
            node.deadline = now + self.ctx.config.reattach_timeout
            self.ctx.hub.nodes[key] = node
            if row.get("registered_at"):
                self.since[key] = float(row["registered_at"])
        self._recount()

    def begin(self, manager_id: str) -> None:
        """Connect to the system as manager `manager_id`, find its pilot jobs, fill the positions."""
        self.batch = self._make(manager_id)
        self.worker.call(self.system.find, done=self._found)

    def _found(self, result: dict[str, RemoteState] | SiteError) -> None:
        if isinstance(result, SiteError):
            # filling positions now could run pilots twice (those of before a restart): retry
            self.unavailable = f"cannot list its jobs: {result}"
            log.warning("site %s: %s", self.name, self.unavailable)
            self.ctx.later(self.lrm.poll_interval, self.begin, self.batch_id())
            return
        self.unavailable = ""
        with self.ctx.external():
            held = {
                st.key: pid for pid, st in result.items() if not st.state.terminal and st.state is not JobState.LOST
            }
            stale = [pid for key, pid in held.items() if key not in self.ctx.hub.nodes]
            for node in self.nodes():
                pid = held.get(node.key)
                if pid is None:
                    self.ctx.hub.node_lost(node, "its pilot job is gone")
                    continue
                self.job_of[node.key] = pid
                if result[pid].state is JobState.QUEUED:
                    node.state = PilotState.QUEUED
                    node.deadline = math.inf
            if stale:
                log.warning(
                    "site %s: cancelling %d pilot job(s) no node is recorded for: %s", self.name, len(stale), stale
                )
                self.worker.call(self.system.cancel, stale, done=lambda r: None)
            self.fill()
            self._recount()
        self.ctx.later(0.0, self.poll)

    def batch_id(self) -> str:
        """The manager id the system was connected with."""
        return self.ctx.store.get_meta("manager_id") or ""

    # ------------------------------------------------------------------ pilots' lifecycle

    def positions_allowed(self) -> int:
        """How many positions isthmus may hold now: `nodes` less the positions that `keep_free`
        and local users' waiting jobs need (KOALA-CS §3.2.1: local jobs first)."""
        cores = self.site.cores_per_node
        keep = max(math.ceil((self.lrm.keep_free + self.waiting_local) / cores), self.waiting_nodes)
        return max(0, self.site.nodes - keep)

    def nodes_for(self, capacity: Capacity) -> int:
        """The positions local users' waiting jobs need: per job, its nodes or its processors in
        whole positions, whichever is more (a system that lists no job: its processors, rounded up)."""
        if not capacity.waiting_jobs:
            return math.ceil(capacity.waiting_local / self.site.cores_per_node)
        return sum(j.nodes_needed(self.site.cores_per_node, capacity.node_memory) for j in capacity.waiting_jobs)

    def positions_wanted(self) -> int:
        """Positions to hold now: all that are allowed ("fixed"), or ("elastic") as many as the
        processors running here and queued for this site need, at least `min_pilots`."""
        allowed = self.positions_allowed()
        if self.lrm.pilots != "elastic":
            return allowed
        engine = self.ctx.engine
        demand = sum(e.job.size for e in self.running.values())
        for queue, sites in zip(engine.queues, engine.stage_sites, strict=True):
            if self.index in sites:
                demand += sum(e.job.size for e in queue.values())
        need = max(self.lrm.min_pilots, math.ceil(demand / self.site.cores_per_node))
        return min(need, allowed)

    def fill(self) -> None:
        """Submit a pilot job for every position no current pilot holds, up to `positions_wanted`."""
        if self.ctx.stopping or time.time() < self._filling_after:
            return
        held = {position_of(n.key) for n in self.nodes() if n.key not in self.retiring}
        room = self.positions_wanted() - len(held)
        for pos in range(self.site.nodes):
            if room <= 0:
                break
            if pos not in held:
                room -= 1
                key = pilot_key(self.index, pos)
                node = Node(key, self.index, self.site.cores_per_node, remote=True)
                self.ctx.hub.nodes[key] = node
                self.ctx.hub.spawn(node)  # calls launch_pilot with the pilot's token

    def launch_pilot(self, node: Node, token: str) -> None:
        """PilotLauncher: submit the pilot job of `node` (off the loop); its token goes in a file
        only its user can read, removed once the pilot registered."""
        token_file = token_path(self.ctx.state_dir, node.key)
        pilots = token_file.parent
        pilots.mkdir(parents=True, exist_ok=True)
        safe = node.key.replace("/", "-")
        fd = os.open(token_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(token + "\n")
        env = pilot_environment(self.ctx.config.tag)  # never the manager's: no secret reaches its jobs
        request = RunRequest(
            key=node.key,
            command=(
                sys.executable,
                "-m",
                "isthmus.agent",
                "--url",
                self.ctx.config.url,
                "--node",
                node.key,
                "--slots",
                str(node.slots),
                "--timeout",
                str(self.ctx.config.pilot_timeout),
                "--token-file",
                str(token_file),
                *self.ctx.config.pilot_tls_args(),  # a shared file system: the manager's CA file is theirs
            ),
            size=node.slots,
            nodes=1,
            walltime=self.lrm.pilot_walltime,
            name=f"isthmus-pilot-{self.name}",
            cwd=str(pilots),
            stdout=str(pilots / f"{safe}.log"),
            env=env,
        )
        node.state = PilotState.QUEUED
        node.deadline = math.inf
        self.worker.call(self.system.submit, [request], done=lambda r: self._submitted(node.key, r))

    def _submitted(self, key: str, result: list[str | SiteError] | SiteError) -> None:
        outcome = result if isinstance(result, SiteError) else result[0]
        node = self.ctx.hub.nodes.get(key)
        if isinstance(outcome, SiteError):
            self.unavailable = f"pilot job refused: {outcome}"
            log.warning("site %s: %s", self.name, self.unavailable)
            if node is not None:
                self._drop(node)
            self._filling_after = time.time() + RETRY_AFTER
            self.ctx.later(RETRY_AFTER, self.fill)
            return
        if node is None or key in self.cancel_when_known:
            self.cancel_when_known.discard(key)
            self.worker.call(self.system.cancel, [outcome], done=lambda r: None)
            return
        self.job_of[key] = outcome
        log.info("site %s: pilot %s is job %s", self.name, key, outcome)

    def registered(self, node: Node) -> None:
        """PilotLauncher: the pilot of `node` registered: its token file goes, its slots count."""
        with contextlib.suppress(OSError):
            token_path(self.ctx.state_dir, node.key).unlink()
        self.since.setdefault(node.key, time.time())
        self._recount()
        self.ctx.engine.request_round(self.ctx.clock.now)

    def pilot_lost(self, node: Node) -> None:
        """PilotLauncher: the pilot of `node` was lost (its runs already are): end its job if it
        is still there, forget the node and submit a new pilot for the position."""
        never_registered = node.pilot_id is None and node.key not in self.since
        self._drop(node)
        self._recount()
        if never_registered and not self.ctx.stopping:
            # a pilot job that ends before its agent registers (a broken node, a wrong URL)
            # would be resubmitted every poll: wait a little first
            self._filling_after = max(self._filling_after, time.time() + RETRY_AFTER)
            self.ctx.later(RETRY_AFTER, self.fill)
        self.fill()

    def _drop(self, node: Node) -> None:
        """Forget `node`; cancel its pilot job if the LRM still holds it."""
        self.ctx.hub.nodes.pop(node.key, None)
        self.retiring.discard(node.key)
        self.since.pop(node.key, None)
        with contextlib.suppress(OSError):
            token_path(self.ctx.state_dir, node.key).unlink()
        pid = self.job_of.pop(node.key, None)
        if pid is None and node.state == PilotState.QUEUED:  # its submission has not answered yet
            self.cancel_when_known.add(node.key)
        else:
            self.worker.call(self.system.cancel, [pid], done=lambda r: None)

    def _end(self, node: Node, reason: str) -> None:
        """A pilot with no run left is told to exit; its job is cancelled a little later."""
        self.ctx.hub.retire(node, reason)
        self.ctx.hub.nodes.pop(node.key, None)
        self.retiring.discard(node.key)
        pid = self.job_of.get(node.key)
        if pid is not None:
            self.ctx.later(5.0, self._cancel_if_held, node.key, pid)

    def _cancel_if_held(self, key: str, pid: str) -> None:
        if self.job_of.get(key) == pid:
            self.job_of.pop(key, None)
            self.worker.call(self.system.cancel, [pid], done=lambda r: None)

    # ------------------------------------------------------------------------ polling

    def poll(self) -> None:
        """Ask the system for the state of every pilot job (one batch, off the loop)."""
        if self.ctx.stopping:
            return
        if self._polling:
            self.ctx.later(self.lrm.poll_interval, self.poll)
            return
        self._polling = True
        ids = dict(self.job_of)
        self.worker.call(self._observe, list(ids.values()), done=lambda r: self._observed(ids, r))

    def _observe(self, provider_ids: list[str]) -> tuple[Capacity, dict[str, RemoteState]]:
        """In the worker thread: what local jobs wait for, and the pilot jobs' states."""
        return self.system.capacity(), self.system.status(provider_ids) if provider_ids else {}

    def _shrink(self, now: float) -> None:
        """End pilots beyond what is allowed or wanted. Beyond `positions_allowed` (local users
        wait): pilot jobs still queued in the LRM first (they hold no node but compete with local
        jobs), then registered pilots running nothing, at once. Beyond `positions_wanted` (elastic,
        no demand): queued pilot jobs at once, registered ones once idle `idle_release` seconds."""
        held = [n for n in self.nodes() if n.key not in self.retiring]
        busy = {slot[0] for slot in self.slots}
        queued = [n for n in held if n.state == PilotState.QUEUED]
        idle = [n for n in held if n.state == PilotState.REGISTERED and n.key not in busy]
        idle.sort(key=lambda n: self.idle_since.get(n.key, now))  # longest idle first
        excess = len(held) - self.positions_allowed()
        for node in (queued + idle)[: max(0, excess)]:
            self._end_pilot(node, "local users' jobs wait for its node")
        self._vacate(excess - len(queued) - len(idle))
        held = [n for n in self.nodes() if n.key not in self.retiring]
        excess = len(held) - self.positions_wanted()
        if excess <= 0:
            return
        unwanted = [n for n in queued if n.key in self.ctx.hub.nodes] + [
            n
            for n in idle
            if n.key in self.ctx.hub.nodes and now - self.idle_since.get(n.key, now) >= self.lrm.idle_release
        ]
        for node in unwanted[:excess]:
            self._end_pilot(node, "no isthmus job needs it")

    def _vacate(self, count: int) -> None:
        """Local users' jobs still wait for `count` positions no idle pilot gave: the pilots that
        run only bags' tasks (fewest lanes first) are vacated; pilots vacated before and no longer
        needed take runs again."""
        bags = self.ctx.engine.bags
        only_bags = {
            n.key: self.ctx.bags.lanes_on(n.key)
            for n in self.nodes()
            if n.state == PilotState.REGISTERED
            and n.key not in self.retiring
            and any(k == n.key for k, _ in self.slots)
            and all(bags.get(job) is not None for (k, _), job in self.slots.items() if k == n.key)
        }
        chosen = sorted(only_bags, key=lambda k: (k not in self.vacating, only_bags[k], k))[: max(0, count)]
        self.vacating = set(chosen)
        for key in chosen:
            node = self.ctx.hub.nodes[key]
            self.ctx.bags.vacate(node, "local users' jobs wait for its node")

    def take_bag_slot(self, bag_id: int) -> tuple[str, int]:
        """A free slot of a pilot taking new runs for a bag's processor."""
        slot = super().take_bag_slot(bag_id)
        self._recount()
        return slot

    def give_bag_slot(self, slot: tuple[str, int]) -> None:
        """A bag's processor was given back."""
        super().give_bag_slot(slot)
        self._recount()

    def _end_pilot(self, node: Node, reason: str) -> None:
        """End one pilot: cancel its job if still queued in the LRM, else tell it to exit."""
        log.info("site %s: pilot %s ends: %s", self.name, node.key, reason)
        self.idle_since.pop(node.key, None)
        if node.state == PilotState.QUEUED:
            self._drop(node)
        else:
            self._end(node, reason)

    def _observed(self, ids: dict[str, str], result: tuple[Capacity, dict[str, RemoteState]] | SiteError) -> None:
        self._polling = False
        self.ctx.later(self.lrm.poll_interval, self.poll)
        if self.ctx.stopping:
            return
        with self.ctx.external():
            if isinstance(result, SiteError):
                if not self.unavailable:
                    log.warning("site %s unavailable: %s", self.name, result)
                self.unavailable = str(result)
                return
            if self.unavailable:
                self.ctx.engine.request_round(self.ctx.clock.now)  # it answers again: decide again
            self.unavailable = ""
            capacity, states = result
            self.waiting_local = capacity.waiting_local
            self.waiting_nodes = self.nodes_for(capacity)
            now = time.time()
            for key, pid in ids.items():
                if self.job_of.get(key) != pid:
                    continue
                st = states.get(pid)
                node = self.ctx.hub.nodes.get(key)
                if st is None or st.state.terminal or st.state is JobState.LOST:
                    self.job_of.pop(key, None)
                    if node is not None:
                        native = st.native if st is not None else "no longer known"
                        self.ctx.hub.node_lost(node, f"its pilot job {pid} ended ({native})")
                elif node is not None and st.state is JobState.RUNNING:
                    self.since.setdefault(key, now)
                    if node.state == PilotState.QUEUED:  # the LRM runs it: the agent registers shortly
                        node.state = PilotState.SPAWNED
                        node.deadline = now + self.ctx.config.spawn_timeout
                        self.ctx.hub.set_pilot_row(node, PilotState.SPAWNED)
            self._renew(now)
            self._shrink(now)
            self._recount()
            self.fill()

    def _renew(self, now: float) -> None:
        """Pilots near their walltime take no new run (a replacement is submitted by `fill`);
        those with no run left end."""
        walltime = self.lrm.pilot_walltime
        if walltime is not None:
            for node in self.nodes():
                since = self.since.get(node.key)
                if (
                    node.state == PilotState.REGISTERED
                    and since is not None
                    and node.key not in self.retiring
                    and walltime - (now - since) <= self.lrm.renew_before
                ):
                    log.info("site %s: pilot %s is near its walltime: replaced", self.name, node.key)
                    self.retiring.add(node.key)
        busy = {slot[0] for slot in self.slots}
        for key in list(self.retiring):
            old = self.ctx.hub.nodes.get(key)
            if old is not None and key not in busy:
                self._end(old, "walltime renewal")

    def pilot_counts(self) -> dict[str, int]:
        """How many pilots are in each state (queued in the LRM, registered, retiring, ...)."""
        counts: dict[str, int] = {}
        for node in self.nodes():
            state = "retiring" if node.key in self.retiring else node.state
            counts[state] = counts.get(state, 0) + 1
        return counts

    def _recount(self) -> None:
        """Online and free processors: the slots of registered pilots that take new runs, and of
        those expected back after a restart (a run given to one waits for its re-registration;
        if it does not come back, the run is lost and requeued)."""
        usable = [
            n
            for n in self.nodes()
            if n.state in (PilotState.REGISTERED, PilotState.AWAITING)
            and n.key not in self.retiring
            and n.key not in self.vacating
        ]
        busy = {slot[0] for slot in self.slots}
        now = time.time()
        self.idle_since = {n.key: self.idle_since.get(n.key, now) for n in usable if n.key not in busy}
        self.all_slots = [(n.key, c) for n in usable for c in range(n.slots)]
        self.online = len(self.all_slots)
        self.free = sum(1 for s in self.all_slots if s not in self.slots)

    # ---------------------------------------------------------------------- SiteBackend

    def start(self, entry: JobEntry, now: float) -> None:
        """Occupy slots of registered pilots and send the run to the first one's pilot."""
        super().start(entry, now)
        self._recount()

    def _release(self, entry: JobEntry) -> None:
        super()._release(entry)
        self._recount()

    def available(self, now: float) -> bool:
        """Not while the system does not answer."""
        return not self.unavailable and super().available(now)

    def cancel_all(self) -> None:
        """At a stop that ends jobs: cancel every pilot job of this manager (blocking)."""
        cancel_quietly(self.batch, list(self.job_of.values()), self.name)

    def describe(self) -> dict[str, object]:
        """The site's figures (`SiteBackend.describe`), its batch system (driver, mode, the
        processors kept free for local users and those local users' jobs wait for at the last
        poll) and its pilots by state."""
        d = super().describe()
        d["lrm"] = {
            "driver": self.lrm.driver,
            "mode": self.lrm.mode,
            "keep_free": self.lrm.keep_free,
            "waiting_local": self.waiting_local,
            "waiting_nodes": self.waiting_nodes,
        }
        d["pilots"] = self.pilot_counts()
        return d


def token_path(state_dir: Path, key: str) -> Path:
    """Where the token of the pilot of node `key` waits for it."""
    return state_dir / "pilots" / f"{key.replace('/', '-')}.token"
