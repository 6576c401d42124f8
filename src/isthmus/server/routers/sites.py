"""The pool: sites and their capacity, queues, the pool over time, VM leases (any user's token).

What a site or VM shows beyond the common figures comes from its backend (`describe`,
`describe_vm`): a cloud its VMs, a site behind a batch system its driver and local demand,
a pilot-job site its pilots, a provider's cloud its errors and whether it leases now.
"""

import asyncio
import time
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query

from isthmus.live.manager import Manager
from isthmus.live.pool_view import node_rows, pool_timeseries, queue_rows, site_costs
from isthmus.server.auth import Auth, Principal
from isthmus.server.routers.common import MAX_EPOCH, USER, errors

_NO_VM: dict[str, object] = {"activity": None, "retiring": False, "user": None}


def sites_router(manager: Manager, auth: Auth) -> APIRouter:
    """The /sites, /queues, /nodes, /timeseries and /vms routes of `manager`."""
    router = APIRouter()
    User = Annotated[Principal, Depends(auth.user)]  # noqa: N806

    @router.get("/sites", tags=["resources"], responses=errors(**USER))
    async def sites(p: User) -> list[dict[str, Any]]:
        """Every site with its capacity now."""
        out = []
        engine = manager.engine
        queued = sum(len(q) for q in engine.queues)
        costs = site_costs(manager.store, manager.env, now=time.time())
        for b in engine.backends:
            d: dict[str, Any] = b.describe()
            if b.site.is_cloud:
                d["charged_cost"] = costs.get(b.index, 0.0)
            if isinstance(d.get("lrm"), dict):
                # what marks this manager's jobs in the batch system (docs/sites.md: cleaning up)
                d["lrm"] = {**d["lrm"], "comment": f"isthmus:{manager.manager_id}:"}
            out.append(d)
        return [{**d, "queued_total": queued} for d in out]

    @router.get("/queues", tags=["resources"], responses=errors(**USER))
    async def queues(p: User) -> list[dict[str, Any]]:
        """Each queue now (one per set of sites the allocation policy uses): its sites, runtime
        limit, waiting jobs and the processors they request, and the oldest job's wait (s)."""
        return [r.as_dict() for r in queue_rows(manager.engine, manager.env)]

    @router.get("/nodes", tags=["resources"], responses=errors(**USER))
    async def nodes(p: User) -> list[dict[str, Any]]:
        """Each pilot position (a node of a local or pilot-job site, a VM) as `sinfo -N` shows a
        node: site, state, host, and processors allocated, idle and in all. Sites whose jobs a
        batch system runs itself (direct mode) have no positions here: ask that system."""
        hub = manager.hub
        return node_rows(hub.nodes, hub.assign.values(), manager.bags.lanes_on, manager.env)

    @router.get("/timeseries", tags=["resources"], responses=errors(**USER))
    async def timeseries(
        p: User,
        window: Annotated[
            float, Query(gt=0, le=MAX_EPOCH, allow_inf_nan=False, description="seconds back from now")
        ] = 3600.0,
        points: Annotated[int, Query(ge=2, le=1000, description="samples over the window")] = 200,
    ) -> dict[str, list[float]]:
        """The pool over the last `window` seconds, from the persisted event log: processors of
        queued and of running jobs, VMs leased and the charged spend so far ($), each sampled at
        `points` evenly spaced times (Unix seconds in `times`)."""
        return await asyncio.to_thread(
            pool_timeseries, manager.store, manager.env, now=time.time(), window=window, points=points
        )

    @router.get("/vms", tags=["resources"], responses=errors(**USER))
    async def vm_list(
        p: User, all_: Annotated[bool, Query(alias="all", description="include released VMs")] = False
    ) -> list[dict[str, Any]]:
        """VM leases with their cost so far (charged per started billing increment)."""
        now = time.time()
        out = []
        engine = manager.engine
        for row in manager.store.vm_rows(live_only=not all_):
            site = manager.env.sites[row["site"]]
            # what the VM does now (idle or running jobs), from the engine's state
            vm = engine.backends[row["site"]].describe_vm(row["vm"]) or _NO_VM
            end = row["released_at"] if row["released_at"] is not None else now
            lease = end - row["leased_at"]
            vm_type = int(row.get("vm_type") or 0)
            out.append(
                {
                    **row,
                    "site_name": site.name,
                    "activity": vm["activity"],
                    "type_name": site.types[vm_type].name if vm_type < len(site.types) else None,
                    # the user it was leased for (vm-share), else the users of the jobs on it now
                    "user": str(row["owner"]) if row.get("owner") else vm["user"],
                    "retiring": bool(vm["retiring"]),
                    "lease_seconds": lease,
                    "charged_cost": site.charged_cost(lease, vm_type),
                    "actual_cost": site.actual_cost(lease, vm_type) if site.is_paid else 0.0,
                }
            )
        return out

    return router
