"""Bags of tasks: submit, list with their progress, the results index, a task's output.

A bag is a job of kind "bag": it is visible to its user and the admin only, and another
user's bag answers 404 like one that does not exist.
"""

from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, HTTPException, Query
from fastapi import Path as PathParam
from fastapi.responses import JSONResponse, PlainTextResponse

from isthmus.agent.pilot import task_outputs
from isthmus.backends.jobfiles import read_regular
from isthmus.live.bag_tasks import progress
from isthmus.live.manager import Manager
from isthmus.model.states import TaskState
from isthmus.server.auth import Auth, Principal
from isthmus.server.routers.common import BODY, USER, DecimalDigits, JobId, errors, own_job, text_route_errors
from isthmus.server.routers.idempotency import HEADER, HEADER_DOC, check_key, submit_once
from isthmus.server.schemas import INT64_MAX, BagInfo, BagProgress, BagRequest, SubmitResponse, TaskResult


def bags_router(manager: Manager, auth: Auth) -> APIRouter:
    """The /bags routes of `manager`."""
    router = APIRouter()
    User = Annotated[Principal, Depends(auth.user)]  # noqa: N806

    def own_bag(bag_id: int, p: Principal) -> dict[str, Any]:
        row = own_job(manager, bag_id, p)
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

    @router.post(
        "/bags",
        status_code=201,
        response_model=SubmitResponse,
        tags=["bags"],
        responses=errors(
            **{
                **USER,
                **BODY,
                "e400": "the body is not UTF-8 JSON, no site or policy here runs bags, or a bad Idempotency-Key",
            }
        ),
    )
    async def submit_bag(
        req: BagRequest,
        p: User,
        idempotency_key: Annotated[str | None, Header(alias=HEADER, description=HEADER_DOC)] = None,
    ) -> SubmitResponse | JSONResponse:
        """Submit a bag of tasks (one command line per task, or a sweep); answers its job id
        (with an Idempotency-Key, a retry answers the first id)."""
        user = p.user
        assert user is not None
        key = check_key(idempotency_key)
        commands = req.commands()  # at most isthmus.live.bagspec.MAX_TASKS (the schema's limit)
        spec = req.model_dump(exclude_none=True, exclude={"tasks"})
        request = {"spec": spec, "commands": commands}
        ids = await submit_once(manager, user, key, "bags", request, lambda: [manager.submit_bag(user, spec, commands)])
        return ids if isinstance(ids, JSONResponse) else SubmitResponse(id=ids[0])

    @router.get("/bags", response_model=list[BagInfo], tags=["bags"], responses=errors(**USER))
    async def list_bags(
        p: User,
        all_: Annotated[bool, Query(alias="all", description="include finished bags")] = False,
        limit: Annotated[int, DecimalDigits, Query(ge=1, le=10000)] = 1000,
    ) -> list[BagInfo]:
        """Your bags of tasks (admin: everyone's) with their progress; active ones unless `all`."""
        rows = manager.store.list_jobs(user=None if p.admin else p.user, states=None, limit=limit, finished=all_)
        return [bag_info(r) for r in rows if r["spec"].get("kind") == "bag"]

    @router.get(
        "/bags/{job_id}",
        response_model=BagInfo,
        tags=["bags"],
        responses=errors(**USER, e404="no such bag (or another user's)"),
    )
    async def show_bag(job_id: JobId, p: User) -> BagInfo:
        """One bag of tasks with its progress."""
        return bag_info(own_bag(job_id, p))

    @router.get(
        "/bags/{job_id}/results",
        response_model=list[TaskResult],
        tags=["bags"],
        responses=errors(**USER, e404="no such bag (or another user's)"),
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

    @router.get(
        "/bags/{job_id}/tasks/{task}/output",
        response_class=PlainTextResponse,
        tags=["bags"],
        responses=text_route_errors(**USER, e404="no such bag or task (or another user's bag)"),
    )
    async def task_output(
        job_id: JobId,
        task: Annotated[int, DecimalDigits, PathParam(ge=0, le=INT64_MAX)],
        p: User,
        stream: Annotated[str, Query(pattern="^(stdout|stderr)$")] = "stdout",
        offset: Annotated[int, DecimalDigits, Query(ge=0, le=INT64_MAX)] = 0,
    ) -> PlainTextResponse:
        """Output of a task's last run (empty until it ran), from byte `offset`."""
        row = own_bag(job_id, p)
        t = manager.store.bag_task(job_id, task)
        if t is None:
            raise HTTPException(404, f"bag {job_id} has no task {task} (tasks are numbered from 0)")
        stdout, stderr = task_outputs(str(Path(t["output"]).parent), task)
        # never blocks on a FIFO; with [users], only a file of the bag's account is answered
        data = read_regular(stdout if stream == "stdout" else stderr, offset, manager.intake.output_owner(row["user"]))
        data = data or b""
        return PlainTextResponse(data.decode("utf-8", "replace"), headers={"X-Offset": str(offset + len(data))})

    return router
