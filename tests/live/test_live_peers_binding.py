"""Peer messages are bound to the peer authenticated for them (docs/federation.md): managers A
and C both forward to B. A job C sends naming A's origin id (even claiming A as its origin) is a
job of its own at B, A's is neither dropped nor answered for C; C can neither query, cancel,
notify nor hand back A's job at B, and B cannot act at A on a job A did not send B: 404 alike
for another peer's job and for none, naming nothing of the other peer's."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any

import httpx
from livekit import wait_for, wait_state
from peerkit import Federation, federation

TERMINAL = ("completed", "failed", "cancelled", "rejected", "lost", "timeout")
BUSY = {"command": "sleep", "args": ["30"], "size": 2}


def as_peer(fed: Federation, sender: str, to: str, path: str, body: dict[str, Any]) -> httpx.Response:
    """A peer request from `sender` to `to`, authenticated with the secret of that pair."""
    headers = {"X-Isthmus-Peer": sender, "Authorization": f"Bearer {fed.secrets[tuple(sorted((sender, to)))]}"}  # type: ignore[index]
    return httpx.post(fed[to].url + path, json=body, headers=headers, timeout=10)


def submit_body(origin_id: int, sender_id: int, chain: list[str]) -> dict[str, Any]:
    return {
        "origin_id": origin_id,
        "sender_id": sender_id,
        "chain": chain,
        "user": "mallory",
        "submit_time": time.time(),
        "job": BUSY,
    }


def note(job_id: int, remote_id: int, origin: str, origin_id: int, state: str) -> dict[str, Any]:
    return {
        "job_id": job_id,
        "remote_id": remote_id,
        "origin": origin,
        "origin_id": origin_id,
        "state": state,
        "time": time.time(),
    }


def test_a_peer_finds_and_acts_on_only_the_jobs_it_sent(tmp_path: Path, tag: str) -> None:
    with federation(tmp_path, tag, nodes=(1, 2, 2), max_hops=2) as fed, fed["A"].client() as a:
        # A's 2-processor job cannot run at A: forwarded to B (both queues empty: B first)
        jid = a.submit(**BUSY)
        running = wait_state(a, jid, ("running",), 30)
        assert running["forwarded"]["peer"] == "B"
        at_b = running["forwarded"]["remote_id"]

        # C cannot query or cancel A's job at B: 404, the same as for no job
        for path in ("/peer/jobs/query", "/peer/jobs/cancel"):
            for sender_id in (jid, 999_999):
                r = as_peer(fed, "C", "B", path, {"sender_id": sender_id})
                assert r.status_code == 404 and r.json()["detail"] == f"C sent no job {sender_id} here"

        # C sends a job with A's origin id, as its own and claiming A as its origin: two new
        # jobs at B (not A's); repeated, each answers its own id again
        own = as_peer(fed, "C", "B", "/peer/jobs", submit_body(jid, jid, ["C"]))
        spoof = as_peer(fed, "C", "B", "/peer/jobs", submit_body(jid, 7777, ["A", "C"]))
        assert own.status_code == 201 and spoof.status_code == 201
        ids = {at_b, own.json()["id"], spoof.json()["id"]}
        assert len(ids) == 3
        again = as_peer(fed, "C", "B", "/peer/jobs", submit_body(jid, 7777, ["A", "C"]))
        assert again.status_code == 201 and again.json()["id"] == spoof.json()["id"]
        with sqlite3.connect(tmp_path / "B" / "isthmus.db") as conn:
            rows = conn.execute(
                "SELECT local_id, sender, origin, origin_id FROM received_jobs ORDER BY local_id"
            ).fetchall()
        assert sorted(rows) == sorted(
            [(at_b, "A", "A", jid), (own.json()["id"], "C", "C", jid), (spoof.json()["id"], "C", "A", jid)]
        )

        # C cannot notify B of A's job there, nor hand it back (B never forwarded it to C)
        for state in ("completed", "returned", "cancelled"):
            r = as_peer(fed, "C", "B", "/peer/jobs/notify", note(at_b, jid, "A", jid, state))
            assert r.status_code == 404
            assert r.json()["detail"] == f"no job {at_b} forwarded from here to C is open"
        # nor act at A on A's job sent to B
        for state in ("completed", "returned"):
            r = as_peer(fed, "C", "A", "/peer/jobs/notify", note(jid, at_b, "A", jid, state))
            assert r.status_code == 404 and r.json()["detail"] == f"no job {jid} forwarded from here to C is open"
        # C's own job is C's to query
        mine = as_peer(fed, "C", "B", "/peer/jobs/query", {"sender_id": 7777})
        assert mine.status_code == 200 and mine.json()["id"] == spoof.json()["id"]

        # B now has C's jobs queued: A's next job goes to C (the shortest queue)
        def b_queued() -> bool:
            data = {p["name"]: p for p in a.peers()}["B"]["resources"]
            return bool(data["queued_jobs"] >= 2)

        wait_for(b_queued, 10, 0.1, "B's resource data showing C's jobs queued")
        other = a.submit(**BUSY)
        to_c = wait_state(a, other, ("running",), 30)
        assert to_c["forwarded"]["peer"] == "C"
        # B cannot act at A on a job A sent C, nor on one A sent nobody, nor query or cancel at
        # A a job A never received from B
        for job_id in (other, 999_999):
            for state in ("completed", "returned", "running"):
                r = as_peer(fed, "B", "A", "/peer/jobs/notify", note(job_id, 1, "A", job_id, state))
                assert r.status_code == 404
                assert r.json()["detail"] == f"no job {job_id} forwarded from here to B is open"
        for path in ("/peer/jobs/query", "/peer/jobs/cancel"):
            r = as_peer(fed, "B", "A", path, {"sender_id": at_b})
            assert r.status_code == 404 and r.json()["detail"] == f"B sent no job {at_b} here"
        # B naming the wrong origin for the job A did send it is not that job either
        r = as_peer(fed, "B", "A", "/peer/jobs/notify", note(jid, at_b, "C", jid, "completed"))
        assert r.status_code == 404

        # none of it touched A's jobs: both still running where they were sent
        assert a.job(jid)["state"] == "running" and a.job(other)["state"] == "running"
        with fed["B"].client() as b:
            shown = b.job(at_b)
            assert shown["state"] == "running"
            assert shown["received"] == {"origin": "A", "origin_id": jid, "sender": "A", "chain": ["A"]}
        with fed["C"].client() as c:
            assert c.job(to_c["forwarded"]["remote_id"])["state"] == "running"
        # and A still cancels its own job at B
        assert a.cancel(jid)["state"] == "cancelled"
        with fed["B"].client() as b:
            assert wait_state(b, at_b, TERMINAL, 10)["state"] == "cancelled"
