"""Jobs: submit one or a batch, list, show (with history and why it waits), cancel, read output.

Users see and cancel only their own jobs, the admin everything; another user's job answers
404 exactly like a job that does not exist. A job forwarded to a peer manager is queried
(and cancelled) along its chain.
"""

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, HTTPException, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse
from pydantic import TypeAdapter, ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from isthmus.backends.jobfiles import OutputUnreadable, read_run_output
from isthmus.federation.live import LiveFederation
from isthmus.live.bag_tasks import progress
from isthmus.live.manager import Manager
from isthmus.model.states import JobState
from isthmus.server.auth import Auth, Principal
from isthmus.server.routers.common import BODY, USER, DecimalDigits, JobId, errors, own_job, text_route_errors
from isthmus.server.routers.idempotency import HEADER, HEADER_DOC, check_key, submit_once
from isthmus.server.schemas import (
    INT64_MAX,
    BagProgress,
    HistoryItem,
    JobInfo,
    JobStateName,
    SubmitRequest,
    SubmitResponse,
)
from isthmus.store import tables as db

_SUBMIT_LIST = TypeAdapter(list[SubmitRequest])


def job_info(
    manager: Manager, federation: LiveFederation | None, row: dict[str, Any], *, history: bool = False
) -> JobInfo:
    """The API's view of job row `row`: while queued, why it waits; with `history`, also its state
    changes and where it was forwarded or received from."""
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
    # a queued job says why it waits in every answer, a listing's rows included
    status = manager.why(row["id"]) if row["state"] == JobState.QUEUED else None
    if status is not None:
        info.reason = status.reason
        info.reason_code = status.code.label
        info.reason_policy = status.policy or None
    return info


def jobs_router(manager: Manager, federation: LiveFederation | None, auth: Auth) -> APIRouter:
    """The /jobs routes of `manager` (jobs forwarded to peers go through `federation`)."""
    router = APIRouter()
    User = Annotated[Principal, Depends(auth.user)]  # noqa: N806
    Key = Annotated[str | None, Header(alias=HEADER, description=HEADER_DOC)]  # noqa: N806

    @router.get("/jobs/batch", include_in_schema=False)
    async def _batch_get() -> None:
        """Without this, GET /jobs/batch would reach GET /jobs/{job_id} (422 on 'batch') instead of 405."""
        raise StarletteHTTPException(405, "Method Not Allowed")

    @router.post(
        "/jobs",
        status_code=201,
        response_model=SubmitResponse,
        tags=["jobs"],
        responses=errors(
            **{
                **USER,
                **BODY,
                "e400": "the body is not UTF-8 JSON, no site can offer `size` processors, or a bad Idempotency-Key",
            }
        ),
    )
    async def submit(req: SubmitRequest, p: User, idempotency_key: Key = None) -> SubmitResponse | JSONResponse:
        """Submit a job; answers its id (with an Idempotency-Key, a retry answers the first id)."""
        user = p.user
        assert user is not None
        key = check_key(idempotency_key)
        spec = req.model_dump(exclude_none=True)
        ids = await submit_once(manager, user, key, "jobs", spec, lambda: [manager.submit(user, spec)])
        return ids if isinstance(ids, JSONResponse) else SubmitResponse(id=ids[0])

    max_batch = manager.config.max_batch_jobs

    @router.post(
        "/jobs/batch",
        status_code=201,
        response_model=list[SubmitResponse],
        tags=["jobs"],
        responses=errors(
            **USER,
            e400="the body is not UTF-8 JSON, a job's `size` is larger than any site can offer, or a bad "
            "Idempotency-Key",
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
    async def submit_batch(
        request: Request, p: User, idempotency_key: Key = None
    ) -> list[SubmitResponse] | JSONResponse:
        """Submit several jobs at once (all or none are accepted); answers their ids, in order.

        At most `max_batch_jobs` jobs (default 10,000) per request: the count is checked before
        any job is validated, so an oversized batch costs the event loop next to nothing.
        """
        user = p.user
        assert user is not None
        key = check_key(idempotency_key)
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

        def submit_all() -> list[int]:
            for i, spec in enumerate(specs):
                manager.check_size(int(spec["size"]))
                manager.check_vm(user, spec)
                manager.intake.check_outputs(spec, manager.intake.next_job_id + i, user)
            return [manager.submit(user, spec) for spec in specs]

        ids = await submit_once(manager, user, key, "jobs/batch", specs, submit_all)
        return ids if isinstance(ids, JSONResponse) else [SubmitResponse(id=i) for i in ids]

    @router.get("/jobs", response_model=list[JobInfo], tags=["jobs"], responses=errors(**USER))
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
        return [job_info(manager, federation, r) for r in rows]

    @router.get(
        "/jobs/{job_id}",
        response_model=JobInfo,
        tags=["jobs"],
        responses=errors(**USER, e404="no such job (or another user's)"),
    )
    async def show_job(job_id: JobId, p: User) -> JobInfo:
        """A job with its state history (and, while queued, why it waits). A job forwarded to a
        peer manager is queried there first (queryJob): its state is the one where it runs."""
        row = own_job(manager, job_id, p)
        if federation is not None and federation.holds(job_id):
            await federation.refresh(job_id)
            row = own_job(manager, job_id, p)
        return job_info(manager, federation, row, history=True)

    @router.post(
        "/jobs/{job_id}/cancel",
        tags=["jobs"],
        responses=errors(**USER, **BODY, e404="no such job (or another user's)", e409="the job already ended"),
    )
    async def cancel_job(job_id: JobId, p: User) -> dict[str, Any]:
        """Cancel a queued or running job."""
        row = own_job(manager, job_id, p)
        if row["state"] in db.TERMINAL:
            raise HTTPException(409, f"job {job_id} already ended ({row['state']})")
        if federation is not None and federation.holds(job_id):  # forwarded: cancelJob along its chain
            return {"id": job_id, "state": await federation.cancel_forwarded(job_id)}
        ok = manager.cancel(job_id)
        if not ok:
            raise HTTPException(409, f"job {job_id} is not active")
        return {"id": job_id, "state": JobState.CANCELLED.value}

    @router.get(
        "/jobs/{job_id}/output",
        response_class=PlainTextResponse,
        tags=["jobs"],
        responses=text_route_errors(
            **USER, e404="no such job (or another user's)", e410="the run's output file was removed"
        ),
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
        row = own_job(manager, job_id, p)
        r = row["run"] if run is None else run
        if r < 1:
            return PlainTextResponse("", headers={"X-Offset": str(offset)})
        starting = r == row["run"] and row["state"] == JobState.STARTING
        try:  # a user's file that could not be opened: the spool has the reason
            data = read_run_output(
                row["spec"],
                job_id,
                row["spool"],
                r,
                stream=stream,
                offset=offset,
                starting=starting,
                owner=manager.intake.output_owner(row["user"]),
            )
        except OutputUnreadable as exc:
            raise HTTPException(exc.status, str(exc)) from None
        return PlainTextResponse(
            data.decode("utf-8", "replace"), headers={"X-Offset": str(offset + len(data)), "X-Run": str(r)}
        )

    return router
