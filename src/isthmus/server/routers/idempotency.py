"""The Idempotency-Key of submissions (POST /jobs, /jobs/batch, /bags) and the honest 503.

A retried request with the key of an earlier one (same user, same route and validated body)
answers the ids of the first without storing again; the key is stored in the transaction that
stores the jobs, so a manager killed before that stores neither. docs/live.md has the rules.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from isthmus.live.errors import PersistError, RequestError
from isthmus.live.manager import Manager

HEADER = "Idempotency-Key"
MAX_KEY_LENGTH = 255
"""The longest Idempotency-Key accepted (a UUID has 36 characters)."""

HEADER_DOC = (
    "Any printable ASCII string of at most 255 characters (a fresh UUID per submission): a retried "
    "request with the same key and body answers the first answer's ids without storing again "
    "(kept 24 h); the same key with another body answers 422 (loc: header, Idempotency-Key)"
)


def check_key(key: str | None) -> str | None:
    """The Idempotency-Key header's value, None without one; RequestError (400) naming the header
    when it is empty, too long or not printable ASCII."""
    if key is None:
        return None
    if not key or len(key) > MAX_KEY_LENGTH or not all(" " <= c <= "~" for c in key):
        raise RequestError(
            400, f"{HEADER}: must be 1 to {MAX_KEY_LENGTH} printable ASCII characters (a UUID, for example)"
        )
    return key


def digest(route: str, request: Any) -> str:
    """SHA-256 of `route` and the validated request (JSON, keys sorted): equal for a retry only."""
    text = json.dumps([route, request], sort_keys=True, separators=(",", ":"), allow_nan=True)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def not_stored_yet(ids: list[int], exc: PersistError) -> JSONResponse:
    """The 503 of a submission accepted in memory whose group commit could not be written in
    time: it names the ids the jobs will be stored under once writes work again (unless the
    manager stops first), so the client can tell a retry from a duplicate."""
    which = ", ".join(str(i) for i in ids)
    detail = (
        f"the manager cannot store this now ({exc}): job(s) {which} are kept in memory and are stored "
        f"under these ids once writes work again, unless the manager stops before; retry with the same "
        f"{HEADER} to learn which (a retry without one submits again)"
    )
    return JSONResponse(status_code=503, content={"detail": detail, "ids": ids}, headers={"Retry-After": "2"})


async def submit_once(
    manager: Manager, user: str, key: str | None, route: str, request: Any, submit: Callable[[], list[int]]
) -> list[int] | JSONResponse:
    """Run `submit` (which puts the jobs into the manager and returns their ids) unless `user`
    already submitted `request` under `key`, and wait until the jobs are stored; returns their
    ids, or the 503 that names them when they could not be stored in time."""
    dig = digest(route, request) if key is not None else ""
    ids: list[int] | None = None
    if key is not None and (found := manager.intake.replay(user, key)) is not None:
        if found[0] != dig:
            msg = "this key was used for a different request (another route or body): use a fresh key"
            raise RequestValidationError(
                [{"type": "value_error", "loc": ("header", HEADER), "msg": msg, "input": None}]
            )
        ids = found[1]
        if not manager.intake.key_pending(user, key):
            return ids  # stored already: answered again without waiting for anyone's commit
    if ids is None:
        ids = submit()
        if key is not None:
            manager.intake.remember(user, key, dig, ids)
    try:
        await manager.committed()
    except PersistError as exc:
        return not_stored_yet(ids, exc)
    return ids
