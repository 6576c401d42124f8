"""The REST API (FastAPI; OpenAPI at /openapi.json, docs at /docs).

Every endpoint is `async def`, so it runs on the event loop thread that also drives the
engine: no locks. Users authenticate with `Authorization: Bearer <token>`; users see and
cancel only their own jobs, the admin sees everything; pilots use their own tokens and reach
only the /pilot endpoints.

Limits: request bodies over `ManagerConfig.max_body_bytes` and batches of more than
`max_batch_jobs` jobs get 413; invalid fields get 422 naming the field; another user's job
answers 404 exactly like a job that does not exist. Every status a route can answer is in
the OpenAPI document.
"""

import asyncio
import contextlib
import dataclasses
import math
import re
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Annotated, Any, Literal, NoReturn

from fastapi import Depends, FastAPI, Header, HTTPException, Query, Request
from fastapi import Path as PathParam
from fastapi.encoders import jsonable_encoder
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response
from fastapi.routing import APIRoute
from fastapi.staticfiles import StaticFiles
from pydantic import BeforeValidator, TypeAdapter, ValidationError
from sqlalchemy import insert, select
from starlette.exceptions import HTTPException as StarletteHTTPException

from isthmus.agent.pilot import task_outputs
from isthmus.config.errors import ConfigError
from isthmus.engine.backend import CloudBackend
from isthmus.engine.budgets import cap_rows
from isthmus.federation.links import InvalidFieldError
from isthmus.federation.live import LiveFederation
from isthmus.live.accounting import account
from isthmus.live.bag_tasks import progress
from isthmus.live.batch import BatchCluster
from isthmus.live.forecast import run_forecast, snapshot, what_if_environment
from isthmus.live.iaas import ProviderCloud
from isthmus.live.jobfiles import run_files
from isthmus.live.lrm_pilots import PilotJobs
from isthmus.live.manager import Manager, PersistError, RequestError
from isthmus.live.pool_view import pool_timeseries, queue_rows, site_costs
from isthmus.model.environment import PolicyChoice
from isthmus.model.states import JobState, TaskState, VmState
from isthmus.policies.registry import PolicyError
from isthmus.server.auth import Principal, hash_token, new_token
from isthmus.server.limits import BodyLimitMiddleware, json_safe
from isthmus.server.peer_routes import peer_router
from isthmus.server.prometheus import LatencyMiddleware, Metrics
from isthmus.server.schemas import (
    INT64_MAX,
    AccountingRow,
    BagInfo,
    BagProgress,
    BagRequest,
    BudgetRow,
    BudgetUpdate,
    ErrorResponse,
    ForecastRequest,
    ForecastResponse,
    HistoryItem,
    JobForecastItem,
    JobInfo,
    JobStateName,
    RegisterRequest,
    ReportRequest,
    StopRequest,
    StopResponse,
    SubmitRequest,
    SubmitResponse,
    TaskResult,
    TokenInfo,
    TokenRequest,
    TokenResponse,
)
from isthmus.store import tables as db

MAX_EPOCH = 1e11  # Unix seconds (year 5138): bounds hostile input


def _decimal(value: object) -> object:
    """Refuse a path or query integer written other than as plain decimal digits.

    Pydantic's lax mode strips whitespace ("\\x0b2" would read as 2); an API that accepts what its
    schema calls invalid hides client bugs, so only `[0-9]+` is read as an integer.
    """
    if isinstance(value, str) and not re.fullmatch(r"[0-9]+", value):
        raise ValueError("expected a non-negative decimal integer")
    return value


DecimalDigits = BeforeValidator(_decimal)
JobId = Annotated[int, DecimalDigits, PathParam(ge=1, le=INT64_MAX, description="job id")]


