"""Live peer managers (Villegas dissertation ch. 4, Table 4.1; docs/federation.md):
three `isthmus server`s on loopback, each with its own environment file, sites, SQLite database
and port, connected as peers. A job submitted to one runs on another by the forwarding policy,
is queried and cancelled from its origin, and survives kill -9 and restart of the manager it runs
at and of its origin: neither lost nor run twice. A peer that stops answering heartbeats is down
and gets no jobs."""

from __future__ import annotations

import contextlib
import json
import signal
import socket
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from livekit import LiveServer, wait_for, wait_state
from peerkit import Federation, federation
from typer.testing import CliRunner

from isthmus.cli.main import app
from isthmus.live.client import ApiError

TERMINAL = ("completed", "failed", "cancelled", "rejected", "lost", "timeout")


def jobs_of(server: LiveServer) -> list[dict[str, Any]]:
    with server.client() as c:
        return c.jobs(all_=True)


def marked(tmp: Path, name: str, seconds: float) -> dict[str, Any]:
    """A job that appends a line to file `name` when it starts, then sleeps (counts its runs)."""
    path = tmp / name
    return {"command": "sh", "args": ["-c", f"echo run >> {path}; sleep {seconds}"], "size": 2}


def runs(tmp: Path, name: str) -> int:
    path = tmp / name
    return len(path.read_text().splitlines()) if path.exists() else 0


def received_from(server: LiveServer, origin: str) -> list[dict[str, Any]]:
    return [j for j in jobs_of(server) if j["user"].endswith("@" + origin)]


def test_lowest_qlen_forwards_a_job_no_local_site_can_run_and_the_origin_follows_it(tmp_path: Path, tag: str) -> None:
    # A has one 1-core node: a 2-processor job cannot run there; B and C both have an empty
    # queue: LowestQlen breaks the tie by configured order (B first)
    with federation(tmp_path, tag, selection="lowest-qlen") as fed:
        with fed["A"].client() as a:
            jid = a.submit(command="sleep", args=["0.5"], size=2)
            done = wait_state(a, jid, TERMINAL, 30)
        assert done["state"] == "completed"
        assert done["forwarded"]["peer"] == "B" and done["forwarded"]["where"] == "B/c1"
        assert done["forwarded"]["chain"] == ["A"] and done["forwarded"]["open"] is False
        states = [h["state"] for h in done["history"]]
        assert states[:2] == ["queued", "forwarded"] and states[-1] == "completed"
        assert "forwarded to peer B (by lowest-qlen)" in [h["detail"] for h in done["history"]]
        at_b = received_from(fed["B"], "A")
        assert [(j["state"], j["user"]) for j in at_b] == [("completed", "admin@A")]
        assert at_b[0]["id"] == done["forwarded"]["remote_id"]
        with fed["B"].client() as b:
            shown = b.job(at_b[0]["id"])
        assert shown["received"] == {"origin": "A", "origin_id": jid, "sender": "A", "chain": ["A"]}
        assert received_from(fed["C"], "A") == []
        # A's API accepts sizes no site of A has (a peer may run them): its OpenAPI says so
        schema = httpx.get(fed["A"].url + "/openapi.json").json()["components"]["schemas"]
        assert schema["SubmitRequest"]["properties"]["size"]["maximum"] == 1_000_000
        # `isthmus peers --json` through the CLI: both peers up, with their resource data
        token = fed["A"].admin_token
        out = CliRunner().invoke(app, ["peers", "--json", "--url", fed["A"].url, "--token", token])
        assert out.exit_code == 0, out.output
        peers = json.loads(out.stdout)
        assert [(p["name"], p["role"], p["up"]) for p in peers] == [("B", "both", True), ("C", "both", True)]
        assert [s["name"] for s in peers[0]["resources"]["sites"]] == ["c1"]
        assert peers[0]["resources"]["sites"][0]["max_processors"] == 2
        table = CliRunner().invoke(app, ["peers", "--url", fed["A"].url, "--token", token]).stdout
        assert table.splitlines()[0].split()[:3] == ["PEER", "ROLE", "STATE"]
        assert "B" in table and "up" in table


