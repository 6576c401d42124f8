"""Recovery: rebuild the live manager's engine from the database after a (possibly unclean) stop.

Bags of tasks come back from their task rows: tasks that reported (done, or failed for good) stay
so; the others wait in the bag's queue again. A pilot that re-registers may still report ends of
tasks it ran while the manager was down: those count (`BagRunner.recovered`), so no task that
reported is run again; the tasks recorded running on a pilot that died while the manager was down
are killed (isthmus.live.lost_runs.kill_lost_tasks), and its ends no longer count. Queued jobs go
back into their queues with their recorded submit times and run counts; runs recorded as starting or
running are re-attached where they ran (each backend is told where through `expect_reattach`) and
wait for their pilot to re-register, else they are lost (killed with cause LOST and requeued, a
recorded restart). Leased VMs are restored with their lease times, so billing continues. The clock
is never rewound: every event recovery causes is stamped with the wall time at which it happens.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from isthmus.backends.local import pid_is_pilot, vm_node_key
from isthmus.backends.node import Node
from isthmus.engine.backend import CloudBackend
from isthmus.engine.budgets import merge_charged, restore_vm_users
from isthmus.engine.history import HistoryReplay
from isthmus.model.states import JobState, PilotState, VmState

if TYPE_CHECKING:
    from isthmus.live.context import LiveContext

log = logging.getLogger("isthmus.live")


def recover(ctx: LiveContext) -> None:
    """Bring the engine, pilots and VMs of `ctx` back to what the database recorded."""
    engine, hub, store = ctx.engine, ctx.hub, ctx.store
    hub.recovering = True
    now = ctx.clock.now
    # VMs
    max_vm: dict[int, int] = {}
    for row in store.vm_rows():
        max_vm[row["site"]] = max(max_vm.get(row["site"], -1), row["vm"])
    pilot_rows = {r["node"]: r for r in store.pilot_rows()}
    # per-user caps: the user each VM was charged to, before the leases are booked again
    saved_charges = restore_vm_users(engine.ledger, store.get_meta("budget-ledger")) if engine.ledger.per_user else {}
    for launcher in hub.launchers.values():  # before the runs on them are re-attached
        launcher.restore(list(pilot_rows.values()), now)
    for row in store.vm_rows(live_only=True):
        backend = engine.backends[row["site"]]
        if not isinstance(backend, CloudBackend):
            continue
        state = VmState(row["state"])
        vm = backend.restore_vm(
            row["vm"],
            state,
            row["leased_at"],
            row["ready_at"],
            row["released_at"],
            int(row.get("vm_type") or 0),
            int(row.get("image") or 0),
            row.get("owner"),
        )
        key = vm_node_key(row["site"], vm.id)
        if state is VmState.RELEASING:
            old = pilot_rows.get(key)
            if old and old.get("pid") and pid_is_pilot(old["pid"]):
                hub.terminate(old["pid"], None)
            done = (row["released_at"] or now) + backend.site.shutdown_time
            ctx.later(done - now, hub.shutdown_vm, row["site"], vm.id)
            continue
        engine.adopt_lease(row["site"], vm.id, row["leased_at"])
        hub.nodes[key] = Node(key, row["site"], vm.cores, vm=vm.id, remote=row["site"] in hub.launchers)
    for row in store.vm_rows():
        # leases that ended (or are ending) before the restart still count against the budgets
        if row["state"] in (VmState.GONE, VmState.RELEASING) and isinstance(engine.backends[row["site"]], CloudBackend):
            user = engine.ledger.vm_user.get((row["site"], row["vm"]), "")
            engine.book_past_lease(
                row["site"],
                row["leased_at"],
                row["released_at"] or row["leased_at"],
                int(row.get("vm_type") or 0),
                user,
            )
    merge_charged(engine.ledger, saved_charges)
    for i, b in enumerate(engine.backends):
        if isinstance(b, CloudBackend):  # VM ids are never reused (they key VM rows and pilots)
            b.reserve_vm_ids(max_vm.get(i, -1) + 1)
    # jobs: back in their queues with their recorded times
    # jobs forwarded to a peer manager and not ended there stay out of the queues (the
    # federation restores them as forwarded: isthmus.federation.live)
    elsewhere = ctx.federation.held_elsewhere() if ctx.federation is not None else set()
    active = [r for r in store.active_jobs() if r["id"] not in elsewhere]
    engine.bags.reserve_slot_ids(store.max_bag_slot() + 1)
    # the runtime predictors' history: each job is restored with what had completed when it arrived
    history = HistoryReplay.from_log(engine, store.event_log(), {j[0]: j[1] for j in store.job_owners()})
    for row in active:
        job_id = row["id"]
        ctx.intake.specs[job_id] = row["spec"]
        ctx.intake.users[job_id] = row["user"]
        if row["spec"].get("kind") == "bag":
            restore_bag(ctx, row)
            continue
        history.before_arrival(job_id)
        engine.restore(
            ctx.intake.job_of(job_id, row["user"], row["spec"], row["submit_time"]),
            stage=row["stage"] or 0,
            run=row["run"],
            restarts=row["restarts"],
        )
    history.finish()
    started = (JobState.STARTING.value, JobState.RUNNING.value)
    running = sorted(
        (r for r in active if r["state"] in started and r["spec"].get("kind") != "bag"),
        key=lambda r: r["start_time"] or 0.0,
    )
    for row in running:
        job_id = row["id"]
        if job_id not in engine.entries:
            continue
        engine.backends[row["site"]].expect_reattach(job_id, [(str(k), int(c)) for k, c in row["slots"]])
        status = engine.reattach(
            job_id, row["site"], run=row["run"], started=min(row["start_time"] or now, now), limit=row["limit_s"]
        )
        if not status.accepted:
            log.error("could not re-attach job %s: %s", job_id, status.reason)
    hub.recovering = False
    # pilots: wait for live ones to re-register, start the others
    for key, node in list(hub.nodes.items()):
        if node.remote:
            continue  # a batch system's pilot: its site checks its job once it connects
        old = pilot_rows.get(key)
        backend = engine.backends[node.site]
        if (
            old
            and old["state"] in (PilotState.SPAWNED, PilotState.REGISTERED, PilotState.DETACHED)
            and old.get("pid")
            and pid_is_pilot(old["pid"])
        ):
            node.pid = old["pid"]
            node.state = PilotState.AWAITING
            node.deadline = now + ctx.config.reattach_timeout
        elif (
            node.vm is not None and isinstance(backend, CloudBackend) and backend.vms[node.vm].state is VmState.BOOTING
        ):
            vm = backend.vms[node.vm]
            ctx.later(vm.leased_at + backend.site.boot_time - now, hub.boot_vm, key)
        else:
            # its running jobs and bag tasks (if any) are lost: killed before they run again
            why = f"pilot of {key} gone while the manager was down"
            for a in [a for a in hub.assign.values() if a.launcher == key]:
                hub.lose(a, why)
            ctx.bags.pilot_lost(node, why)
            hub.spawn(node)
    hub.sweep_pools()  # of VMs gone while the manager was down
    engine.request_round(now)  # a round at once (keeps clouds at their minimum)


def restore_bag(ctx: LiveContext, row: dict[str, Any]) -> None:
    """Bring back the bag of tasks of job row `row` from its task rows."""
    bag_id = row["id"]
    tasks = ctx.store.bag_tasks(bag_id)
    ctx.bags.commands[bag_id] = [t["command"] for t in tasks]
    queue = []
    done = failed = 0
    for t in tasks:
        if t["state"] == "done":
            done += 1
        elif t["state"] == "failed":
            failed += 1
        else:
            queue.append(t["idx"])
            if t["state"] == "running" and t["node"]:
                ctx.bags.recovered[(bag_id, t["idx"])] = t["node"]
    job = ctx.intake.job_of(bag_id, row["user"], row["spec"], row["submit_time"])
    bag = ctx.engine.bags.restore(job, row["submit_time"], queue, done, failed)
    bag.failures.update({t["idx"]: t["failures"] for t in tasks if t["failures"]})
    ctx.store.requeue_running_tasks(bag_id)
