"""The REST API (FastAPI; OpenAPI at /openapi.json, docs at /docs), assembled from its routers.

Every endpoint is `async def`, so it runs on the event loop thread that also drives the
engine: no locks. Users authenticate with `Authorization: Bearer <token>`; users see and
cancel only their own jobs, the admin sees everything; pilots use their own tokens and reach
only the /pilot endpoints (`isthmus.server.auth`).

The routes are in `isthmus.server.routers`, one module a resource: jobs, bags, sites (and
queues, VMs), budgets, accounting (and forecast), admin (tokens, users, events, stop),
pilots and peers. This module adds what is common to all of them: authentication, the body
limit, error answers, /health, /metrics and the dashboard's files.

Limits: request bodies over `ManagerConfig.max_body_bytes` and batches of more than
`max_batch_jobs` jobs get 413; invalid fields get 422 naming the field; another user's job
answers 404 exactly like a job that does not exist. Every status a route can answer is in
the OpenAPI document.
"""

import contextlib
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response
from fastapi.routing import APIRoute
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException

from isthmus.federation.links import InvalidFieldError
from isthmus.federation.live import LiveFederation
from isthmus.live.manager import Manager, PersistError, RequestError
from isthmus.server.auth import Auth, Principal
from isthmus.server.limits import BodyLimitMiddleware, json_safe
from isthmus.server.prometheus import LatencyMiddleware, Metrics
from isthmus.server.routers.accounting import accounting_router
from isthmus.server.routers.admin import admin_router
from isthmus.server.routers.bags import bags_router
from isthmus.server.routers.budgets import budgets_router
from isthmus.server.routers.common import USER, errors
from isthmus.server.routers.jobs import jobs_router
from isthmus.server.routers.peers import peers_router
from isthmus.server.routers.pilots import pilots_router
from isthmus.server.routers.sites import sites_router
from isthmus.store.sqlite_files import StoreUnavailableError
from isthmus.store.tables import store_unsafe


def create_app(manager: Manager, *, manage_lifecycle: bool = True) -> FastAPI:
    """The API of `manager`; with `manage_lifecycle` the app starts and stops the manager."""

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        if manage_lifecycle:
            await manager.start()
            if manager.admin_token:
                print(
                    f"isthmus: admin token (also in {manager.state_dir / 'admin.token'}, mode 600): "
                    f"{manager.admin_token}",
                    flush=True,
                )
        try:
            yield
        finally:
            if manage_lifecycle:
                await manager.stop()

    # peer managers ([[peers]]): PeerConfigError (a ValueError) when a secret cannot be read
    federation = LiveFederation(manager) if manager.env.peers else None
    manager.federation = federation
    app = FastAPI(
        title="isthmus",
        description="Resource manager joining clusters and clouds: jobs, sites, VMs, pilots.",
        version="0.1.0",
        lifespan=lifespan,
    )
    auth = Auth(manager)
    app.add_middleware(BodyLimitMiddleware, max_bytes=manager.config.max_body_bytes)
    metrics = Metrics(manager)
    app.add_middleware(LatencyMiddleware, metrics=metrics)
    generic_openapi = app.openapi

    def openapi() -> dict[str, Any]:
        """The OpenAPI document, with the largest `size` this manager's environment can ever offer
        (not for a manager that may forward jobs to peers: a peer may offer more)."""
        if app.openapi_schema is None:
            size = generic_openapi()["components"]["schemas"]["SubmitRequest"]["properties"]["size"]
            if federation is None or not federation.may_forward:
                size["maximum"] = min(int(size["maximum"]), manager.env.max_processors)
        return app.openapi_schema or generic_openapi()

    app.openapi = openapi  # type: ignore[method-assign]

    routers = [
        _health_router(manager),
        jobs_router(manager, federation, auth),
        bags_router(manager, auth),
        sites_router(manager, auth),
        budgets_router(manager, auth),
        accounting_router(manager, auth),
        admin_router(manager, auth),
        pilots_router(manager, auth),
        peers_router(manager, federation, auth),
        _metrics_router(metrics, auth),
    ]
    for router in routers:
        app.include_router(router)
    _add_error_handlers(app, routers)

    @app.get("/", include_in_schema=False)
    async def root() -> RedirectResponse:
        return RedirectResponse("/ui/")

    # the dashboard's page and script (no CDN); it reads the API with the user's own token
    app.mount("/ui", _DashboardFiles(directory=Path(__file__).with_name("static"), html=True), name="ui")
    return app


