"""Accounting of what ended and the forecast of what is queued (a user sees their own jobs only)."""

import asyncio
import dataclasses
import time
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Query

from isthmus.config.errors import ConfigError
from isthmus.live.accounting import account
from isthmus.live.forecast import run_forecast, snapshot, what_if_environment
from isthmus.live.manager import Manager
from isthmus.model.environment import PolicyChoice
from isthmus.policies.registry import PolicyError
from isthmus.server.auth import Auth, Principal
from isthmus.server.routers.common import BODY, MAX_EPOCH, USER, errors, invalid_field
from isthmus.server.schemas import AccountingRow, ForecastRequest, ForecastResponse, JobForecastItem


def accounting_router(manager: Manager, auth: Auth) -> APIRouter:
    """The /accounting and /forecast routes of `manager`."""
    router = APIRouter()
    User = Annotated[Principal, Depends(auth.user)]  # noqa: N806

    @router.get("/accounting", response_model=list[AccountingRow], tags=["jobs"], responses=errors(**USER))
    async def accounting(
        p: User,
        by: Annotated[Literal["user", "site", "policy"], Query(description="how to group")] = "user",
        since: Annotated[float, Query(ge=0, le=MAX_EPOCH, allow_inf_nan=False, description="window start")] = 0.0,
        until: Annotated[
            float | None, Query(ge=0, le=MAX_EPOCH, allow_inf_nan=False, description="window end (default now)")
        ] = None,
    ) -> list[AccountingRow]:
        """Jobs, processor-hours, VM-hours, charged cost, wait and slowdown per user, site or
        policy, for the jobs that ended and the VMs released in [since, until) (Unix seconds).
        A user sees their own jobs only, without VM figures; the admin everything."""
        now = time.time()
        end = now if until is None else until
        if end < since:
            invalid_field(("query", "until"), f"until ({end}) is before since ({since})")
        rows = await asyncio.to_thread(
            account,
            manager.store,
            manager.env,
            by=by,
            since=since,
            until=end,
            now=now,
            user=None if p.admin else p.user,
        )
        return [AccountingRow(**r.as_dict()) for r in rows]

    @router.post("/forecast", response_model=ForecastResponse, tags=["jobs"], responses=errors(**USER, **BODY))
    async def forecast(req: ForecastRequest, p: User) -> ForecastResponse:
        """Each queued and running job's expected start and end, and the expected spend, from a
        simulation of the live state with the live policies, or with the policy or budget given
        (the live state is not touched). A user sees their own jobs only."""
        if req.no_budget and req.budget is not None:
            invalid_field(("body", "no_budget"), "budget and no_budget: give one of them")
        if req.environment is not None and req.add_sites is not None:
            invalid_field(("body", "add_sites"), "environment and add_sites: give one of them")
        snap = snapshot(manager)
        budget: float | str | None = None if req.no_budget else req.budget if req.budget is not None else "live"
        field_of_env = "environment" if req.environment is not None else "add_sites"
        try:
            env = what_if_environment(
                manager.env, text=req.environment, fmt=req.environment_format, add_sites=req.add_sites
            )
            result = await asyncio.to_thread(
                run_forecast,
                snap,
                allocation=PolicyChoice(req.allocation) if req.allocation else None,
                provisioning=PolicyChoice(req.provisioning) if req.provisioning else None,
                budget=budget,
                horizon=req.horizon,
                env=None if env is manager.env else env,
            )
        except ConfigError as exc:
            invalid_field(("body", field_of_env), str(exc))
        except PolicyError as exc:
            field = "allocation" if req.allocation and req.allocation in str(exc) else "provisioning"
            invalid_field(("body", field), str(exc))
        jobs = [j for j in result.jobs if p.admin or j.user == p.user]
        return ForecastResponse(
            **{k: v for k, v in dataclasses.asdict(result).items() if k != "jobs"},
            jobs=[JobForecastItem(**dataclasses.asdict(j)) for j in jobs],
        )

    return router