def test_round_robin_sends_jobs_in_turn_to_each_peer(tmp_path: Path, tag: str) -> None:
    # RoundRobin passes over A (no site can take 2 processors): B, then C, then B
    with federation(tmp_path, tag, selection="round-robin") as fed:
        with fed["A"].client() as a:
            ids = a.submit_many([{"command": "sleep", "args": ["0.3"], "size": 2} for _ in range(3)])
            ended = [wait_state(a, j, TERMINAL, 30) for j in ids]
        assert [j["state"] for j in ended] == ["completed"] * 3
        assert [j["forwarded"]["peer"] for j in ended] == ["B", "C", "B"]
        assert len(received_from(fed["B"], "A")) == 2 and len(received_from(fed["C"], "A")) == 1


def test_a_job_is_queried_and_cancelled_from_its_origin(tmp_path: Path, tag: str) -> None:
    with federation(tmp_path, tag, selection="lowest-qlen") as fed:
        with fed["A"].client() as a:
            jid = a.submit(command="sleep", args=["60"], size=2)
            running = wait_state(a, jid, ("running",), 30)  # GET /jobs/{id} asks B (queryJob)
            assert running["forwarded"]["where"] == "B/c1"

            def b_busy() -> dict[str, Any] | None:
                data = {p["name"]: p for p in a.peers()}["B"]["resources"]
                return data if data["sites"][0]["idle"] == 0 and data["sites"][0]["busy"] == 2 else None

            # B pushed its changed resource data (sendResourceData) at the end of the round that
            # started the job, well before A's next pull (every 10 heartbeats: 5 s)
            wait_for(b_busy, 1.5, 0.05, "B's push showing its 2 processors busy")
            remote = running["forwarded"]["remote_id"]
            assert a.cancel(jid)["state"] == "cancelled"
            assert a.job(jid)["state"] == "cancelled"
        with fed["B"].client() as b:
            assert wait_state(b, remote, ("cancelled",), 10)["state"] == "cancelled"
        with fed["A"].client() as a:
            shown = a.job(jid)
        assert shown["forwarded"]["open"] is False and shown["forwarded"]["state"] == "cancelled"


def test_receiving_manager_killed_and_restarted_the_job_runs_once_and_a_down_peer_gets_no_jobs(
    tmp_path: Path, tag: str
) -> None:
    with federation(tmp_path, tag, selection="lowest-qlen") as fed:
        with fed["A"].client() as a:
            jid = a.submit(**marked(tmp_path, "runs-1", 4))
            wait_state(a, jid, ("running",), 30)
        fed["B"].kill(signal.SIGKILL)  # the manager only: its pilot keeps running the job
        # B misses its heartbeats: A marks it down, and the next job goes to C
        wait_for(lambda: not {p["name"]: p for p in fed["A"].client().peers()}["B"]["up"], 10, 0.1, "B down at A")
        with fed["A"].client() as a:
            other = a.submit(command="sleep", args=["0.2"], size=2)
            assert wait_state(a, other, TERMINAL, 30)["forwarded"]["peer"] == "C"
        fed["B"].start()
        fed.wait_connected("A")
        with fed["A"].client() as a:
            done = wait_state(a, jid, TERMINAL, 40)
        assert done["state"] == "completed" and done["forwarded"]["peer"] == "B"
        assert runs(tmp_path, "runs-1") == 1
        at_b = received_from(fed["B"], "A")
        assert [j["state"] for j in at_b] == ["completed"] and at_b[0]["restarts"] == 0
        assert [j["forwarded"] for j in jobs_of(fed["A"]) if j["id"] == jid] == [None]  # list view: no history
        assert all(j["site"] is None for j in jobs_of(fed["A"]))  # nothing ran at A


def test_origin_killed_and_restarted_learns_the_end_it_missed(tmp_path: Path, tag: str) -> None:
    with federation(tmp_path, tag, selection="lowest-qlen") as fed:
        with fed["A"].client() as a:
            jid = a.submit(**marked(tmp_path, "runs-2", 1.5))
            wait_state(a, jid, ("running",), 30)
        fed["A"].kill(signal.SIGKILL)
        # the job ends at B while its origin is down (B's notifyJob cannot reach A)
        wait_for(lambda: [j["state"] for j in received_from(fed["B"], "A")] == ["completed"], 20, 0.1, "end at B")
        time.sleep(0.5)
        fed["A"].start()
        with fed["A"].client() as a:
            done = wait_state(a, jid, TERMINAL, 30)  # reconciled: queryJob when B is up again
        assert done["state"] == "completed" and done["forwarded"]["open"] is False
        assert runs(tmp_path, "runs-2") == 1
        assert len(received_from(fed["B"], "A")) == 1 and received_from(fed["C"], "A") == []
        # nothing was queued again at A: one forwarded record, no run there
        assert done["site"] is None and done["restarts"] == 0


