"""Hostile input to the peer protocol's routes (isthmus.server.routers.peers): every request must
name a configured peer and carry the secret shared with it; malformed bodies get a 422 naming
the field; a chain that loops, does not end with its sender or is longer than max_hops is
refused; a repeated submitJob is answered with the same id; the secrets never show."""

from __future__ import annotations

import contextlib
import http.server
import os
import signal
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from livekit import LiveServer, tagged_pids, wait_for, wait_state, write_env
from peerkit import Federation

JOB = {"command": "sleep", "args": ["30"], "size": 1}


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Federation]:
    """Managers A and B, peers of each other (the secret of the pair given by environment
    variable, to cover token_env)."""
    tag = uuid.uuid4().hex
    fed = Federation(tmp_path_factory.mktemp("peers"), tag, ("A", "B"), nodes=(1, 1), env_secret_pairs=[("A", "B")])
    try:
        yield fed.start()
    finally:
        fed.stop()
        for pid in tagged_pids(tag):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


def call(
    fed: Federation,
    path: str,
    body: Any = None,
    *,
    peer: str | None = "A",
    secret: str | None = None,
    method: str = "POST",
    content: str | None = None,
) -> httpx.Response:
    """A request to B's `path` as peer `peer` with `secret` (default: the A-B secret)."""
    headers = {}
    if peer is not None:
        headers["X-Isthmus-Peer"] = peer
    token = fed.secrets[("A", "B")] if secret is None else secret
    if token:
        headers["Authorization"] = f"Bearer {token}"
    if content is not None:
        headers["Content-Type"] = "application/json"
        return httpx.request(method, fed["B"].url + path, content=content, headers=headers, timeout=10)
    return httpx.request(method, fed["B"].url + path, json=body, headers=headers, timeout=10)


def submit_body(origin: int, chain: list[str] | None = None, **changes: Any) -> dict[str, Any]:
    body = {
        "origin_id": origin,
        "sender_id": origin,
        "chain": chain if chain is not None else ["A"],
        "user": "alice",
        "submit_time": time.time(),
        "job": JOB,
    }
    body.update(changes)
    return body


def test_requests_without_the_peers_secret_are_refused(pair: Federation) -> None:
    assert call(pair, "/peer/resources", method="GET", peer=None).status_code == 401
    assert call(pair, "/peer/resources", method="GET", secret="").status_code == 401
    assert call(pair, "/peer/resources", method="GET", secret="wrong").status_code == 401
    r = call(pair, "/peer/resources", method="GET", peer="Z")  # the right secret, an unknown peer
    assert r.status_code == 401 and "unknown peer or wrong secret" in r.json()["detail"]
    # a user token (B's admin) is not a peer secret, and a peer secret is not a user token
    assert call(pair, "/peer/resources", method="GET", secret=pair["B"].admin_token).status_code == 401
    r = httpx.get(pair["B"].url + "/jobs", headers={"Authorization": f"Bearer {pair.secrets[('A', 'B')]}"})
    assert r.status_code == 401
    r = call(pair, "/peer/jobs", submit_body(900), secret="wrong")
    assert r.status_code == 401
    ok = call(pair, "/peer/resources", method="GET")
    assert ok.status_code == 200 and ok.json()["manager"] == "B"


