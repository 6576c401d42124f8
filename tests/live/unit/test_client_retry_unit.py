"""The client's submission sends: one Idempotency-Key for every send, a retry after a lost
connection and after a 503, and no retry (nor key) when one send is asked for."""

from __future__ import annotations

import httpx
import pytest

from isthmus.live.client import IDEMPOTENCY_HEADER, ApiError, Client


def _client(answers: list[httpx.Response | Exception], seen: list[httpx.Request]) -> Client:
    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    c = Client("http://manager.test", "tok")
    c.http = httpx.Client(base_url=c.url, transport=httpx.MockTransport(handler))
    return c


def test_a_submission_is_sent_again_with_its_key_after_a_lost_connection_and_a_503() -> None:
    seen: list[httpx.Request] = []
    answers: list[httpx.Response | Exception] = [
        httpx.ConnectError("refused"),
        httpx.Response(503, json={"detail": "cannot store"}, headers={"Retry-After": "0"}),
        httpx.RemoteProtocolError("closed before the answer"),
        httpx.Response(201, json={"id": 7}),
    ]
    with _client(answers, seen) as c:
        assert c.post_once("/jobs", {"command": "true"}, attempts=5, backoff=0.01) == {"id": 7}
    keys = {r.headers[IDEMPOTENCY_HEADER] for r in seen}
    assert len(seen) == 4 and len(keys) == 1 and len(keys.pop()) == 36  # one fresh UUID for all


def test_retries_end_with_the_last_answer() -> None:
    seen: list[httpx.Request] = []
    answers: list[httpx.Response | Exception] = [
        httpx.Response(503, json={"detail": "cannot store"}, headers={"Retry-After": "0"}) for _ in range(3)
    ]
    with _client(answers, seen) as c, pytest.raises(ApiError) as failed:
        c.submit(command="true", idempotency_key="k", attempts=3)
    assert failed.value.status == 503 and len(seen) == 3
    assert {r.headers[IDEMPOTENCY_HEADER] for r in seen} == {"k"}


def test_a_single_send_has_no_key_and_no_retry() -> None:
    seen: list[httpx.Request] = []
    with _client([httpx.ConnectError("refused")], seen) as c, pytest.raises(ApiError) as failed:
        c.submit(command="true")
    assert failed.value.status == 0 and len(seen) == 1 and IDEMPOTENCY_HEADER not in seen[0].headers


def test_a_client_error_is_not_retried() -> None:
    seen: list[httpx.Request] = []
    answers: list[httpx.Response | Exception] = [httpx.Response(400, json={"detail": "size"})]
    with _client(answers, seen) as c, pytest.raises(ApiError) as failed:
        c.submit_many([{"command": "true"}], attempts=4)
    assert failed.value.status == 400 and len(seen) == 1