def _errors(**statuses: str) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses` for error statuses (keyword `e404="..."`): JSON `{"detail": ...}`."""
    return {int(k[1:]): {"model": ErrorResponse, "description": d} for k, d in statuses.items()}


_AUTH = {
    "e401": "missing, malformed or unknown token",
    "e503": "the manager cannot write its database now: retry later (see /health)",
}
_USER = {**_AUTH, "e403": "a pilot token (users' endpoints need a user token)"}
_ADMIN = {**_AUTH, "e403": "not the admin token"}
_PILOT = {**_AUTH, "e403": "not a pilot token", "e410": "this node is no longer part of the manager"}
_BODY = {
    "e400": "the body is not UTF-8 JSON",
    "e413": "request body larger than the manager's limit (--max-body-bytes)",
}
_REREGISTER = "unknown pilot registration (the manager restarted): register again"
_SUBMIT_LIST = TypeAdapter(list[SubmitRequest])


def _invalid_field(loc: tuple[str, ...], message: str) -> NoReturn:
    """Answer 422 in the same shape as a schema violation (the documented one), naming `loc`."""
    raise RequestValidationError([{"type": "value_error", "loc": loc, "msg": message, "input": None}])


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
    # hash -> (principal, expiry, pilot-token generation). User tokens are cached for 5 s; pilot
    # tokens until the manager deletes any pilot token (a pilot replaced or retired), so the
    # pilots' polls and reports do not read the database for their token each time.
    token_cache: dict[str, tuple[Principal, float, int]] = {}
    token_hint = (
        "the isthmus CLI sends ISTHMUS_TOKEN, or the token in the file ISTHMUS_TOKEN_FILE names "
        f"(the admin token is in {manager.state_dir.absolute() / 'admin.token'}; "
        "'isthmus token create USER' makes user tokens)"
    )
    # The dependencies below are `async def`: FastAPI runs plain `def` dependencies in a thread
    # pool, a round trip to another thread for every request (a third of a submission's cost).

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

    @app.exception_handler(RequestValidationError)
    async def _invalid(_req: Request, exc: RequestValidationError) -> JSONResponse:
        # FastAPI's own handler echoes the input, which may be NaN or hold lone surrogates:
        # strict JSON cannot carry those, and the client would get a 500 instead of its 422.
        return JSONResponse(status_code=422, content={"detail": json_safe(jsonable_encoder(exc.errors()))})

    async def principal(authorization: Annotated[str | None, Header()] = None) -> Principal:
        if not authorization:
            raise HTTPException(
                401,
                f"missing token: send 'Authorization: Bearer <token>'; {token_hint}",
                headers={"WWW-Authenticate": "Bearer"},
            )
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise HTTPException(
                401, "malformed Authorization header: expected 'Bearer <token>'", headers={"WWW-Authenticate": "Bearer"}
            )
        h = hash_token(token.strip())
        hit = token_cache.get(h)
        if hit is not None and hit[1] > time.monotonic() and hit[2] == manager.token_generation:
            return hit[0]
        found = manager.store.lookup_token(h)
        if found is None:
            token_cache.pop(h, None)
            raise HTTPException(
                401,
                f"invalid token: this manager did not issue it; {token_hint}",
                headers={"WWW-Authenticate": "Bearer"},
            )
        user, kind, node, admin, expires = found
        if expires is not None and expires <= time.time():
            raise HTTPException(
                401,
                f"token expired at {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(expires))}; "
                "ask the admin for a new one ('isthmus token create USER')",
                headers={"WWW-Authenticate": "Bearer"},
            )
        p = Principal(kind=kind, user=user, admin=admin, node=node)
        if len(token_cache) > 10000:
            token_cache.clear()
        if kind == "user":
            # cached 5 s at most, and never past the token's expiry
            ttl = 5.0 if expires is None else min(5.0, expires - time.time())
            token_cache[h] = (p, time.monotonic() + ttl, manager.token_generation)
        else:
            token_cache[h] = (p, math.inf, manager.token_generation)
        return p

    async def user_of(p: Annotated[Principal, Depends(principal)]) -> Principal:
        if p.kind != "user":
            raise HTTPException(403, "pilot tokens may only use the /pilot endpoints")
        return p

    async def admin_of(p: Annotated[Principal, Depends(user_of)]) -> Principal:
        if not p.admin:
            raise HTTPException(403, "this needs the admin token")
        return p

    async def pilot_of(p: Annotated[Principal, Depends(principal)]) -> Principal:
        if p.kind != "pilot" or p.node is None:
            raise HTTPException(403, "only pilots may use the /pilot endpoints")
        return p

    User = Annotated[Principal, Depends(user_of)]  # noqa: N806
    Admin = Annotated[Principal, Depends(admin_of)]  # noqa: N806
    Pilot = Annotated[Principal, Depends(pilot_of)]  # noqa: N806

    def own_job(job_id: int, p: Principal) -> dict[str, Any]:
        row = manager.store.job(job_id)
        # another user's job answers exactly like a missing one: ids reveal nothing
        if row is None or (not p.admin and row["user"] != p.user):
            raise HTTPException(404, f"no job {job_id}")
        return row

    def job_info(row: dict[str, Any], *, history: bool = False) -> JobInfo:
        site = row["site"]
        info = JobInfo(
            id=row["id"],
            user=row["user"],
            name=row["name"],
            state=row["state"],
            size=row["size"],
            priority=row["priority"],
            requested_runtime=row["requested_runtime"],
            site=manager.env.sites[site].name if site is not None and 0 <= site < len(manager.env.sites) else None,
            slots=row["slots"],
            run=row["run"],
            restarts=row["restarts"],
            exit_code=row["exit_code"],
            submit_time=row["submit_time"],
            start_time=row["start_time"],
            end_time=row["end_time"],
            runtime=row["runtime"],
            spec=row["spec"],
            reason=row["reason"],
        )
        if row["spec"].get("kind") == "bag":
            info.bag = BagProgress(**progress(manager, row))
        if history:
            info.history = [HistoryItem(**h) for h in manager.store.history(row["id"])]
            if federation is not None:
                info.forwarded = federation.forwarded_info(row["id"])
                info.received = federation.received_info(row["id"])
            status = manager.why(row["id"]) if row["state"] == JobState.QUEUED else None
            if status is not None:
                info.reason = status.reason
                info.reason_code = status.code.label
                info.reason_policy = status.policy or None
        return info

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(req: Request, exc: StarletteHTTPException) -> Response:
        if exc.status_code == 405:
            # Starlette names only the first route matching the path; list every method the path
            # has (a fixed path like /jobs/batch hides the templates it also matches, /jobs/{job_id}).
            path = req.url.path
            matching = [
                r
                for r in app.router.routes
                if isinstance(r, APIRoute) and r.include_in_schema and r.path_regex.match(path)
            ]
            matching = [r for r in matching if not r.param_convertors] or matching
            methods = sorted({m for r in matching for m in r.methods or ()})
            return JSONResponse({"detail": exc.detail}, status_code=405, headers={"Allow": ", ".join(methods)})
        return await http_exception_handler(req, exc)

    # ------------------------------------------------------------------------------ jobs

    @app.get("/jobs/batch", include_in_schema=False)
    async def _batch_get() -> None:
        """Without this, GET /jobs/batch would reach GET /jobs/{job_id} (422 on 'batch') instead of 405."""
        raise StarletteHTTPException(405, "Method Not Allowed")

    @app.get("/health", tags=["meta"], responses={503: {"description": "the manager cannot write its database"}})
    async def health() -> JSONResponse:
        """Health (no token needed): 200 while the manager runs and can store what happens; 503
        with the reason while its database refuses writes."""
        body = {"ok": manager.persist_error is None, "environment": manager.env.name, "time": time.time()}
        if manager.persist_error is not None:
            return JSONResponse(status_code=503, content={**body, "reason": manager.persist_error})
        return JSONResponse(content=body)

    @app.post(
        "/jobs",
        status_code=201,
        response_model=SubmitResponse,
        tags=["jobs"],
        responses=_errors(
            **{**_USER, **_BODY, "e400": "the body is not UTF-8 JSON, or no site can offer `size` processors"}
        ),
    )
    async def submit(req: SubmitRequest, p: User) -> SubmitResponse:
        """Submit a job; answers its id."""
        assert p.user is not None
        job_id = manager.submit(p.user, req.model_dump(exclude_none=True))
        await manager.committed()
        return SubmitResponse(id=job_id)

    max_batch = manager.config.max_batch_jobs

    @app.post(
        "/jobs/batch",
        status_code=201,
        response_model=list[SubmitResponse],
        tags=["jobs"],
        responses=_errors(
            **_USER,
            e400="the body is not UTF-8 JSON, or a job's `size` is larger than any site can offer",
            e413=f"more than {max_batch} jobs, or a body larger than the manager's limit",
        ),
        openapi_extra={
            "requestBody": {
                "required": True,
                "content": {
                    "application/json": {
                        "schema": {
                            "type": "array",
                            "items": {"$ref": "#/components/schemas/SubmitRequest"},
                            "maxItems": max_batch,
                        }
                    }
                },
            }
        },
    )
    async def submit_batch(request: Request, p: User) -> list[SubmitResponse]:
        """Submit several jobs at once (all or none are accepted); answers their ids, in order.

        At most `max_batch_jobs` jobs (default 10,000) per request: the count is checked before
        any job is validated, so an oversized batch costs the event loop next to nothing.
        """
        assert p.user is not None
        try:
            raw = await request.json()
        except ValueError as exc:
            raise RequestValidationError(
                [{"type": "json_invalid", "loc": ("body",), "msg": f"JSON decode error: {exc}", "input": {}}]
            ) from None
        if isinstance(raw, list) and len(raw) > max_batch:
            raise HTTPException(
                413,
                f"batch of {len(raw)} jobs is too large: at most {max_batch} per request "
                "(split it, or raise `isthmus server --max-batch-jobs`)",
            )
        try:
            reqs = _SUBMIT_LIST.validate_python(raw)
        except ValidationError as exc:
            raise RequestValidationError(
                [{**e, "loc": ("body", *e["loc"])} for e in exc.errors(include_url=False)]
            ) from None
        specs = [r.model_dump(exclude_none=True) for r in reqs]
        for spec in specs:
            manager.check_size(int(spec["size"]))
            manager.check_vm(p.user, spec)
        ids = [manager.submit(p.user, spec) for spec in specs]
        await manager.committed()
        return [SubmitResponse(id=i) for i in ids]

    @app.get("/jobs", response_model=list[JobInfo], tags=["jobs"], responses=_errors(**_USER))
    async def list_jobs(
        p: User,
        state: Annotated[list[JobStateName] | None, Query()] = None,
        all_: Annotated[bool, Query(alias="all", description="include finished jobs")] = False,
        user: str | None = None,
        limit: Annotated[int, DecimalDigits, Query(ge=1, le=100000)] = 1000,
    ) -> list[JobInfo]:
        """Your jobs (admin: everyone's, or one user's with `user`); active ones unless `all` or `state`."""
        who = (user if user else None) if p.admin else p.user
        rows = manager.store.list_jobs(user=who, states=state, limit=limit, finished=all_)
        return [job_info(r) for r in rows]

    @app.get(
        "/jobs/{job_id}",
        response_model=JobInfo,
        tags=["jobs"],
        responses=_errors(**_USER, e404="no such job (or another user's)"),
    )
    async def show_job(job_id: JobId, p: User) -> JobInfo:
        """A job with its state history (and, while queued, why it waits). A job forwarded to a
        peer manager is queried there first (queryJob): its state is the one where it runs."""
        row = own_job(job_id, p)
        if federation is not None and federation.holds(job_id):
            await federation.refresh(job_id)
            row = own_job(job_id, p)
        return job_info(row, history=True)

    @app.post(
        "/jobs/{job_id}/cancel",
        tags=["jobs"],
        responses=_errors(**_USER, **_BODY, e404="no such job (or another user's)", e409="the job already ended"),
    )
    async def cancel_job(job_id: JobId, p: User) -> dict[str, Any]:
        """Cancel a queued or running job."""
        row = own_job(job_id, p)
        if row["state"] in db.TERMINAL:
            raise HTTPException(409, f"job {job_id} already ended ({row['state']})")
        if federation is not None and federation.holds(job_id):  # forwarded: cancelJob along its chain
            return {"id": job_id, "state": await federation.cancel_forwarded(job_id)}
        ok = manager.cancel(job_id)
        if not ok:
            raise HTTPException(409, f"job {job_id} is not active")
        return {"id": job_id, "state": JobState.CANCELLED.value}

    @app.get(
        "/jobs/{job_id}/output",
        response_class=PlainTextResponse,
        tags=["jobs"],
        responses={
            status: {
                "description": r["description"],
                "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorResponse"}}},
            }
            for status, r in _errors(
                **_USER, e404="no such job (or another user's)", e410="the run's output file was removed"
            ).items()
        },
    )
    async def job_output(
        job_id: JobId,
        p: User,
        stream: Annotated[str, Query(pattern="^(stdout|stderr)$")] = "stdout",
        run: Annotated[int | None, DecimalDigits, Query(ge=0, le=INT64_MAX)] = None,
        offset: Annotated[int, DecimalDigits, Query(ge=0, le=INT64_MAX)] = 0,
    ) -> PlainTextResponse:
        """Output of a run (default: the latest), from byte `offset`; readable while it runs.

        Read from wherever it went: the job's --output/--error file (with every run's output,
        restarts append), else the run's file in the spool directory.
        """
        row = own_job(job_id, p)
        r = row["run"] if run is None else run
        if r < 1:
            return PlainTextResponse("", headers={"X-Offset": str(offset)})
        stdout, stderr, _custom = run_files(row["spec"], job_id, row["spool"], r)
        path = Path(stdout if stream == "stdout" else stderr)
        if not path.is_file():  # a user's file that could not be opened: the spool has the reason
            spooled = Path(row["spool"]) / f"run{r}.{'out' if stream == 'stdout' else 'err'}"
            if not spooled.is_file() and not (r == row["run"] and row["state"] == JobState.STARTING):
                # the run has begun, so its file was made: someone removed it
                raise HTTPException(410, f"the {stream} of run {r} is gone: {path} was removed")
            path = spooled
        data = b""
        if path.is_file():
            with open(path, "rb") as f:
                f.seek(offset)
                data = f.read(16 * 1024 * 1024)
        return PlainTextResponse(
            data.decode("utf-8", "replace"), headers={"X-Offset": str(offset + len(data)), "X-Run": str(r)}
        )

    # ------------------------------------------------------------------------------ bags

    def own_bag(bag_id: int, p: Principal) -> dict[str, Any]:
        row = own_job(bag_id, p)
        if row["spec"].get("kind") != "bag":
            raise HTTPException(404, f"job {bag_id} is not a bag of tasks")
        return row

    def bag_info(row: dict[str, Any]) -> BagInfo:
        return BagInfo(
            id=row["id"],
            user=row["user"],
            name=row["name"],
            state=row["state"],
            submit_time=row["submit_time"],
            start_time=row["start_time"],
            end_time=row["end_time"],
            progress=BagProgress(**progress(manager, row)),
        )

    @app.post(
        "/bags",
        status_code=201,
        response_model=SubmitResponse,
        tags=["bags"],
        responses=_errors(
            **{**_USER, **_BODY, "e400": "the body is not UTF-8 JSON, or no site or policy here runs bags"}
        ),
    )
    async def submit_bag(req: BagRequest, p: User) -> SubmitResponse:
        """Submit a bag of tasks (one command line per task, or a sweep); answers its job id."""
        assert p.user is not None
        commands = req.commands()  # at most isthmus.live.bagspec.MAX_TASKS (the schema's limit)
        spec = req.model_dump(exclude_none=True, exclude={"tasks"})
        bag_id = manager.submit_bag(p.user, spec, commands)
        await manager.committed()
        return SubmitResponse(id=bag_id)

    @app.get("/bags", response_model=list[BagInfo], tags=["bags"], responses=_errors(**_USER))
    async def list_bags(
        p: User,
        all_: Annotated[bool, Query(alias="all", description="include finished bags")] = False,
        limit: Annotated[int, DecimalDigits, Query(ge=1, le=10000)] = 1000,
    ) -> list[BagInfo]:
        """Your bags of tasks (admin: everyone's) with their progress; active ones unless `all`."""
        rows = manager.store.list_jobs(user=None if p.admin else p.user, states=None, limit=limit, finished=all_)
        return [bag_info(r) for r in rows if r["spec"].get("kind") == "bag"]

    @app.get(
        "/bags/{job_id}",
        response_model=BagInfo,
        tags=["bags"],
        responses=_errors(**_USER, e404="no such bag (or another user's)"),
    )
    async def show_bag(job_id: JobId, p: User) -> BagInfo:
        """One bag of tasks with its progress."""
        return bag_info(own_bag(job_id, p))

    @app.get(
        "/bags/{job_id}/results",
        response_model=list[TaskResult],
        tags=["bags"],
        responses=_errors(**_USER, e404="no such bag (or another user's)"),
    )
    async def bag_results(
        job_id: JobId,
        p: User,
        state: Annotated[list[TaskState] | None, Query()] = None,
        offset: Annotated[int, DecimalDigits, Query(ge=0, le=INT64_MAX)] = 0,
        limit: Annotated[int, DecimalDigits, Query(ge=1, le=100000)] = 100000,
    ) -> list[TaskResult]:
        """The results index (KOALA-CS thesis §3.5.4): each task's command line, its output and
        error files, exit code and state, in task order."""
        own_bag(job_id, p)
        out = []
        for t in manager.store.bag_tasks(job_id, states=state, offset=offset, limit=limit):
            stdout, stderr = task_outputs(str(Path(t["output"]).parent), t["idx"])
            out.append(
                TaskResult(
                    task=t["idx"],
                    command=t["command"],
                    state=t["state"],
                    attempts=t["attempts"],
                    exit_code=t["exit_code"],
                    runtime=t["runtime"],
                    end_time=t["end_time"],
                    node=t["node"],
                    output=stdout,
                    error=stderr,
                )
            )
        return out

    @app.get(
        "/bags/{job_id}/tasks/{task}/output",
        response_class=PlainTextResponse,
        tags=["bags"],
        responses={
            status: {
                "description": r["description"],
                "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorResponse"}}},
            }
            for status, r in _errors(**_USER, e404="no such bag or task (or another user's bag)").items()
        },
    )
    async def task_output(
        job_id: JobId,
        task: Annotated[int, DecimalDigits, PathParam(ge=0, le=INT64_MAX)],
        p: User,
        stream: Annotated[str, Query(pattern="^(stdout|stderr)$")] = "stdout",
        offset: Annotated[int, DecimalDigits, Query(ge=0, le=INT64_MAX)] = 0,
    ) -> PlainTextResponse:
        """Output of a task's last run (empty until it ran), from byte `offset`."""
        own_bag(job_id, p)
        t = manager.store.bag_task(job_id, task)
        if t is None:
            raise HTTPException(404, f"bag {job_id} has no task {task} (tasks are numbered from 0)")
        stdout, stderr = task_outputs(str(Path(t["output"]).parent), task)
        path = Path(stdout if stream == "stdout" else stderr)
        data = b""
        if path.is_file():
            with open(path, "rb") as f:
                f.seek(offset)
                data = f.read(16 * 1024 * 1024)
        return PlainTextResponse(data.decode("utf-8", "replace"), headers={"X-Offset": str(offset + len(data))})

    # ----------------------------------------------------------------------- sites, VMs

    @app.get("/sites", tags=["resources"], responses=_errors(**_USER))
    async def sites(p: User) -> list[dict[str, Any]]:
        """Every site with its capacity now."""
        out = []
        engine = manager.engine
        queued = sum(len(q) for q in engine.queues)
        costs = site_costs(manager.store, manager.env, now=time.time())
        for b in engine.backends:
            s = b.site
            d: dict[str, Any] = {
                "index": b.index,
                "name": s.name,
                "kind": s.kind.value,
                "online": b.online,
                "free": b.free,
                "busy": b.busy,
                "running": len(b.running),
                "max_processors": s.max_processors,
                "unavailable": b.unavailable,
            }
            if isinstance(b, CloudBackend):
                d.update(leased=b.leased, booting=b.booting, max_vms=s.max_vms, price_per_hour=s.price_per_hour)
                d["charged_cost"] = costs.get(b.index, 0.0)
            if s.lrm is not None:
                # what marks this manager's jobs in the batch system (docs/sites.md: cleaning up)
                d["lrm"] = {
                    "driver": s.lrm.driver,
                    "mode": s.lrm.mode,
                    "comment": f"isthmus:{manager.manager_id}:",
                    "keep_free": s.lrm.keep_free,
                    # processors local users' jobs wait for in the LRM (KOALA-CS §3.2.1), last poll
                    "waiting_local": b.waiting_local if isinstance(b, PilotJobs | BatchCluster) else 0,
                }
            if isinstance(b, PilotJobs):
                d["pilots"] = b.pilot_counts()
            if isinstance(b, ProviderCloud):
                d["provider"] = {
                    "driver": b.settings.driver,
                    "error_vms": b.error_vms,
                    "last_error": b.last_error,
                    "leasing": b.lease_refusal(time.time()) or "ok",
                }
            out.append(d)
        return [{**d, "queued_total": queued} for d in out]

    @app.get("/queues", tags=["resources"], responses=_errors(**_USER))
    async def queues(p: User) -> list[dict[str, Any]]:
        """Each queue now (one per set of sites the allocation policy uses): its sites, runtime
        limit, waiting jobs and the processors they request, and the oldest job's wait (s)."""
        return [r.as_dict() for r in queue_rows(manager.engine, manager.env)]

    @app.get("/timeseries", tags=["resources"], responses=_errors(**_USER))
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

    def _vm_user(row: dict[str, Any], vm: Any, backend: Any) -> str | None:
        """The user a VM serves: the one it was leased for (vm-share), else the users of the
        jobs running on it now (comma-separated), else None."""
        if row.get("owner"):
            return str(row["owner"])
        if vm is None:
            return None
        users = sorted({e.job.user for e in backend.running.values() if any(v == vm.id for v, _ in e.alloc)})
        return ",".join(users) or None

    @app.get("/vms", tags=["resources"], responses=_errors(**_USER))
    async def vm_list(
        p: User, all_: Annotated[bool, Query(alias="all", description="include released VMs")] = False
    ) -> list[dict[str, Any]]:
        """VM leases with their cost so far (charged per started billing increment)."""
        now = time.time()
        out = []
        engine = manager.engine
        for row in manager.store.vm_rows(live_only=not all_):
            site = manager.env.sites[row["site"]]
            backend = engine.backends[row["site"]]
            vm = backend.vms.get(row["vm"]) if isinstance(backend, CloudBackend) else None
            # what the VM does now: idle or running jobs (busy), from the engine's state
            activity = None
            if vm is not None and vm.state is VmState.READY:
                activity = "idle" if vm.load == 0 else "busy"  # bags scavenging it leave it idle
            end = row["released_at"] if row["released_at"] is not None else now
            lease = end - row["leased_at"]
            vm_type = int(row.get("vm_type") or 0)
            out.append(
                {
                    **row,
                    "site_name": site.name,
                    "activity": activity,
                    "type_name": site.types[vm_type].name if vm_type < len(site.types) else None,
                    "user": _vm_user(row, vm, backend),
                    "retiring": bool(vm is not None and vm.retiring),
                    "lease_seconds": lease,
                    "charged_cost": site.charged_cost(lease, vm_type),
                    "actual_cost": site.actual_cost(lease, vm_type) if site.is_paid else 0.0,
                }
            )
        return out

    # ------------------------------------------------------------------------ budgets

    def _budget_rows() -> list[BudgetRow]:
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

    @app.get("/budgets", response_model=list[BudgetRow], tags=["resources"], responses=_errors(**_USER))
    async def budgets(p: User) -> list[BudgetRow]:
        """Every budget cap: sites, period, limit, charged in the current period (increments are
        charged when they start, so this is also what is committed) and what is left."""
        return _budget_rows()

    @app.put(
        "/budgets/{name}",
        response_model=BudgetRow,
        tags=["admin"],
        responses=_errors(**_ADMIN, **_BODY, e404="no such budget"),
    )
    async def set_budget(name: Annotated[str, PathParam(max_length=64)], req: BudgetUpdate, p: Admin) -> BudgetRow:
        """Change a cap's limit now (kept across restarts); leases and billing boundaries are
        checked against it from now on, what was charged stays."""
        cap = manager.engine.ledger.get(name)
        if cap is None:
            raise HTTPException(404, f"no budget {name!r}; budgets: {[c.cap.name for c in manager.engine.ledger.caps]}")
        manager.set_budget_limit(name, req.limit)
        return next(r for r in _budget_rows() if r.name == name)

    # --------------------------------------------------------------------- accounting

    @app.get("/accounting", response_model=list[AccountingRow], tags=["jobs"], responses=_errors(**_USER))
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
            _invalid_field(("query", "until"), f"until ({end}) is before since ({since})")
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

    @app.post("/forecast", response_model=ForecastResponse, tags=["jobs"], responses=_errors(**_USER, **_BODY))
    async def forecast(req: ForecastRequest, p: User) -> ForecastResponse:
        """Each queued and running job's expected start and end, and the expected spend, from a
        simulation of the live state with the live policies, or with the policy or budget given
        (the live state is not touched). A user sees their own jobs only."""
        if req.no_budget and req.budget is not None:
            _invalid_field(("body", "no_budget"), "budget and no_budget: give one of them")
        if req.environment is not None and req.add_sites is not None:
            _invalid_field(("body", "add_sites"), "environment and add_sites: give one of them")
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
            _invalid_field(("body", field_of_env), str(exc))
        except PolicyError as exc:
            field = "allocation" if req.allocation and req.allocation in str(exc) else "provisioning"
            _invalid_field(("body", field), str(exc))
        jobs = [j for j in result.jobs if p.admin or j.user == p.user]
        return ForecastResponse(
            **{k: v for k, v in dataclasses.asdict(result).items() if k != "jobs"},
            jobs=[JobForecastItem(**dataclasses.asdict(j)) for j in jobs],
        )

    # ------------------------------------------------------------------------- tokens

    @app.post(
        "/tokens", status_code=201, response_model=TokenResponse, tags=["admin"], responses=_errors(**_ADMIN, **_BODY)
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

    @app.get("/tokens", response_model=list[TokenInfo], tags=["admin"], responses=_errors(**_ADMIN))
    async def list_tokens(p: Admin) -> list[TokenInfo]:
        """Every user token by id (the first digits of its hash; the tokens themselves are not
        kept), with its user, creation and expiry times (admin only)."""
        return [TokenInfo(**t) for t in manager.store.user_tokens()]

    @app.delete(
        "/tokens/{token_id}",
        status_code=204,
        tags=["admin"],
        responses=_errors(**_ADMIN, e404="no user token has this id", e409="several tokens start with this id"),
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
        token_cache.clear()  # revoked means refused at once, not after the cache's 5 s
        return Response(status_code=204)

    @app.get("/users", tags=["admin"], responses=_errors(**_ADMIN))
    async def list_users(p: Admin) -> list[dict[str, Any]]:
        """Every user (admin only)."""
        return manager.store.list_users()

    @app.get(
        "/metrics",
        tags=["meta"],
        response_class=PlainTextResponse,
        responses={200: {"content": {"text/plain": {}}, "description": "Prometheus text format"}, **_errors(**_USER)},
    )
    async def prometheus_metrics(p: User) -> Response:
        """The pool in the Prometheus text format (any user's token: aggregate figures only)."""
        body, content_type = metrics.render()
        return Response(body, media_type=content_type)

    @app.get("/whoami", tags=["meta"], responses=_errors(**_USER))
    async def whoami(p: User) -> dict[str, Any]:
        """The user a token belongs to."""
        return {"user": p.user, "admin": p.admin}

    @app.get("/events", tags=["admin"], responses=_errors(**_ADMIN))
    async def event_log(
        p: Admin, since: Annotated[int, DecimalDigits, Query(ge=0, le=INT64_MAX)] = 0
    ) -> list[list[float]]:
        """The persisted engine event log (admin only): [time, kind, job, site, vm, value] rows."""
        return [list(r) for r in manager.store.event_rows()[since:]]

    @app.post(
        "/admin/stop",
        status_code=202,
        response_model=StopResponse,
        tags=["admin"],
        responses=_errors(**_ADMIN, **_BODY),
    )
    async def admin_stop(req: StopRequest, p: Admin) -> StopResponse:
        """Stop the manager (admin only): see `isthmus stop`. Answers before it stops."""
        running = sum(len(b.running) for b in manager.engine.backends)
        tasks = manager.engine.bags.running_tasks
        manager.begin_shutdown(req.mode)
        if req.mode != "drain":
            asyncio.get_running_loop().call_later(0.2, manager.request_exit)  # after this answer
        return StopResponse(mode=req.mode, running=running, tasks=tasks)

    @app.get("/pilots", tags=["admin"], responses=_errors(**_ADMIN))
    async def pilot_list(p: Admin) -> list[dict[str, Any]]:
        """Every pilot recorded (admin only): node, site, slots, pid, host, state and times."""
        return manager.store.pilot_rows()

    # -------------------------------------------------------------------------- pilots

    @app.post("/pilot/register", tags=["pilot"], responses=_errors(**_PILOT, **_BODY))
    async def pilot_register(req: RegisterRequest, p: Pilot) -> dict[str, Any]:
        """A pilot registers for its node (named by its token); answers its registration id."""
        assert p.node is not None
        return manager.register(p.node, req.model_dump())

    @app.get("/pilot/poll", tags=["pilot"], responses=_errors(**_PILOT, e409=_REREGISTER))
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

    @app.post("/pilot/report", tags=["pilot"], responses=_errors(**_PILOT, **_BODY, e409=_REREGISTER))
    async def pilot_report(req: ReportRequest, p: Pilot) -> JSONResponse:
        """Task events (started, ended with exit code and runtime); answers the pilot's commands
        after its `ack` (the runs its reports freed slots for), as the long poll would."""
        assert p.node is not None
        cmds = manager.report(p.node, req.pilot_id, req.model_dump())
        return JSONResponse({"ok": True, "commands": cmds})

    # ------------------------------------------------------------------------- dashboard

    app.include_router(peer_router(manager, federation, user_of))

    @app.get("/", include_in_schema=False)
    async def root() -> RedirectResponse:
        return RedirectResponse("/ui/")

    # the dashboard's page and script (no CDN); it reads the API with the user's own token
    app.mount("/ui", _DashboardFiles(directory=Path(__file__).with_name("static"), html=True), name="ui")
    return app


class _DashboardFiles(StaticFiles):
    """The dashboard's files, with a policy that lets them load nothing from elsewhere."""

    async def get_response(self, path: str, scope: Any) -> Response:
        response = await super().get_response(path, scope)
        response.headers["Content-Security-Policy"] = "default-src 'self'; frame-ancestors 'none'"
        response.headers["X-Content-Type-Options"] = "nosniff"
        return response