@pytest.mark.parametrize(
    ("chain", "status", "words"),
    [
        ([], 422, "at least 1 item"),
        (["A", "A"], 422, "forwarding loop"),
        (["B", "A"], 409, "forwarding loop"),  # the job already visited B
        (["X"], 422, "must end with the sender"),
        (["C", "A"], 409, "at most 1"),  # longer than B's max_hops
        (["A b"], 422, "pattern"),
        (["A"] * 17, 422, "at most 16"),
    ],
)
def test_malformed_and_looping_chains_are_refused(pair: Federation, chain: list[str], status: int, words: str) -> None:
    body = submit_body(700, chain)
    if len(chain) > 1:
        body["sender_id"] = 701
    r = call(pair, "/peer/jobs", body)
    assert r.status_code == status, r.text
    assert words in r.text


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"sender_id": 5}, "sender_id equal to origin_id"),
        ({"origin_id": 0, "sender_id": 0}, "origin_id"),
        ({"origin_id": "7", "sender_id": "7"}, "origin_id"),
        ({"user": "al ice"}, "user"),
        ({"user": "a" * 65}, "user"),
        ({"surprise": 1}, "surprise"),
        ({"job": {**JOB, "command": "sl\u0000eep"}}, "command"),
        ({"job": {**JOB, "size": 0}}, "size"),
        ({"job": {**JOB, "env": {"ISTHMUS_TAG": "x"}}}, "ISTHMUS_"),
        ({"submit_time": -1}, "submit_time"),
    ],
)
def test_malformed_submit_job_fields_get_422_naming_them(pair: Federation, change: dict[str, Any], field: str) -> None:
    r = call(pair, "/peer/jobs", submit_body(800, **change))
    assert r.status_code == 422, r.text
    assert field in r.text


def test_non_finite_numbers_and_broken_json_are_refused(pair: Federation) -> None:
    body = '{"manager": "A", "time": NaN}'
    assert call(pair, "/peer/heartbeat", content=body).status_code == 422
    assert call(pair, "/peer/heartbeat", content='{"manager": "A", ').status_code == 422
    assert call(pair, "/peer/heartbeat", {"manager": "Z", "time": 1.0}).status_code == 422  # not the sender
    r = call(
        pair, "/peer/resources", {"manager": "Z", "time": 1.0, "queued_jobs": 0, "queued_processors": 0, "sites": []}
    )
    assert r.status_code == 422
    bad_site = {
        "name": "c",
        "is_cloud": False,
        "available": True,
        "processors": -1,
        "max_processors": 1,
        "idle": 0,
        "busy": 0,
        "queued_jobs": 0,
        "queued_processors": 0,
    }
    body2 = {"manager": "A", "time": 1.0, "queued_jobs": 0, "queued_processors": 0, "sites": [bad_site]}
    assert call(pair, "/peer/resources", body2).status_code == 422


def test_open_conn_without_a_common_job_description_is_refused(pair: Federation) -> None:
    body = {"manager": "A", "role": "both", "heartbeat": 0.5, "job_description": ["jsdl/1.0"]}
    r = call(pair, "/peer/open", body)
    assert r.status_code == 409 and "no common job description" in r.json()["detail"]
    r = call(pair, "/peer/open", {**body, "role": "overlord"})
    assert r.status_code == 422


def test_too_large_job_is_refused_and_repeated_submit_answers_the_same_id(pair: Federation) -> None:
    r = call(pair, "/peer/jobs", submit_body(600, job={**JOB, "size": 64}))
    assert r.status_code == 409 and "no site here can run 64 processors" in r.json()["detail"]
    first = call(pair, "/peer/jobs", submit_body(601))
    again = call(pair, "/peer/jobs", submit_body(601))
    assert first.status_code == 201 and again.status_code == 201
    local = first.json()["id"]
    assert again.json()["id"] == local
    with pair["B"].client() as b:
        assert [j["id"] for j in b.jobs(all_=True) if j["user"] == "alice@A"] == [local]
        wait_state(b, local, ("running",), 20)
    # queryJob and cancelJob by the sender's id; one the sender never sent answers 404
    q = call(pair, "/peer/jobs/query", {"sender_id": 601})
    assert q.status_code == 200 and q.json()["state"] == "running" and q.json()["where"] == "B/c1"
    unknown = call(pair, "/peer/jobs/query", {"sender_id": 999999})
    assert unknown.status_code == 404 and unknown.json()["detail"] == "A sent no job 999999 here"
    c = call(pair, "/peer/jobs/cancel", {"sender_id": 601})
    assert c.status_code == 200 and c.json()["state"] == "cancelled"
    # a notifyJob about a job B never forwarded to A
    note = {"job_id": 5, "remote_id": 6, "origin": "B", "origin_id": 5, "state": "completed", "time": 1.0}
    assert call(pair, "/peer/jobs/notify", note).status_code == 404
    assert call(pair, "/peer/jobs/notify", {**note, "state": "exploded"}).status_code == 422


