"""Guards of the REST API against oversized or unencodable requests.

`BodyLimitMiddleware` refuses request bodies larger than a limit with 413 before the app
parses them, counting the bytes as they arrive (a Content-Length header may be absent or
lie), and answers 400 to a body nested so deeply that taking it apart exceeds Python's
recursion limit (RecursionError, on any route). `json_safe` makes a validation error echoing
hostile input (NaN, lone surrogates) encodable, so the client gets its 422 instead of a 500.
"""

from __future__ import annotations

import json
import math
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send


def too_large_message(limit: int) -> str:
    """The 413 detail for a body over `limit` bytes."""
    return f"request body too large: the limit is {limit} bytes (see `isthmus server --max-body-bytes`)"


def too_deep_message() -> str:
    """The 400 detail for a body the app could not take apart without recursing too deep."""
    return "request body nested too deeply (arrays and objects inside one another)"


class BodyLimitMiddleware:
    """ASGI middleware: HTTP requests whose body exceeds `max_bytes` get 413 and never reach the app.

    The body is read completely (counting streamed bytes, refusing at once when the declared
    Content-Length is already too large) and then handed to the app; the app buffers whole
    bodies anyway to parse JSON, so this costs no extra memory beyond the limit.
    """

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on with its body buffered, or answer 413."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    declared = 0
                if declared > self.max_bytes:
                    await self._refuse(send, 413, too_large_message(self.max_bytes))
                    return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client left: let the app see it
                chunks_done: list[Message] = [message]
                break
            body = message.get("body", b"")
            size += len(body)
            if size > self.max_bytes:
                await self._refuse(send, 413, too_large_message(self.max_bytes))
                return
            chunks.append(body)
            if not message.get("more_body", False):
                chunks_done = []
                break
        replay: list[Message] = [{"type": "http.request", "body": b"".join(chunks), "more_body": False}, *chunks_done]

        async def replayed() -> Message:
            if replay:
                return replay.pop(0)
            return await receive()

        started = False

        async def tracked(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, replayed, tracked)
        except RecursionError:
            # a body nested deeper than a parser or validator can recurse (JSON arrays in arrays):
            # the client's doing, on whichever route; never a 500
            if started:
                raise
            await self._refuse(send, 400, too_deep_message())

    async def _refuse(self, send: Send, status: int, detail: str) -> None:
        body = json.dumps({"detail": detail}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"connection", b"close"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


def json_safe(value: Any) -> Any:
    """`value` with what strict JSON cannot carry replaced: non-finite floats by their name,
    lone surrogates by U+FFFD, other non-JSON objects by their str()."""
    if isinstance(value, str):
        return value.encode("utf-8", "surrogatepass").decode("utf-8", "replace") if _has_surrogate(value) else value
    if isinstance(value, bool) or value is None or isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, dict):
        return {str(json_safe(k)): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return json_safe(str(value))


def _has_surrogate(s: str) -> bool:
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False
