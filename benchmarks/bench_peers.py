"""Time of each peer-protocol operation on loopback, next to the Villegas dissertation's Table 4.3.

One manager ("B", SQLite, one 1-core node held by a long job so that received jobs queue) has
peer "A"; this program plays A, with A's shared secret, and times each operation of Table 4.1
over one keep-alive HTTP connection: median and p99 in milliseconds, and as a ratio to a bare
HTTP request to the same server (GET /health) measured in the same run; a user's own submission
(POST /jobs) is timed too, the local path submitJob adds the peer's bookkeeping to. submitJob stores the job
(job row, history, received_jobs row, SUBMIT event) in one committed transaction before it
answers; queryJob and cancelJob look the job up by the sender's id; notifyJob is timed on its
refusal path (authentication, validation, lookup: B forwarded nothing to A, so it answers 404)
since this program is not a server that B could forward to.

Target: submitJob p99 < 20 ms. Seed (Table 4.3, ms; FIU->BSC, BSC->FIU, FIU->IBM, IBM->FIU):
openConn 562/659/15/40, requestResourceData 983/706/69/90, submitJob 642/694/124/3162.
Usage: python benchmarks/bench_peers.py [REPEATS]
"""

from __future__ import annotations

import os
import secrets
import statistics
import sys
import time
from collections.abc import Callable

import httpx

from _live import manager
from isthmus.live.client import Client

SECRET_VAR = "ISTHMUS_BENCH_PEER_SECRET"

ENV = f"""
name = "B"
round_interval = "event"
[[sites]]
name = "one"
nodes = 1
cores_per_node = 1
[policies]
allocation = "fcfs"
provisioning = "none"
[federation]
heartbeat = 5
[[peers]]
name = "A"
address = "http://127.0.0.1:9"
role = "both"
token_env = "{SECRET_VAR}"
"""

SEED_MS = {
    "openConn": (562, 659, 15, 40),
    "requestResourceData": (983, 706, 69, 90),
    "submitJob": (642, 694, 124, 3162),
}


def timed(n: int, op: Callable[[int], httpx.Response], expect: int) -> list[float]:
    """`n` calls of `op(i)`, each answered `expect`; their durations in milliseconds."""
    out = []
    for i in range(n):
        t0 = time.perf_counter()
        r = op(i)
        out.append((time.perf_counter() - t0) * 1000)
        if r.status_code != expect:
            raise RuntimeError(f"answered {r.status_code}, expected {expect}: {r.text[:300]}")
    return out


def p99(xs: list[float]) -> float:
    """The 99th percentile (nearest rank)."""
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, round(0.99 * len(s)) - 1))]


def main() -> None:
    """Run the benchmark and print the table."""
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    secret = secrets.token_urlsafe(24)
    os.environ[SECRET_VAR] = secret
    headers = {"Authorization": f"Bearer {secret}", "X-Isthmus-Peer": "A"}
    job = {"command": "true", "size": 1, "requested_runtime": 60}
    with manager(ENV) as (url, token):
        with Client(url, token) as c:
            c.submit(command="sleep", args=["600"])  # holds the node: received jobs queue
        user = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=url, headers=headers, timeout=30) as h:
            site = {
                "name": "x",
                "is_cloud": False,
                "available": True,
                "processors": 4,
                "max_processors": 4,
                "idle": 4,
                "busy": 0,
                "queued_jobs": 0,
                "queued_processors": 0,
            }
            ops: list[tuple[str, Callable[[int], httpx.Response], int]] = [
                ("bare GET /health", lambda i: h.get("/health"), 200),
                ("POST /jobs (local)", lambda i: h.post("/jobs", json=job, headers=user), 201),
                (
                    "openConn",
                    lambda i: h.post(
                        "/peer/open",
                        json={"manager": "A", "role": "both", "heartbeat": 5, "job_description": ["isthmus-submit/1"]},
                    ),
                    200,
                ),
                ("heartbeat", lambda i: h.post("/peer/heartbeat", json={"manager": "A", "time": time.time()}), 200),
                ("requestResourceData", lambda i: h.get("/peer/resources"), 200),
                (
                    "sendResourceData",
                    lambda i: h.post(
                        "/peer/resources",
                        json={
                            "manager": "A",
                            "time": time.time(),
                            "queued_jobs": i,
                            "queued_processors": i,
                            "sites": [site],
                        },
                    ),
                    204,
                ),
                (
                    "submitJob",
                    lambda i: h.post(
                        "/peer/jobs",
                        json={
                            "origin_id": i + 1,
                            "sender_id": i + 1,
                            "chain": ["A"],
                            "user": "bench",
                            "submit_time": time.time(),
                            "job": job,
                        },
                    ),
                    201,
                ),
                ("queryJob", lambda i: h.post("/peer/jobs/query", json={"sender_id": i + 1}), 200),
                (
                    "notifyJob (404 path)",
                    lambda i: h.post(
                        "/peer/jobs/notify",
                        json={
                            "job_id": i + 1,
                            "remote_id": 1,
                            "origin": "B",
                            "origin_id": i + 1,
                            "state": "running",
                            "time": time.time(),
                        },
                    ),
                    404,
                ),
                ("cancelJob", lambda i: h.post("/peer/jobs/cancel", json={"sender_id": i + 1}), 200),
            ]
            for _, op, expect in ops:  # warm-up (connection, first queries)
                if expect != 201:
                    op(0)
            results = [(name, timed(n, op, expect)) for name, op, expect in ops]
            h.post("/peer/notify-conn", json={"manager": "A", "kind": "close", "message": "benchmark done"})
    bare = statistics.median(results[0][1])
    bare99 = p99(results[0][1])
    print(f"peer protocol on loopback, {n} calls per operation, one keep-alive connection, SQLite")
    print(f"{'operation':<22} {'median ms':>10} {'p99 ms':>8} {'x bare':>7} {'x bare p99':>10}   seed Table 4.3 (ms)")
    for name, xs in results:
        med, q = statistics.median(xs), p99(xs)
        seed = SEED_MS.get(name)
        seed_text = " / ".join(f"{v:,}" for v in seed) if seed else "-"
        print(f"{name:<22} {med:>10.2f} {q:>8.2f} {med / bare:>7.1f} {q / bare99:>10.1f}   {seed_text}")
    submit = dict(results)["submitJob"]
    q = p99(submit)
    print(f"submitJob p99 {q:.2f} ms (target < 20 ms) -> {'OK' if q < 20 else 'MISSED'}")
    print(
        f"one-way message latency (bare request median / 2): {bare / 2:.2f} ms; heartbeat median / 2: "
        f"{statistics.median(dict(results)['heartbeat']) / 2:.2f} ms"
    )


if __name__ == "__main__":
    main()