def test_a_job_forwarded_before_the_origin_died_is_not_sent_twice(tmp_path: Path, tag: str) -> None:
    # kill the origin right after the forward and restart it: the job is either at B once
    # (a repeated submitJob answers the same id) or still to be sent; never run at A, never twice
    with federation(tmp_path, tag, selection="lowest-qlen") as fed:
        with fed["A"].client() as a:
            jid = a.submit(**marked(tmp_path, "runs-3", 0.5))
        fed["A"].kill(signal.SIGKILL)
        fed["A"].start()
        with fed["A"].client() as a:
            done = wait_state(a, jid, TERMINAL, 40)
        assert done["state"] == "completed"
        assert runs(tmp_path, "runs-3") == 1
        assert len(received_from(fed["B"], "A")) + len(received_from(fed["C"], "A")) == 1


def test_origin_restart_reaches_a_peer_that_restarted_too(tmp_path: Path, tag: str) -> None:
    # both A and B die while the job runs at B; both come back: the job completes once
    with federation(tmp_path, tag, selection="lowest-qlen") as fed:
        with fed["A"].client() as a:
            jid = a.submit(**marked(tmp_path, "runs-4", 3))
            wait_state(a, jid, ("running",), 30)
        fed["A"].kill(signal.SIGKILL)
        fed["B"].kill(signal.SIGKILL)
        fed["B"].start()
        fed["A"].start()
        with fed["A"].client() as a:
            done = wait_state(a, jid, TERMINAL, 40)
        assert done["state"] == "completed" and runs(tmp_path, "runs-4") == 1


HUNG_ENV = """
name = "A"
round_interval = "event"
[[sites]]
name = "c1"
nodes = 1
cores_per_node = 1
[policies]
selection = "lowest-qlen"
[federation]
heartbeat = 0.5
timeout = 30
[[peers]]
name = "S"
address = "http://127.0.0.1:{port}"
token_file = "{secret}"
"""


def test_a_peer_that_never_answers_stalls_neither_the_rounds_nor_the_api(tmp_path: Path, tag: str) -> None:
    # S accepts connections and never answers: A's openConn to it waits for its 30 s timeout
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            with contextlib.suppress(OSError):
                held.append(listener.accept()[0])

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    secret = tmp_path / "secret"
    secret.write_text("s3cret-of-a-and-s\n")
    env = tmp_path / "A.toml"
    env.write_text(HUNG_ENV.format(port=listener.getsockname()[1], secret=secret))
    server = LiveServer(env, tmp_path / "state", f"sqlite:///{tmp_path / 'a.db'}", tag).start()
    try:
        wait_for(lambda: held, 10, 0.05, "A's openConn to S")
        with server.client() as a:
            # well within S's 30 s timeout: the job is decided, run and recorded, the API answers
            jid = a.submit(command="true", size=1)
            assert wait_state(a, jid, TERMINAL, 15)["state"] == "completed"
            peers = a.peers()
        assert [(p["name"], p["up"], p["last_heard"]) for p in peers] == [("S", False, None)]
    finally:
        server.stop()
        stop.set()
        thread.join()
        for s in held:
            s.close()
        listener.close()


def test_roles_negotiated_at_open_conn_decide_who_may_forward_to_whom(tmp_path: Path, tag: str) -> None:
    # A's file: B is a provider; B's file: A is a consumer. A forwards to B; B may not forward
    # to A (A provides nothing to B): a job no site of B can run is refused at submission
    roles = {("A", "B"): "provider", ("B", "A"): "consumer"}
    with federation(tmp_path, tag, names=("A", "B"), nodes=(1, 2), roles=roles) as fed:
        with fed["A"].client() as a:
            assert [(p["name"], p["role"]) for p in a.peers()] == [("B", "provider")]
            done = wait_state(a, a.submit(command="true", size=2), TERMINAL, 30)
        assert done["state"] == "completed" and done["forwarded"]["peer"] == "B"
        with fed["B"].client() as b:
            assert [(p["name"], p["role"]) for p in b.peers()] == [("A", "consumer")]
            assert b.peers()[0]["resources"] is None  # a consumer sends B no resource data
            with pytest.raises(ApiError, match="size 3 is larger than any site can offer"):
                b.submit(command="true", size=3)


