"""Submissions stored exactly once: an Idempotency-Key makes a retried POST /jobs, /jobs/batch or
/bags answer the first ids (also across a kill -9 of the manager), a 503 either stored nothing or
names the ids it will be stored under, and `isthmus submit` retries an answer it lost."""

from __future__ import annotations

import contextlib
import os
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from livekit import LiveServer, bag_env, wait_for


def _post(live: LiveServer, path: str, body: object, key: str | bytes | None, timeout: float = 30.0) -> httpx.Response:
    headers: dict[str, str | bytes] = {"Authorization": f"Bearer {live.admin_token}"}
    if key is not None:
        headers["Idempotency-Key"] = key
    return httpx.post(live.url + path, json=body, headers=headers, timeout=timeout)


def _job_ids(live: LiveServer) -> list[int]:
    with live.client() as c:
        return sorted(j["id"] for j in c.jobs(all_=True))


def test_a_retried_submission_answers_the_first_ids_and_stores_once(live: LiveServer) -> None:
    job = {"command": "true"}
    first = _post(live, "/jobs", job, "job-key")
    again = _post(live, "/jobs", job, "job-key")
    assert first.status_code == again.status_code == 201
    assert first.json() == again.json()
    batch = [{"command": "true"}, {"command": "sleep", "args": ["0"]}]
    b1 = _post(live, "/jobs/batch", batch, "batch-key")
    b2 = _post(live, "/jobs/batch", batch, "batch-key")
    assert b1.status_code == b2.status_code == 201
    assert b1.json() == b2.json() and len(b1.json()) == 2
    assert _job_ids(live) == sorted([first.json()["id"], *(r["id"] for r in b1.json())])
    plain = _post(live, "/jobs", job, None)  # without a key, each request is a new submission
    assert _post(live, "/jobs", job, None).json()["id"] != plain.json()["id"]
    assert len(_job_ids(live)) == 5


def test_a_key_reused_for_another_body_or_route_is_refused(live: LiveServer) -> None:
    assert _post(live, "/jobs", {"command": "true"}, "k").status_code == 201
    other = _post(live, "/jobs", {"command": "false"}, "k")
    assert other.status_code == 422 and other.json()["detail"][0]["loc"] == ["header", "Idempotency-Key"]
    other_route = _post(live, "/jobs/batch", [{"command": "true"}], "k")
    assert other_route.status_code == 422 and other_route.json()["detail"][0]["loc"] == ["header", "Idempotency-Key"]
    assert len(_job_ids(live)) == 1


@pytest.mark.parametrize("key", ["x" * 256, b"caf\xc3\xa9", ""])
def test_bad_key_values_answer_400_naming_the_header(live: LiveServer, key: str | bytes) -> None:
    r = _post(live, "/jobs", {"command": "true"}, key)
    assert r.status_code == 400 and "Idempotency-Key" in r.json()["detail"]
    assert _job_ids(live) == []


def test_a_retried_bag_answers_its_first_id(tmp_path: Path, db_url: str, tag: str) -> None:
    server = LiveServer(bag_env(tmp_path / "bags.toml"), tmp_path / "state", db_url, tag).start()
    try:
        bag = {"tasks": ["true", "true"]}
        first = _post(server, "/bags", bag, "bag-key")
        again = _post(server, "/bags", bag, "bag-key")
        assert first.status_code == again.status_code == 201 and first.json() == again.json()
        other = _post(server, "/bags", {"tasks": ["true"]}, "bag-key")
        assert other.status_code == 422 and other.json()["detail"][0]["loc"] == ["header", "Idempotency-Key"]
        assert _job_ids(server) == [first.json()["id"]]
    finally:
        server.stop()


def test_the_key_survives_a_kill_of_the_manager(live: LiveServer) -> None:
    first = _post(live, "/jobs", {"command": "true"}, "survivor")
    assert first.status_code == 201
    live.kill()  # SIGKILL between the answer and the retry
    live.start()
    again = _post(live, "/jobs", {"command": "true"}, "survivor")
    assert again.status_code == 201 and again.json() == first.json()
    assert _job_ids(live) == [first.json()["id"]]


