"""Every router refuses who may not call it: no token, a malformed or unknown one (401), a
token of the wrong kind (403); and every router answers a field it refuses with 422 naming it."""

from __future__ import annotations

import re
from typing import Any

from serverkit import PEER_SECRET, Api

#: A value for each path parameter of the API (the request must reach authentication only).
PATH_VALUES = {"job_id": "1", "task": "0", "name": "x", "token_id": "abcd"}

#: One path of each router: the refusals below must cover every one of them.
ONE_PATH_OF_EACH_ROUTER = {
    "/jobs",
    "/bags",
    "/sites",
    "/budgets",
    "/accounting",
    "/tokens",
    "/pilots",
    "/pilot/poll",
    "/peer/open",
    "/peers",
    "/metrics",
}


def operations(api: Api) -> list[tuple[str, str, dict[str, Any]]]:
    """(method, concrete path, OpenAPI operation) of every documented operation."""
    doc = api.client.get("/openapi.json").json()
    return [
        (method.upper(), re.sub(r"\{(\w+)\}", lambda m: PATH_VALUES[m.group(1)], path), op)
        for path, item in doc["paths"].items()
        for method, op in item.items()
    ]


def test_every_router_refuses_requests_without_valid_credentials(api: Api) -> None:
    refused: set[str] = set()
    ops = operations(api)
    assert len(ops) >= 38
    for method, path, op in ops:
        if path == "/health":  # the one route without a token
            assert api.client.get(path).status_code == 200
            continue
        assert "401" in op["responses"], (method, path)
        for headers in ({}, {"Authorization": "Basic abc"}, {"Authorization": "Bearer not-a-token-of-this-manager"}):
            answer = api.client.request(method, path, headers=headers)
            assert answer.status_code == 401, (method, path, headers, answer.text)
            assert isinstance(answer.json()["detail"], str)
        refused.add(path)
    assert refused >= ONE_PATH_OF_EACH_ROUTER


def test_a_missing_token_is_answered_with_how_to_send_one(api: Api) -> None:
    answer = api.client.get("/jobs")
    assert answer.status_code == 401
    assert answer.headers["WWW-Authenticate"] == "Bearer"
    assert "Authorization: Bearer" in answer.json()["detail"] and "ISTHMUS_TOKEN" in answer.json()["detail"]


def test_tokens_of_the_wrong_kind_are_refused_as_documented(api: Api) -> None:
    """A user token on an admin route, a pilot token on a user's route, a user's (even the
    admin's) on a pilot's: 403, on exactly the operations that document it."""
    alice, pilot = api.user("alice"), api.pilot("node-a")
    wrong = {
        "not the admin token": [alice],
        "a pilot token (users' endpoints need a user token)": [pilot],
        "not a pilot token": [alice, api.admin],
    }
    checked: dict[str, int] = dict.fromkeys(wrong, 0)
    for method, path, op in operations(api):
        described = op["responses"].get("403", {}).get("description")
        if described not in wrong:
            continue
        for headers in wrong[described]:
            answer = api.client.request(method, path, headers=headers)
            assert answer.status_code == 403, (method, path, answer.text)
        checked[described] += 1
    # admin: tokens (3), users, events, stop, pilots, budgets PUT; users: most; pilots: 3
    assert checked["not the admin token"] >= 7 and checked["not a pilot token"] == 3, checked
    assert checked["a pilot token (users' endpoints need a user token)"] >= 15, checked


def test_a_revoked_token_is_refused_at_once(api: Api) -> None:
    """The token cache (5 s for user tokens) is dropped at a revocation."""
    answer = api.client.post("/tokens", json={"user": "carol"}, headers=api.admin)
    carol = api.headers(answer.json()["token"])
    assert api.client.get("/whoami", headers=carol).json() == {"user": "carol", "admin": False}
    assert api.client.delete(f"/tokens/{answer.json()['id']}", headers=api.admin).status_code == 204
    assert api.client.get("/whoami", headers=carol).status_code == 401


PEER = {"Authorization": f"Bearer {PEER_SECRET}", "X-Isthmus-Peer": "P"}

#: (who, method, path, keyword arguments of the request, the field the 422 must name)
INVALID = [
    ("user", "POST", "/jobs", {"json": {"command": "true", "size": 0}}, ["body", "size"]),
    ("user", "POST", "/jobs/batch", {"json": [{"command": "true"}, {"command": ""}]}, ["body", 1, "command"]),
    ("user", "GET", "/jobs", {"params": {"limit": "many"}}, ["query", "limit"]),
    ("user", "GET", "/jobs/0", {}, ["path", "job_id"]),
    ("user", "GET", "/jobs/1/output", {"params": {"stream": "stdin"}}, ["query", "stream"]),
    ("user", "POST", "/bags", {"json": {"tasks": ["true"], "retries": 101}}, ["body", "retries"]),
    ("user", "GET", "/bags/1/tasks/-1/output", {}, ["path", "task"]),
    ("user", "GET", "/timeseries", {"params": {"points": "1"}}, ["query", "points"]),
    ("user", "GET", "/accounting", {"params": {"since": "100", "until": "50"}}, ["query", "until"]),
    ("user", "POST", "/forecast", {"json": {"budget": 1.0, "no_budget": True}}, ["body", "no_budget"]),
    ("admin", "PUT", "/budgets/x", {"json": {"limit": -1}}, ["body", "limit"]),
    ("admin", "POST", "/tokens", {"json": {"user": "no spaces"}}, ["body", "user"]),
    ("admin", "DELETE", "/tokens/xyz!", {}, ["path", "token_id"]),
    ("admin", "GET", "/events", {"params": {"since": " 2"}}, ["query", "since"]),
    ("pilot", "GET", "/pilot/poll", {}, ["query", "pilot_id"]),
    ("peer", "POST", "/peer/heartbeat", {"json": {"manager": "Q", "time": 1.0}}, ["body", "manager"]),
]


def test_a_refused_field_answers_422_naming_it(api: Api) -> None:
    """One refused field per route of every router (its schema's or one its route checks)."""
    who = {"user": api.user("alice"), "admin": api.admin, "pilot": api.pilot("node-a"), "peer": PEER}
    wrong = []
    for role, method, path, kwargs, loc in INVALID:
        answer = api.client.request(method, path, headers=who[role], **kwargs)
        named = [e["loc"] for e in answer.json()["detail"]] if answer.status_code == 422 else None
        if named != [loc]:
            wrong.append(f"{method} {path}: {answer.status_code} {answer.text}")
    assert not wrong, "\n".join(wrong)


def test_a_body_that_is_not_json_is_refused_as_a_client_error(api: Api) -> None:
    answer = api.client.post(
        "/jobs", content=b"{not json", headers={**api.user("alice"), "Content-Type": "application/json"}
    )
    assert 400 <= answer.status_code < 500 and answer.json()["detail"], answer.text
