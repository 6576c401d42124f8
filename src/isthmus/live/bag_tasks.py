"""Live bags of tasks: the engine's bag launchers (isthmus.engine.bags) on the pilots.

`BagRunner` is the `BagLauncher` of the live engine: each processor a fair-share policy grows a
bag by is bound to one free slot of a pilot (a *lane*, `LocalCluster.take_bag_slot`; on a cloud,
a core of the pilot of the VM the engine placed the launcher on), and the
engine's hand-outs become the pilot commands of the KOALA-CS launcher protocol (docs/bags.md,
Tables 3.1/3.2 of the thesis): ``tasks`` (TASKS: append to the lane's local list), ``preempt``
(PREEMPT). The pilots' task reports (RESULT or FAILURE: ``ended`` with the exit code;
``preempted``) come back here and go to the engine (`BagBook.task_ended`, `BagBook.freed`).
Only the pilot a lane was given may report on it.

A launcher whose pilot is lost or registers afresh (a restarted pilot or manager forgot its
lanes, and may have lost commands) is a failed launcher (§3.6): its task goes back to the bag's
queue and its processor is free at once; the fair-share policy grows the bag again.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from isthmus.backends.local import LocalCluster, vm_node_key
from isthmus.backends.local import Slot as PilotSlot
from isthmus.engine.bags import Bag, Slot
from isthmus.live.lost_runs import kill_lost_tasks
from isthmus.store import tables as db

if TYPE_CHECKING:
    from isthmus.backends.node import Node
    from isthmus.engine.clock import RealtimeClock
    from isthmus.engine.engine import Engine
    from isthmus.live.context import LiveContext
    from isthmus.model.environment import Environment

log = logging.getLogger("isthmus.live")

LOST = "lost"
"""The policy named in the SHRINK event of a failed launcher (its pilot was lost or forgot it)."""
LOCAL_JOBS = "lrm-local"
"""The policy named in the SHRINK event of launchers preempted for local users' jobs waiting in a
pilot-mode site's batch system (isthmus.backends.pilot_jobs_site)."""


def out_dir(spool: str, bag: int) -> str:
    """The directory the outputs of the tasks of `bag` go to (``<task>.out``, ``<task>.err``)."""
    return f"{spool}/{bag}/tasks"


