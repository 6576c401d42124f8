"""Pilots: the list of pilots (admin) and the pilots' own endpoints, each reached with the
token of one node: register, long poll for commands (the heartbeat), report task events."""

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query
from fastapi.responses import JSONResponse

from isthmus.live.manager import Manager
from isthmus.server.auth import Auth, Principal
from isthmus.server.routers.common import ADMIN, BODY, PILOT, DecimalDigits, errors
from isthmus.server.schemas import INT64_MAX, RegisterRequest, ReportRequest

_REREGISTER = "unknown pilot registration (the manager restarted): register again"


def pilots_router(manager: Manager, auth: Auth) -> APIRouter:
    """The /pilots and /pilot routes of `manager`."""
    router = APIRouter()
    Admin = Annotated[Principal, Depends(auth.admin)]  # noqa: N806
    Pilot = Annotated[Principal, Depends(auth.pilot)]  # noqa: N806

    @router.get("/pilots", tags=["admin"], responses=errors(**ADMIN))
    async def pilot_list(p: Admin) -> list[dict[str, Any]]:
        """Every pilot recorded (admin only): node, site, slots, pid, host, state and times."""
        return manager.store.pilot_rows()

    @router.post("/pilot/register", tags=["pilot"], responses=errors(**PILOT, **BODY))
    async def pilot_register(req: RegisterRequest, p: Pilot) -> dict[str, Any]:
        """A pilot registers for its node (named by its token); answers its registration id."""
        assert p.node is not None
        return manager.register(p.node, req.model_dump())

    @router.get("/pilot/poll", tags=["pilot"], responses=errors(**PILOT, e409=_REREGISTER))
    async def pilot_poll(
        p: Pilot,
        pilot_id: Annotated[str, Query(max_length=128)],
        ack: Annotated[int, DecimalDigits, Query(ge=0, le=INT64_MAX)] = 0,
        wait: Annotated[float, Query(ge=0, le=60, allow_inf_nan=False)] = 10.0,
    ) -> JSONResponse:
        """Long poll for commands (start, kill, exit) after sequence number `ack`; also the heartbeat."""
        assert p.node is not None
        cmds = await manager.poll(p.node, pilot_id, ack, wait)
        return JSONResponse({"commands": cmds})  # plain JSON: no jsonable_encoder walk of the commands

    @router.post("/pilot/report", tags=["pilot"], responses=errors(**PILOT, **BODY, e409=_REREGISTER))
    async def pilot_report(req: ReportRequest, p: Pilot) -> JSONResponse:
        """Task events (started, ended with exit code and runtime); answers the pilot's commands
        after its `ack` (the runs its reports freed slots for), as the long poll would."""
        assert p.node is not None
        cmds = manager.report(p.node, req.pilot_id, req.model_dump())
        return JSONResponse({"ok": True, "commands": cmds})

    return router