def test_a_503_stores_nothing_or_names_the_ids_it_stores(live: LiveServer) -> None:
    if not live.db_url.startswith("sqlite"):
        pytest.skip("the write refusal is made with an SQLite lock held by the test")
    lock = sqlite3.connect(live.db_url.removeprefix("sqlite:///"), timeout=10, isolation_level=None)
    lock.execute("BEGIN EXCLUSIVE")  # every write of the manager now fails
    answers: dict[str, httpx.Response] = {}
    try:
        # accepted before any write failed: kept in memory, its commit cannot be written in time
        answers["early"] = _post(live, "/jobs", {"command": "true"}, "early", timeout=60)
        for key in ("later-1", "later-2"):  # the manager knows it cannot write: refused at once
            answers[key] = _post(live, "/jobs", {"command": "true", "name": key}, key, timeout=60)
    finally:
        lock.execute("ROLLBACK")
        lock.close()
    assert all(r.status_code == 503 for r in answers.values()), {k: r.text for k, r in answers.items()}
    promised = answers["early"].json()["ids"]
    assert len(promised) == 1 and str(promised[0]) in answers["early"].json()["detail"]
    assert all("ids" not in answers[k].json() for k in ("later-1", "later-2"))
    wait_for(lambda: httpx.get(live.url + "/health").status_code == 200, timeout=30, what="/health 200")
    wait_for(lambda: _job_ids(live) == promised, timeout=10, what=f"only jobs {promised} stored")
    # retried with their keys: the early one answers the id it was stored under, the others store once
    again = _post(live, "/jobs", {"command": "true"}, "early")
    assert again.status_code == 201 and again.json() == {"id": promised[0]}
    later = [_post(live, "/jobs", {"command": "true", "name": k}, k).json()["id"] for k in ("later-1", "later-2")]
    assert [
        _post(live, "/jobs", {"command": "true", "name": k}, k).json()["id"] for k in ("later-1", "later-2")
    ] == later
    assert _job_ids(live) == sorted([promised[0], *later])


@pytest.fixture
def dropping_proxy(live: LiveServer) -> Iterator[tuple[str, list[int]]]:
    """A TCP proxy to `live` that lets the manager answer the first connection's request and then
    closes that connection without passing the answer on; later connections pass both ways.
    Yields its URL and the list of connections it accepted (their count)."""
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    accepted: list[int] = []

    def pipe(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            return
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def handle(client: socket.socket, n: int) -> None:
        upstream = socket.create_connection(("127.0.0.1", live.port))
        if n > 1:
            threading.Thread(target=pipe, args=(client, upstream), daemon=True).start()
            pipe(upstream, client)
            return
        threading.Thread(target=pipe, args=(client, upstream), daemon=True).start()
        upstream.recv(65536)  # the manager answered (the job is stored) ...
        client.close()  # ... and the client never hears it
        upstream.close()

    def serve() -> None:
        while True:
            try:
                client, _ = server.accept()
            except OSError:
                return
            accepted.append(1)
            threading.Thread(target=handle, args=(client, len(accepted)), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    yield f"http://127.0.0.1:{port}", accepted
    server.close()


def test_isthmus_submit_retries_a_lost_answer_and_stores_once(
    live: LiveServer, dropping_proxy: tuple[str, list[int]], tmp_path: Path
) -> None:
    url, accepted = dropping_proxy
    env = {**os.environ, "ISTHMUS_URL": url, "ISTHMUS_TOKEN": live.admin_token}
    r = subprocess.run(
        [sys.executable, "-m", "isthmus.cli.live_entry", "submit", "--json", "true"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert r.returncode == 0, r.stderr
    assert len(accepted) >= 2  # the first answer was lost: it was sent again
    assert _job_ids(live) == [int(r.stdout.split('"id": ')[1].split("}")[0])]


def test_isthmus_submit_waits_for_a_restarted_manager(live: LiveServer, tmp_path: Path) -> None:
    live.kill()
    env = {**os.environ, "ISTHMUS_URL": live.url, "ISTHMUS_TOKEN": live.admin_token}
    proc = subprocess.Popen(
        [sys.executable, "-m", "isthmus.cli.live_entry", "submit", "--json", "true"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(1.0)  # its first tries find no manager
    live.start()
    out, err = proc.communicate(timeout=90)
    assert proc.returncode == 0, err
    assert len(_job_ids(live)) == 1
    assert str(_job_ids(live)[0]) in out