class BagRunner:
    """The live engine's `BagLauncher`: lanes on pilot slots, commands out, task reports in."""

    def __init__(self, ctx: LiveContext, prefetch: int = 1) -> None:
        self.ctx = ctx
        #: tasks a lane keeps ahead of the one it runs (the launcher's local list)
        self.prefetch = prefetch
        #: the command lines of the tasks of each active bag, by bag id
        self.commands: dict[int, list[str]] = {}
        #: (bag, engine slot id) -> the pilot slot its lane runs on
        self.lanes: dict[tuple[int, int], PilotSlot] = {}
        #: lanes given back, (bag, slot) -> node key: a late report of theirs is still accepted
        self.closed: dict[tuple[int, int], str] = {}
        #: (bag, task) -> runtime its pilot measured, until the end is stored
        self.runtimes: dict[tuple[int, int], float] = {}
        #: after a restart: (bag, task) -> the node it was recorded running on (its end still counts)
        self.recovered: dict[tuple[int, int], str] = {}

    # ---------------------------------------------------------------- BagLauncher

    def open(self, bag: Bag, slot: Slot) -> None:
        """Bind the new processor to a free pilot slot of its site: a cluster's, or a core of the
        pilot of the cloud VM the engine placed it on (`Slot.vm`)."""
        backend = self.ctx.engine.backends[slot.site]
        if isinstance(backend, LocalCluster):
            self.lanes[(bag.id, slot.id)] = backend.take_bag_slot(bag.id)
        else:
            key = vm_node_key(slot.site, slot.vm)
            self.lanes[(bag.id, slot.id)] = (key, self.lanes_on(key))

    def tasks(self, bag: Bag, slot: Slot, tasks: Sequence[int]) -> None:
        """TASKS: the lane's pilot appends `tasks` to its local list."""
        node = self._node(bag.id, slot.id)
        if node is None:
            return
        spec = self.ctx.intake.specs.get(bag.id, {})
        commands = self.commands.get(bag.id, [])
        env = {str(k): str(v) for k, v in (spec.get("env") or {}).items()}
        if self.ctx.config.tag:
            env["ISTHMUS_TAG"] = self.ctx.config.tag
        node.send(
            {
                "op": "tasks",
                "bag": bag.id,
                "lane": slot.id,
                "out_dir": out_dir(str(self.ctx.spool), bag.id),
                "cwd": spec.get("cwd"),
                "env": env,
                **self.ctx.run_as(self.ctx.intake.users.get(bag.id, "")),
                "tasks": [{"task": t, "command": commands[t]} for t in tasks],
            }
        )

    def preempt(self, bag: Bag, slot: Slot) -> None:
        """PREEMPT: the lane's pilot kills its task and drops its list."""
        node = self._node(bag.id, slot.id)
        if node is not None:
            node.send({"op": "preempt", "bag": bag.id, "lane": slot.id})

    def drop(self, bag: Bag, slot: Slot, task: int) -> None:
        """DROP: the lane's pilot takes `task` off its local list (if it has not started it)."""
        node = self._node(bag.id, slot.id)
        if node is not None:
            node.send({"op": "drop", "bag": bag.id, "lane": slot.id, "tasks": [task]})

    def close(self, bag: Bag, slot: Slot) -> None:
        """The processor is given back: its pilot slot is free for any job."""
        pilot_slot = self.lanes.pop((bag.id, slot.id), None)
        if pilot_slot is None:
            return
        self.closed[(bag.id, slot.id)] = pilot_slot[0]
        backend = self.ctx.engine.backends[slot.site]
        if isinstance(backend, LocalCluster):
            backend.give_bag_slot(pilot_slot)  # a cloud VM's core: the engine gave it back

    def _node(self, bag: int, slot: int) -> Node | None:
        pilot_slot = self.lanes.get((bag, slot))
        return self.ctx.hub.nodes.get(pilot_slot[0]) if pilot_slot is not None else None

    # ------------------------------------------------------------ what the projector asks

    def node(self, bag: int, slot: int) -> str | None:
        """The pilot node of a lane (also shortly after it was given back)."""
        pilot_slot = self.lanes.get((bag, slot))
        return pilot_slot[0] if pilot_slot is not None else self.closed.get((bag, slot))

    def runtime(self, bag: int, task: int) -> float | None:
        """The runtime the pilot measured for the last run of a task that ended."""
        return self.runtimes.pop((bag, task), None)

    def forget(self, bag: int) -> None:
        """The bag's end is stored: drop its command lines and its lanes' records."""
        self.commands.pop(bag, None)
        for key in [k for k in self.closed if k[0] == bag]:
            del self.closed[key]

    # ------------------------------------------------------------------- pilot reports

    def reports(self, node: Node, reports: Sequence[dict[str, Any]]) -> None:
        """Task reports of the pilot of `node`: RESULT/FAILURE (``ended``) and ``preempted``."""
        bags = self.ctx.engine.bags
        for r in reports:
            key = (int(r["bag"]), int(r["lane"]))
            owner = self.lanes.get(key)
            where = owner[0] if owner is not None else self.closed.get(key)
            task = int(r["task"]) if r.get("task") is not None else None
            if where is None and task is not None and self.recovered.get((key[0], task)) == node.key:
                # run before a manager restart: a success stands (the task is not run again)
                del self.recovered[(key[0], task)]
                self._ended(key, task, r)
                continue
            if where != node.key:
                log.warning("pilot of %s reported on lane %s of bag %s, not its own: ignored", node.key, key[1], key[0])
                continue
            if r.get("event") == "preempted":
                bags.freed(*key)
            elif r.get("event") == "ended" and task is not None:
                if r.get("error"):
                    log.warning("bag %s task %s on %s: %s", key[0], task, node.key, str(r["error"])[:300])
                self._ended(key, task, r)

    def _ended(self, lane: tuple[int, int], task: int, r: dict[str, Any]) -> None:
        """Hand a task's end to the engine (with the runtime its pilot measured, for its row)."""
        if r.get("runtime") is not None:
            self.runtimes[(lane[0], task)] = float(r["runtime"])
        if not self.ctx.engine.bags.task_ended(lane[0], lane[1], task, int(r.get("exit_code", -1))):
            self.runtimes.pop((lane[0], task), None)  # not counted: no row to write it to

    def pilot_lost(self, node: Node, why: str) -> None:
        """The pilot of `node` is gone: the tasks it started (on its lanes, or recorded running on it
        before a manager restart) are killed, then its lanes failed (`launchers_failed`); an end
        it ran before the restart no longer counts, the task is run again."""
        recovered = [k for k, where in self.recovered.items() if where == node.key]
        bags = [b for (b, _), where in self.lanes.items() if where[0] == node.key] + [b for b, _ in recovered]
        if bags:
            killed = kill_lost_tasks([(b, out_dir(str(self.ctx.spool), b)) for b in bags], node.key)
            if killed:
                log.warning("%d task processes of the lost pilot of %s killed", killed, node.key)
        for k in recovered:
            del self.recovered[k]
        self.launchers_failed(node, why)

    def launchers_failed(self, node: Node, why: str) -> None:
        """Every lane on `node` failed (its pilot was lost, or registered without them): their
        tasks go back to their bags' queues and their processors are free at once."""
        self._preempt_node(node, why, LOST, free_now=True)

    def vacate(self, node: Node, why: str) -> bool:
        """Preempt every lane on `node` (local users' jobs wait for it, KOALA-CS §3.2.1): the
        processors are free once the launchers confirm, or after the preemption time. True when
        it held any."""
        return self._preempt_node(node, why, LOCAL_JOBS, free_now=False)

    def lanes_on(self, node_key: str) -> int:
        """How many lanes the pilot of `node_key` runs."""
        return sum(1 for key, _ in self.lanes.values() if key == node_key)

    def _preempt_node(self, node: Node, why: str, policy: str, *, free_now: bool) -> bool:
        engine = self.ctx.engine
        mine: dict[tuple[int, int], list[Slot]] = {}
        for (bag_id, slot_id), pilot_slot in self.lanes.items():
            bag = engine.bags.get(bag_id)
            slot = bag.slots.get(slot_id) if bag is not None else None
            if pilot_slot[0] == node.key and slot is not None:
                mine.setdefault((bag_id, slot.site), []).append(slot)
        if not mine:
            return False
        log.warning("bag launchers on %s preempted (%s): their tasks go back to their bags", node.key, why)
        for (bag_id, site), slots in mine.items():
            bag = engine.bags.get(bag_id)
            assert bag is not None
            active = [s for s in slots if not s.leaving]
            if active:
                engine.bags.shrink(bag, site, active, policy)
            if free_now:
                for s in slots:
                    engine.bags.freed(bag_id, s.id)
        return True


