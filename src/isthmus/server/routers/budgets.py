"""Budget caps: every cap with what it charged and has left (users), a cap's limit (admin)."""

from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException
from fastapi import Path as PathParam

from isthmus.engine.budgets import cap_rows
from isthmus.live.manager import Manager
from isthmus.server.auth import Auth, Principal
from isthmus.server.routers.common import ADMIN, BODY, USER, errors
from isthmus.server.schemas import BudgetRow, BudgetUpdate


def budget_rows(manager: Manager) -> list[BudgetRow]:
    """Every budget cap of `manager` now, and the `--budget` cap on all clouds when it has one."""
    engine = manager.engine
    now = manager.clock.now
    names = [s.name for s in manager.env.sites]
    rows = [BudgetRow.model_validate(r) for r in cap_rows(engine.ledger, names, now)]
    if engine.budget is not None:  # isthmus server --budget: every cloud, in total
        clouds = sorted(s.name for s in manager.env.sites if s.is_cloud)
        left = max(0.0, engine.budget - engine.spent)
        rows.append(BudgetRow(name="--budget", sites=clouds, period=None, current="", limit=engine.budget,
                              spent=engine.spent, left=left))  # fmt: skip
    return rows


def budgets_router(manager: Manager, auth: Auth) -> APIRouter:
    """The /budgets routes of `manager`."""
    router = APIRouter()
    User = Annotated[Principal, Depends(auth.user)]  # noqa: N806
    Admin = Annotated[Principal, Depends(auth.admin)]  # noqa: N806

    @router.get("/budgets", response_model=list[BudgetRow], tags=["resources"], responses=errors(**USER))
    async def budgets(p: User) -> list[BudgetRow]:
        """Every budget cap: sites, period, limit, charged in the current period (increments are
        charged when they start, so this is also what is committed) and what is left."""
        return budget_rows(manager)

    @router.put(
        "/budgets/{name}",
        response_model=BudgetRow,
        tags=["admin"],
        responses=errors(**ADMIN, **BODY, e404="no such budget"),
    )
    async def set_budget(name: Annotated[str, PathParam(max_length=64)], req: BudgetUpdate, p: Admin) -> BudgetRow:
        """Change a cap's limit now (kept across restarts); leases and billing boundaries are
        checked against it from now on, what was charged stays."""
        cap = manager.engine.ledger.get(name)
        if cap is None:
            raise HTTPException(404, f"no budget {name!r}; budgets: {[c.cap.name for c in manager.engine.ledger.caps]}")
        manager.set_budget_limit(name, req.limit)
        return next(r for r in budget_rows(manager) if r.name == name)

    return router