def _health_router(manager: Manager) -> APIRouter:
    """GET /health (no token needed)."""
    router = APIRouter()

    @router.get("/health", tags=["meta"], responses={503: {"description": "the manager cannot write its database"}})
    async def health() -> JSONResponse:
        """Health (no token needed): 200 while the manager runs and can store what happens; 503
        with the reason while its database refuses writes."""
        reason = manager.persist_error or store_unsafe(manager.store)
        body = {"ok": reason is None, "environment": manager.env.name, "time": time.time()}
        if reason is not None:
            return JSONResponse(status_code=503, content={**body, "reason": reason})
        return JSONResponse(content=body)

    return router


def _metrics_router(metrics: Metrics, auth: Auth) -> APIRouter:
    """GET /metrics: the pool in the Prometheus text format."""
    router = APIRouter()
    User = Annotated[Principal, Depends(auth.user)]  # noqa: N806

    @router.get(
        "/metrics",
        tags=["meta"],
        response_class=PlainTextResponse,
        responses={200: {"content": {"text/plain": {}}, "description": "Prometheus text format"}, **errors(**USER)},
    )
    async def prometheus_metrics(p: User) -> Response:
        """The pool in the Prometheus text format (any user's token: aggregate figures only)."""
        body, content_type = metrics.render()
        return Response(body, media_type=content_type)

    return router


def _add_error_handlers(app: FastAPI, routers: list[APIRouter]) -> None:
    """The API's error answers: a field checked in a route body and a schema violation alike
    get 422 naming the field; a refused request its status; a database refusing writes 503
    (retry later); a method the path does not have 405 listing the methods it has (the routes
    of `routers`)."""

    @app.exception_handler(InvalidFieldError)
    async def _invalid_peer_field(_req: Request, exc: InvalidFieldError) -> JSONResponse:
        # the shape of a schema violation (documented for every route with a body)
        detail = [{"type": "value_error", "loc": list(exc.loc), "msg": exc.message, "input": None}]
        return JSONResponse(status_code=422, content={"detail": detail})

    @app.exception_handler(RequestError)
    async def _request_error(_req: Request, exc: RequestError) -> JSONResponse:
        return JSONResponse(status_code=exc.status, content={"detail": exc.message})

    @app.exception_handler(PersistError)
    async def _persist_error_answer(_req: Request, exc: PersistError) -> JSONResponse:
        # the manager is alive but cannot store anything: retry later (pilots keep their reports)
        detail = f"the manager cannot store this now ({exc}); retry later"
        return JSONResponse(status_code=503, content={"detail": detail}, headers={"Retry-After": "2"})

    @app.exception_handler(StoreUnavailableError)
    async def _store_unavailable(_req: Request, exc: StoreUnavailableError) -> JSONResponse:
        detail = f"the manager cannot use its database now ({exc}); retry later"
        return JSONResponse(status_code=503, content={"detail": detail}, headers={"Retry-After": "2"})

    @app.exception_handler(RequestValidationError)
    async def _invalid(_req: Request, exc: RequestValidationError) -> JSONResponse:
        # FastAPI's own handler echoes the input, which may be NaN or hold lone surrogates:
        # strict JSON cannot carry those, and the client would get a 500 instead of its 422.
        return JSONResponse(status_code=422, content={"detail": json_safe(jsonable_encoder(exc.errors()))})

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(req: Request, exc: StarletteHTTPException) -> Response:
        if exc.status_code == 405:
            # Starlette names only the first route matching the path; list every method the path
            # has (a fixed path like /jobs/batch hides the templates it also matches, /jobs/{job_id}).
            path = req.url.path
            matching = [
                r
                for router in routers
                for r in router.routes
                if isinstance(r, APIRoute) and r.include_in_schema and r.path_regex.match(path)
            ]
            matching = [r for r in matching if not r.param_convertors] or matching
            methods = sorted({m for r in matching for m in r.methods or ()})
            return JSONResponse({"detail": exc.detail}, status_code=405, headers={"Allow": ", ".join(methods)})
        return await http_exception_handler(req, exc)


class _DashboardFiles(StaticFiles):
    """The dashboard's files, with a policy that lets them load nothing from elsewhere."""

    async def get_response(self, path: str, scope: Any) -> Response:
        response = await super().get_response(path, scope)
        response.headers["Content-Security-Policy"] = "default-src 'self'; frame-ancestors 'none'"
        response.headers["X-Content-Type-Options"] = "nosniff"
        return response