class BagSource(Protocol):
    """What `progress` reads: a `LiveContext`, or the daemon that holds one."""

    @property
    def engine(self) -> Engine:
        """The live engine."""
        ...

    @property
    def env(self) -> Environment:
        """The environment (its sites)."""
        ...

    @property
    def bags(self) -> BagRunner:
        """The bags' launchers."""
        ...

    @property
    def store(self) -> db.Store:
        """The database."""
        ...

    @property
    def clock(self) -> RealtimeClock:
        """The wall clock."""
        ...


def progress(m: BagSource, row: dict[str, Any]) -> dict[str, Any]:
    """Where the bag of job row `row` stands (schemas.BagProgress): its tasks by state (from the
    engine while it is active, else from its task rows), throughput since it first held a
    processor, and the processors and pilot nodes it holds now."""
    bag_id = row["id"]
    spec = row["spec"]
    total = int(spec.get("tasks", 0))
    bag = m.engine.bags.get(bag_id)
    held: dict[str, int] = {}
    nodes: list[dict[str, Any]] = []
    if bag is not None:
        done, failed, running = bag.done, bag.failed, bag.running
        sites = m.env.sites
        held = {sites[s].name: n for s, n in bag.held_sites().items()}
        per_node: dict[tuple[int, str], int] = {}
        for (b, slot_id), (key, _core) in m.bags.lanes.items():
            slot = bag.slots.get(slot_id) if b == bag_id else None
            if slot is not None and not slot.leaving:
                per_node[(slot.site, key)] = per_node.get((slot.site, key), 0) + 1
        nodes = [{"site": sites[s].name, "node": k, "processors": n} for (s, k), n in sorted(per_node.items())]
    else:
        counts = m.store.bag_counts(bag_id)
        done, failed, running = counts.get("done", 0), counts.get("failed", 0), 0
    queued = max(0, total - done - failed - running)
    start = row.get("start_time")
    until = row.get("end_time") if row["state"] in db.TERMINAL else m.clock.now
    throughput = done / (until - start) if start is not None and until is not None and until > start else None
    return {
        "tasks": total,
        "done": done,
        "running": running,
        "failed": failed,
        "queued": queued,
        "retries": int(spec.get("retries", 0)),
        "throughput": throughput,
        "held": held,
        "nodes": nodes,
    }
