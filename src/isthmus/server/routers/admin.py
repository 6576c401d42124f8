"""Tokens and administration: create, list and revoke user tokens, the users, the event log,
stopping the manager (admin only), and which user a token belongs to (any user)."""

import asyncio
import time
from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Query, Response
from fastapi import Path as PathParam
from sqlalchemy import insert, select

from isthmus.live.manager import Manager
from isthmus.server.auth import Auth, Principal, hash_token, new_token
from isthmus.server.routers.common import ADMIN, BODY, USER, DecimalDigits, errors
from isthmus.server.schemas import INT64_MAX, StopRequest, StopResponse, TokenInfo, TokenRequest, TokenResponse
from isthmus.store import tables as db


def admin_router(manager: Manager, auth: Auth) -> APIRouter:
    """The /tokens, /users, /whoami, /events and /admin routes of `manager`."""
    router = APIRouter()
    User = Annotated[Principal, Depends(auth.user)]  # noqa: N806
    Admin = Annotated[Principal, Depends(auth.admin)]  # noqa: N806

    @router.post(
        "/tokens", status_code=201, response_model=TokenResponse, tags=["admin"], responses=errors(**ADMIN, **BODY)
    )
    async def create_token(req: TokenRequest, p: Admin) -> TokenResponse:
        """Create a user (if missing) and a new token for it (admin only)."""
        token = new_token()
        with manager.store.begin() as conn:
            existing = conn.execute(select(db.users.c.admin).where(db.users.c.name == req.user)).first()
            if existing is None:
                conn.execute(insert(db.users).values(name=req.user, admin=req.admin, created=time.time()))
                admin = req.admin
            else:
                admin = bool(existing[0])
            expires = None if req.expires_in is None else time.time() + req.expires_in
            token_hash = hash_token(token)
            manager.store.add_token(conn, token_hash, user=req.user, kind="user", expires=expires)
        return TokenResponse(
            user=req.user, token=token, admin=admin, id=token_hash[: db.TOKEN_ID_LENGTH], expires=expires
        )

    @router.get("/tokens", response_model=list[TokenInfo], tags=["admin"], responses=errors(**ADMIN))
    async def list_tokens(p: Admin) -> list[TokenInfo]:
        """Every user token by id (the first digits of its hash; the tokens themselves are not
        kept), with its user, creation and expiry times (admin only)."""
        return [TokenInfo(**t) for t in manager.store.user_tokens()]

    @router.delete(
        "/tokens/{token_id}",
        status_code=204,
        tags=["admin"],
        responses=errors(**ADMIN, e404="no user token has this id", e409="several tokens start with this id"),
    )
    async def revoke_token(
        token_id: Annotated[str, PathParam(min_length=4, max_length=64, pattern="^[0-9a-f]+$")], p: Admin
    ) -> Response:
        """Revoke a user token (admin only): refused from the next request on."""
        found = manager.store.revoke_token(token_id)
        if not found:
            raise HTTPException(404, f"no user token has id {token_id!r} ('isthmus token list' shows them)")
        if len(found) > 1:
            raise HTTPException(409, f"{len(found)} tokens start with {token_id!r}: give more digits")
        auth.forget()  # revoked means refused at once, not after the cache's 5 s
        return Response(status_code=204)

    @router.get("/users", tags=["admin"], responses=errors(**ADMIN))
    async def list_users(p: Admin) -> list[dict[str, Any]]:
        """Every user (admin only)."""
        return manager.store.list_users()

    @router.get("/whoami", tags=["meta"], responses=errors(**USER))
    async def whoami(p: User) -> dict[str, Any]:
        """The user a token belongs to."""
        return {"user": p.user, "admin": p.admin}

    @router.get("/events", tags=["admin"], responses=errors(**ADMIN))
    async def event_log(
        p: Admin, since: Annotated[int, DecimalDigits, Query(ge=0, le=INT64_MAX)] = 0
    ) -> list[list[float]]:
        """The persisted engine event log (admin only): [time, kind, job, site, vm, value] rows."""
        return [list(r) for r in manager.store.event_rows()[since:]]

    @router.post(
        "/admin/stop",
        status_code=202,
        response_model=StopResponse,
        tags=["admin"],
        responses=errors(**ADMIN, **BODY),
    )
    async def admin_stop(req: StopRequest, p: Admin) -> StopResponse:
        """Stop the manager (admin only): see `isthmus stop`. Answers before it stops."""
        running = sum(len(b.running) for b in manager.engine.backends)
        tasks = manager.engine.bags.running_tasks
        manager.begin_shutdown(req.mode, release=req.release)
        if req.mode != "drain":
            asyncio.get_running_loop().call_later(0.2, manager.request_exit)  # after this answer
        return StopResponse(mode=manager.stop_mode or req.mode, running=running, tasks=tasks)

    return router