def test_roles_with_nothing_in_common_keep_the_peer_down(tmp_path: Path, tag: str) -> None:
    # both files say the other is a provider: A asks to consume from B, B allows A only to
    # provide: openConn is refused (409) and each sees the other down, with the reason
    roles = {("A", "B"): "provider", ("B", "A"): "provider"}
    fed = Federation(tmp_path, tag, ("A", "B"), nodes=(1, 1), roles=roles)
    try:
        for s in fed.servers.values():
            s.start()

        def refused() -> dict[str, Any] | None:
            with fed["A"].client() as a:
                p = a.peers()[0]
            return p if "openConn refused (409)" in p["error"] else None

        peer = wait_for(refused, 20, 0.1, "A's openConn refused by B")
        assert peer["up"] is False and "role consumer refused" in peer["error"]
        with fed["A"].client() as a:  # a job no site of A can run is not sent to B: rejected
            big = a.submit(command="true", size=2)
            assert wait_state(a, big, TERMINAL, 30)["state"] == "rejected"
    finally:
        fed.stop()


def test_a_job_forwarded_on_is_followed_along_its_chain(tmp_path: Path, tag: str) -> None:
    # max_hops 2; A forwards only to B (C is a consumer of A). B is busy (one job running, one
    # queued): LowestQlen at B sends A's job on to C (empty queue). Its chain is A > B; C's
    # notifications reach A through B; A queries and cancels it through B
    roles = {("A", "C"): "consumer", ("C", "A"): "provider"}
    with federation(tmp_path, tag, nodes=(1, 2, 2), roles=roles, max_hops=2) as fed:
        with fed["B"].client() as b:
            own = b.submit_many([{"command": "sleep", "args": ["60"], "size": 2} for _ in range(2)])
            wait_state(b, own[0], ("running",), 30)
        fed.wait_connected("A")
        with fed["A"].client() as a:
            jid = a.submit(command="sleep", args=["60"], size=2)
            running = wait_state(a, jid, ("running",), 30)
            assert running["forwarded"]["peer"] == "B" and running["forwarded"]["where"] == "C/c1"
        at_c = received_from(fed["C"], "A")
        assert len(at_c) == 1
        with fed["C"].client() as c:
            shown = c.job(at_c[0]["id"])
        assert shown["received"]["chain"] == ["A", "B"] and shown["received"]["sender"] == "B"
        assert shown["received"]["origin_id"] == jid
        with fed["A"].client() as a:
            assert a.cancel(jid)["state"] == "cancelled"
            assert a.job(jid)["state"] == "cancelled"
        with fed["C"].client() as c:
            assert wait_state(c, at_c[0]["id"], ("cancelled",), 15)["state"] == "cancelled"
        at_b = received_from(fed["B"], "A")
        assert [j["state"] for j in at_b] == ["cancelled"]


def test_a_job_stored_but_not_yet_routed_when_the_origin_died_is_forwarded_after_restart(
    tmp_path: Path, tag: str
) -> None:
    # the state a kill leaves between a submission's commit and the round that routes it: a
    # queued 2-processor job at A (whose site has 1), no forwarding record. After the restart it
    # waits for a provider's resource data, then the policy forwards it: not rejected
    with federation(tmp_path, tag, selection="lowest-qlen") as fed:
        fed["A"].kill(signal.SIGKILL)
        spec = marked(tmp_path, "runs-5", 0.2)
        with sqlite3.connect(tmp_path / "A" / "isthmus.db") as conn:
            conn.execute(
                "INSERT INTO jobs (id, user, name, spec, size, priority, state, stage, run, restarts, "
                "submit_time, spool) VALUES (1, 'admin', 'sh', ?, 2, 'high', 'queued', 0, 0, 0, ?, ?)",
                (json.dumps({**spec, "priority": "high", "env": {}}), time.time(), str(tmp_path / "spool-1")),
            )
        fed["A"].start()
        with fed["A"].client() as a:
            done = wait_state(a, 1, TERMINAL, 40)
        # to the first provider whose data is in (B and C tie on queue length)
        assert done["state"] == "completed" and done["forwarded"]["peer"] in ("B", "C")
        assert runs(tmp_path, "runs-5") == 1
