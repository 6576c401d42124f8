"""Hostile or careless requests get a 4xx naming the field, and nothing of them is stored.

Raw JSON bodies (httpx would refuse to encode NaN or a lone surrogate itself) against a real
manager, on SQLite and PostgreSQL (which refuses null bytes in text: they must never get that far).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from livekit import LiveServer, wait_state, write_env

from isthmus.live.manager import ManagerConfig


def _post(live: LiveServer, path: str, raw: bytes | str, token: str | None = None) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token or live.admin_token}", "Content-Type": "application/json"}
    return httpx.post(live.url + path, content=raw.encode() if isinstance(raw, str) else raw, headers=headers)


def _fields(r: httpx.Response) -> list[list[object]]:
    assert r.status_code == 422, r.text
    return [e["loc"] for e in r.json()["detail"]]


# (raw JSON of a job, the location the 422 must name)
POISON = [
    ('{"command": "sleep", "requested_runtime": NaN}', ["body", "requested_runtime"]),
    ('{"command": "sleep", "requested_runtime": Infinity}', ["body", "requested_runtime"]),
    ('{"command": "sleep", "requested_runtime": -Infinity}', ["body", "requested_runtime"]),
    ('{"command": "sleep", "requested_runtime": -5}', ["body", "requested_runtime"]),
    ('{"command": "sleep", "requested_runtime": 1e300}', ["body", "requested_runtime"]),
    ('{"command": "sleep", "size": 18446744073709551616}', ["body", "size"]),
    ('{"command": "sleep", "size": true}', ["body", "size"]),
    ('{"command": "\\ud800"}', ["body", "command"]),
    ('{"command": "sleep", "args": ["1", "\\udfff"]}', ["body", "args", 1]),
    ('{"command": "sleep", "env": {"A": "\\ud800x"}}', ["body", "env", "A"]),
    ('{"command": "sleep", "name": "a\\udc00"}', ["body", "name"]),
    ('{"command": "sleep", "cwd": "/tmp/\\ud800"}', ["body", "cwd"]),
    ('{"command": "sleep", "vm": {"image": "\\ud800"}}', ["body", "vm", "image"]),
    ('{"command": "sle\\u0000ep"}', ["body", "command"]),
    ('{"command": "sleep", "args": ["\\u0000"]}', ["body", "args", 0]),
    ('{"command": "sleep", "env": {"A": "x\\u0000y"}}', ["body", "env", "A"]),
    ('{"command": "sleep", "env": {"A\\u0000B": "x"}}', ["body", "env"]),
    ('{"command": "sleep", "env": {"A\\n": "x"}}', ["body", "env"]),
    ('{"command": "sleep", "cwd": "/tmp\\u0000"}', ["body", "cwd"]),
    ('{"command": "sleep", "colour": "red"}', ["body", "colour"]),
]


@pytest.mark.parametrize(("raw", "loc"), POISON, ids=[str(i) for i in range(len(POISON))])
def test_poison_job_is_refused_naming_the_field(raw: str, loc: list[object], live_sqlite: LiveServer) -> None:
    assert json.loads(raw) is not None  # Python's json reads it (NaN, lone surrogates): only the API refuses it
    assert loc in _fields(_post(live_sqlite, "/jobs", raw))
    batch = _post(live_sqlite, "/jobs/batch", f'[{{"command": "true"}}, {raw}]')
    assert [1, *loc[1:]] in [f[1:] for f in _fields(batch)]


@pytest.fixture
def live_sqlite(tmp_path: Path, tag: str) -> Iterator[LiveServer]:
    """One manager on SQLite (the parametrised poison cases need no PostgreSQL run each)."""
    server = LiveServer(write_env(tmp_path / "env.toml"), tmp_path / "state", f"sqlite:///{tmp_path / 'db'}", tag)
    server.start()
    yield server
    server.stop()


def test_all_poison_leaves_nothing_stored_and_the_manager_healthy(live: LiveServer) -> None:
    for raw, _ in POISON:
        assert _post(live, "/jobs", raw).status_code == 422, raw
        assert _post(live, "/jobs/batch", f'[{{"command": "true"}}, {raw}]').status_code == 422, raw
    c = live.client()
    assert c.jobs(all_=True) == []  # not even the valid first job of each batch
    job = c.submit(command="sh", args=["-c", "echo fine"])
    wait_state(c, job, ("completed",))
    assert c.output(job)[0] == "fine\n"
    assert httpx.get(live.url + "/jobs", params={"all": "true"}, headers=c.http.headers).status_code == 200


@pytest.mark.parametrize(
    ("path", "field"),
    [
        ("/jobs/18446744073709551616", "job_id"),
        ("/jobs/9223372036854775808", "job_id"),
        ("/jobs/-1", "job_id"),
        ("/jobs/0", "job_id"),
        ("/jobs/1/output?offset=-1", "offset"),
        ("/jobs/1/output?run=18446744073709551616", "run"),
        ("/events?since=18446744073709551616", "since"),
        ("/jobs?state=bogus", "state"),
        ("/jobs/%0B2", "job_id"),  # lax integer parsing would strip the vertical tab
        ("/jobs/%202", "job_id"),
        ("/jobs/+2", "job_id"),
        ("/jobs/1/output?offset=%091", "offset"),
        ("/jobs?limit=1_0", "limit"),
    ],
)
def test_out_of_range_ids_and_parameters_get_422(path: str, field: str, live_sqlite: LiveServer) -> None:
    r = httpx.get(live_sqlite.url + path, headers={"Authorization": f"Bearer {live_sqlite.admin_token}"})
    assert r.status_code == 422, r.text
    assert any(field in e["loc"] for e in r.json()["detail"]), r.text


def test_largest_id_is_a_plain_404(live_sqlite: LiveServer) -> None:
    r = httpx.get(
        live_sqlite.url + "/jobs/9223372036854775807", headers={"Authorization": f"Bearer {live_sqlite.admin_token}"}
    )
    assert r.status_code == 404 and r.json() == {"detail": "no job 9223372036854775807"}


# ---------------------------------------------------------------------------------- limits


@pytest.fixture
def small_limits(tmp_path: Path, tag: str) -> Iterator[LiveServer]:
    """A manager with a 4 KiB body limit and at most 5 jobs per batch."""
    server = LiveServer(write_env(tmp_path / "env.toml"), tmp_path / "state", f"sqlite:///{tmp_path / 'db'}", tag)
    server.args += ["--max-body-bytes", "4096", "--max-batch-jobs", "5"]
    server.start()
    yield server
    server.stop()


def test_body_over_the_limit_gets_413_declared_or_streamed(small_limits: LiveServer) -> None:
    live = small_limits
    headers = {"Authorization": f"Bearer {live.admin_token}", "Content-Type": "application/json"}
    big = json.dumps({"command": "true", "args": ["x" * 5000]}).encode()
    r = httpx.post(live.url + "/jobs", content=big, headers=headers)
    assert r.status_code == 413 and "limit is 4096 bytes" in r.json()["detail"]

    def chunks() -> Iterator[bytes]:  # no Content-Length: chunked transfer encoding
        for i in range(0, len(big), 1000):
            yield big[i : i + 1000]

    r = httpx.post(live.url + "/jobs", content=chunks(), headers=headers)
    assert r.status_code == 413, r.text
    # unauthenticated senders are refused the same way, before anything else is looked at
    assert httpx.post(live.url + "/jobs", content=big).status_code == 413
    # just under the limit is fine
    ok = json.dumps({"command": "true", "args": ["x" * 3900]}).encode()
    assert len(ok) <= 4096
    assert httpx.post(live.url + "/jobs", content=ok, headers=headers).status_code == 201
    assert len(live.client().jobs(all_=True)) == 1


def test_batch_over_the_limit_gets_413_and_stores_nothing(small_limits: LiveServer) -> None:
    c = small_limits.client()
    headers = {"Authorization": f"Bearer {small_limits.admin_token}"}
    r = httpx.post(small_limits.url + "/jobs/batch", json=[{"command": "true"}] * 6, headers=headers)
    assert r.status_code == 413 and "batch of 6 jobs is too large: at most 5" in r.json()["detail"]
    assert c.jobs(all_=True) == []
    r = httpx.post(small_limits.url + "/jobs/batch", json=[{"command": "true"}] * 5, headers=headers)
    assert r.status_code == 201 and len(r.json()) == 5
    assert r.json() == [{"id": i} for i in range(1, 6)]


def test_default_limits_let_a_full_batch_of_ordinary_jobs_through() -> None:
    """10,000 jobs of a realistic size (command, a few arguments, environment, name) fit the default body limit."""
    job = {
        "command": "/home/someuser/experiments/bin/simulate",
        "args": ["--input", "/home/someuser/experiments/data/case-00001.h5", "--steps", "100000", "--seed", "12345"],
        "size": 4,
        "requested_runtime": 3600.0,
        "priority": "high",
        "env": {"OMP_NUM_THREADS": "4", "EXPERIMENT": "sweep-2026-11"},
        "name": "simulate-case-00001",
    }
    cfg = ManagerConfig.__dataclass_fields__
    body = json.dumps([job] * cfg["max_batch_jobs"].default).encode()
    assert len(body) < cfg["max_body_bytes"].default, len(body)


def test_another_users_job_is_indistinguishable_from_a_missing_one(live_sqlite: LiveServer) -> None:
    admin = live_sqlite.client()
    alice = live_sqlite.client(admin.create_token("alice")["token"])
    bob_token = admin.create_token("bob")["token"]
    job = alice.submit(command="true")
    headers = {"Authorization": f"Bearer {bob_token}"}
    for path in (f"/jobs/{job}", f"/jobs/{job}/output"):
        theirs = httpx.get(live_sqlite.url + path, headers=headers)
        missing = httpx.get(live_sqlite.url + path.replace(str(job), str(job + 1000)), headers=headers)
        assert (theirs.status_code, missing.status_code) == (404, 404)
        assert theirs.json()["detail"] == f"no job {job}" and missing.json()["detail"] == f"no job {job + 1000}"
    assert httpx.post(f"{live_sqlite.url}/jobs/{job}/cancel", headers=headers).status_code == 404
