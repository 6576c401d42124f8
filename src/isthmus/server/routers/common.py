"""What several routers share: the documented error answers, strict integer parameters, the
422 shape for a field checked in a route body, and the rule that hides other users' jobs."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

from fastapi import HTTPException
from fastapi import Path as PathParam
from fastapi.exceptions import RequestValidationError
from pydantic import BeforeValidator

from isthmus.server.auth import Principal
from isthmus.server.schemas import INT64_MAX, ErrorResponse

if TYPE_CHECKING:
    from isthmus.live.manager import Manager

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


def errors(**statuses: str) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses` for error statuses (keyword `e404="..."`): JSON `{"detail": ...}`."""
    return {int(k[1:]): {"model": ErrorResponse, "description": d} for k, d in statuses.items()}


def text_route_errors(**statuses: str) -> dict[int | str, dict[str, Any]]:
    """`errors` for a route whose success answer is plain text: its errors are still JSON."""
    return {
        status: {
            "description": r["description"],
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorResponse"}}},
        }
        for status, r in errors(**statuses).items()
    }


AUTH = {
    "e401": "missing, malformed or unknown token",
    "e503": "the manager cannot write its database now: retry later (see /health)",
}
USER = {**AUTH, "e403": "a pilot token (users' endpoints need a user token)"}
ADMIN = {**AUTH, "e403": "not the admin token"}
PILOT = {**AUTH, "e403": "not a pilot token", "e410": "this node is no longer part of the manager"}
BODY = {
    "e400": "the body is not UTF-8 JSON",
    "e413": "request body larger than the manager's limit (--max-body-bytes)",
}


def invalid_field(loc: tuple[str, ...], message: str) -> NoReturn:
    """Answer 422 in the same shape as a schema violation (the documented one), naming `loc`."""
    raise RequestValidationError([{"type": "value_error", "loc": loc, "msg": message, "input": None}])


def own_job(manager: Manager, job_id: int, p: Principal) -> dict[str, Any]:
    """Job `job_id`'s row when `p` may see it (its user, or the admin); 404 otherwise."""
    row = manager.store.job(job_id)
    # another user's job answers exactly like a missing one: ids reveal nothing
    if row is None or (not p.admin and row["user"] != p.user):
        raise HTTPException(404, f"no job {job_id}")
    return row
