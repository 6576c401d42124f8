"""The REST API's guards, in process (no manager): the body-size middleware answers 413 before the
app reads an oversized body, streamed or declared, and hands smaller bodies on whole; validation
errors echoing hostile input stay encodable; the request models refuse what the manager must
never see (a null byte, coerced types, ISTHMUS_* variables, a relative path, NaN)."""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import AsyncIterator

import httpx
import pytest
from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from isthmus.server.limits import BodyLimitMiddleware, json_safe, too_large_message
from isthmus.server.schemas import BagRequest, SubmitRequest, SweepRequest

LIMIT = 100


async def _echo(request: Request) -> JSONResponse:
    body = await request.body()
    return JSONResponse({"bytes": len(body)})


APP = BodyLimitMiddleware(Starlette(routes=[Route("/echo", _echo, methods=["POST"])]), max_bytes=LIMIT)
"""An app that answers with the size of the body it read, behind a 100-byte limit."""


def _post(content: bytes | list[bytes]) -> httpx.Response:
    """POST `content` to the app: bytes with a Content-Length, a list of chunks streamed without one."""

    async def chunks(parts: list[bytes]) -> AsyncIterator[bytes]:
        for part in parts:
            yield part

    async def go() -> httpx.Response:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=APP), base_url="http://test") as c:
            body = content if isinstance(content, bytes) else chunks(content)
            return await c.post("/echo", content=body)

    return asyncio.run(go())


def test_a_body_within_the_limit_reaches_the_app_whole() -> None:
    assert _post(b"x" * LIMIT).json() == {"bytes": LIMIT}
    assert _post(b"").json() == {"bytes": 0}
    assert _post([b"y" * 30, b"y" * 30]).json() == {"bytes": 60}


def test_a_declared_or_streamed_body_over_the_limit_gets_413() -> None:
    declared = _post(b"x" * (LIMIT + 1))
    assert declared.status_code == 413
    assert declared.json() == {"detail": too_large_message(LIMIT)}
    assert "--max-body-bytes" in declared.json()["detail"]
    streamed = _post([b"y" * 30] * 5)  # no Content-Length: counted as it arrives
    assert "content-length" not in {k.lower() for k in streamed.request.headers}
    assert streamed.status_code == 413


def test_hostile_values_in_a_validation_error_stay_encodable() -> None:
    hostile = {"a": math.nan, "b": [math.inf, "\ud800x"], 3: (1, None, True), "o": object}
    safe = json_safe(hostile)
    text = json.dumps(safe, allow_nan=False)  # strict JSON: would raise on NaN or a surrogate
    assert safe["a"] == "nan" and safe["b"][0] == "inf"
    lone = safe["b"][1]  # the surrogate's bytes each become U+FFFD; the rest is kept
    assert lone.endswith("x") and set(lone[:-1]) == {"\ufffd"}
    assert safe["3"] == [1, None, True]
    assert safe["o"] == str(object)
    assert json.loads(text)["b"][0] == "inf"


def test_a_submission_is_strict_and_refuses_what_the_manager_must_never_run() -> None:
    ok = SubmitRequest.model_validate({"command": "sleep", "args": ["1"], "size": 2.0, "env": {"X": "1"}})
    assert ok.size == 2 and ok.priority == "high" and ok.env == {"X": "1"}
    for bad, field in (
        ({"command": "a\x00b"}, "command"),
        ({"command": "sleep", "size": "2"}, "size"),  # no coercion from a string
        ({"command": "sleep", "size": True}, "size"),
        ({"command": "sleep", "size": 2.5}, "size"),
        ({"command": "sleep", "size": 0}, "size"),
        ({"command": "sleep", "requested_runtime": math.nan}, "requested_runtime"),
        ({"command": "sleep", "env": {"ISTHMUS_TOKEN": "x"}}, "env"),
        ({"command": "sleep", "cwd": "relative/dir"}, "cwd"),
        ({"command": "sleep", "output": "out.txt"}, "output"),
        ({"command": "sleep", "unknown": 1}, "unknown"),
    ):
        with pytest.raises(ValidationError) as err:
            SubmitRequest.model_validate(bad)
        assert err.value.errors()[0]["loc"][0] == field, bad


def test_a_bag_takes_its_tasks_from_a_list_or_a_sweep_not_both() -> None:
    sweep = SweepRequest.model_validate({"template": "run {x} {y}", "params": ["x=1..2", "y=a,b"]})
    assert sorted(sweep.expand()) == ["run 1 a", "run 1 b", "run 2 a", "run 2 b"]
    assert BagRequest.model_validate({"sweep": sweep.model_dump()}).commands() == sweep.expand()
    assert BagRequest.model_validate({"tasks": ["true", "false"]}).commands() == ["true", "false"]
    with pytest.raises(ValidationError, match="not both"):
        BagRequest.model_validate({"tasks": ["true"], "sweep": sweep.model_dump()})
    with pytest.raises(ValidationError, match="not both"):
        BagRequest.model_validate({})
    with pytest.raises(ValidationError):
        SweepRequest.model_validate({"template": "run {z}", "params": ["x=1..2"]})  # {z} never given