def test_the_shared_secret_is_never_shown_logged_or_stored(pair: Federation) -> None:
    secret = pair.secrets[("A", "B")]
    for name in ("A", "B"):
        with pair[name].client() as c:
            assert secret not in str(c.peers())
        state = pair[name].state_dir
        for path in [*state.parent.rglob("*.log"), *state.parent.rglob("isthmus.db*")]:
            assert secret.encode() not in path.read_bytes(), path
    assert secret not in httpx.get(pair["B"].url + "/openapi.json").text


def test_a_manager_without_peers_answers_404_on_peer_routes(tmp_path: Path, tag: str) -> None:
    server = LiveServer(write_env(tmp_path / "env.toml"), tmp_path / "state", f"sqlite:///{tmp_path / 'db'}", tag)
    server.start()
    try:
        r = httpx.post(
            server.url + "/peer/heartbeat",
            json={"manager": "A", "time": 1.0},
            headers={"X-Isthmus-Peer": "A", "Authorization": "Bearer x"},
        )
        assert r.status_code == 404 and "no peers" in r.json()["detail"]
        with server.client() as c:
            assert c.peers() == []
    finally:
        server.stop()


def test_a_peer_secret_variable_unset_stops_the_server_naming_it(tmp_path: Path, tag: str) -> None:
    fed = Federation(tmp_path, tag, ("A", "B"), env_secret_pairs=[("A", "B")])
    os.environ.pop("ISTHMUS_TEST_PEER_A_B", None)
    with pytest.raises(RuntimeError, match=r"environment variable ISTHMUS_TEST_PEER_A_B .* is unset"):
        fed["A"].start()


LIAR_ENV = """
name = "A"
round_interval = "event"
[[sites]]
name = "c1"
nodes = 1
cores_per_node = 1
[policies]
selection = "lowest-qlen"
[federation]
heartbeat = 0.3
[[peers]]
name = "S"
address = "http://127.0.0.1:{port}"
token_file = "{secret}"
"""


@pytest.mark.parametrize(
    ("answer", "error"),
    [
        ('{"manager": "S", "role": "both", "heartbeat": 0, "job_description": "isthmus-submit/1"}', "malformed answer"),
        ("not json at all", "malformed answer"),
        ('{"manager": "T", "role": "both", "heartbeat": 1, "job_description": "isthmus-submit/1"}', "answers as 'T'"),
    ],
)
def test_a_peer_answering_nonsense_stays_down_and_is_asked_again(
    tmp_path: Path, tag: str, answer: str, error: str
) -> None:
    requests: list[str] = []

    class Liar(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            requests.append(self.path)
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            body = answer.encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    liar = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Liar)
    thread = threading.Thread(target=liar.serve_forever, daemon=True)
    thread.start()
    secret = tmp_path / "secret"
    secret.write_text("s3cret-of-a-and-s\n")
    env = tmp_path / "A.toml"
    env.write_text(LIAR_ENV.format(port=liar.server_address[1], secret=secret))
    server = LiveServer(env, tmp_path / "state", f"sqlite:///{tmp_path / 'a.db'}", tag).start()
    try:
        # A keeps asking (its connection loop survives every answer) and never counts S as up
        wait_for(lambda: requests.count("/peer/open") >= 3, 15, 0.1, "three openConn to S")
        with server.client() as a:
            peer = a.peers()[0]
            assert peer["up"] is False and error in peer["error"], peer
            jid = a.submit(command="true", size=1)
            assert wait_state(a, jid, ("completed",), 20)["forwarded"] is None
    finally:
        server.stop()
        liar.shutdown()
        thread.join()
