"""Output paths that cannot be output files, and bodies nested too deeply, never get a 5xx.

* `-o` naming an existing FIFO, directory or device is refused at submission (400 naming the
  field), as is a path with a component over 255 bytes (ENAMETOOLONG), on /jobs and /jobs/batch;
* a FIFO made after submission (nobody reads it) fails the run with the reason at once: the
  pilot never blocks opening it, and the next job runs on the same slot;
* `GET /jobs/{id}/output` of such a job answers (never 5xx);
* a body of arrays nested 100,000 deep answers 4xx on every route that takes a body.
"""

from __future__ import annotations

import os
from pathlib import Path

import httpx
import pytest
from livekit import LiveServer, wait_state

from isthmus.backends.jobfiles import OutputUnreadable, read_run_output

ENV = """
name = "outputs"
round_interval = "event"
[[sites]]
name = "c1"
nodes = 1
cores_per_node = 1
[policies]
allocation = "ff"
provisioning = "none"
"""


def test_output_paths_that_are_not_files_are_refused_or_fail_the_run(tmp_path: Path, tag: str) -> None:
    env = tmp_path / "env.toml"
    env.write_text(ENV)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    long_name = str(tmp_path / ("x" * 256))
    server = LiveServer(env, tmp_path / "state", f"sqlite:///{tmp_path / 'db.sqlite'}", tag).start()
    try:
        with server.client() as c, httpx.Client(base_url=server.url, timeout=10) as h:
            auth = {"Authorization": f"Bearer {server.admin_token}"}
            for field, path in [("output", str(fifo)), ("error", str(tmp_path)), ("output", "/dev/zero")]:
                r = h.post("/jobs", json={"command": "true", field: path}, headers=auth)
                assert r.status_code == 400 and r.json()["detail"].startswith(f"{field}: "), r.text
                r = h.post("/jobs/batch", json=[{"command": "true"}, {"command": "true", field: path}], headers=auth)
                assert r.status_code == 400 and r.json()["detail"].startswith(f"{field}: "), r.text
            r = h.post("/jobs", json={"command": "true", "output": long_name}, headers=auth)
            assert r.status_code == 400 and "255 bytes" in r.json()["detail"], r.text
            assert c.jobs(all_=True) == []  # nothing of a refused batch was stored
            # a FIFO made once the job is queued: the run fails with the reason, without blocking
            blocker = c.submit(command="sleep", args=["2"])
            later = tmp_path / "later"
            victim = c.submit(command="echo", args=["hi"], output=str(later))
            os.mkfifo(later)
            job = wait_state(c, victim, ("failed", "completed"), timeout=30)
            assert job["state"] == "failed" and "FIFO" in job["history"][-1]["detail"], job["history"]
            assert job["restarts"] == 0
            assert wait_state(c, blocker, ("completed",), timeout=30)
            r = h.get(f"/jobs/{victim}/output", headers=auth)
            assert r.status_code < 500, r.text
            after = c.submit(command="true")
            assert wait_state(c, after, ("completed", "failed"), timeout=30)["state"] == "completed"
    finally:
        server.stop()


def test_deeply_nested_bodies_answer_4xx_on_every_route(tmp_path: Path, tag: str) -> None:
    env = tmp_path / "env.toml"
    env.write_text(ENV)
    server = LiveServer(env, tmp_path / "state", f"sqlite:///{tmp_path / 'db.sqlite'}", tag).start()
    deep = b"[" * 100_000 + b"]" * 100_000
    try:
        with httpx.Client(base_url=server.url, timeout=30) as h:
            auth = {"Authorization": f"Bearer {server.admin_token}", "Content-Type": "application/json"}
            spec = h.get("/openapi.json").json()
            routes = [
                (method.upper(), path.replace("{job_id}", "1").replace("{task}", "0").replace("{name}", "x"))
                for path, ops in spec["paths"].items()
                for method in ops
                if method in ("post", "put", "patch")
            ]
            assert ("POST", "/jobs/batch") in routes and len(routes) > 5
            answers = {(m, p): h.request(m, p, content=deep, headers=auth).status_code for m, p in routes}
            assert {k: v for k, v in answers.items() if v >= 500} == {}, answers
            assert answers[("POST", "/jobs/batch")] == 400 and answers[("POST", "/jobs")] in (400, 422)
            assert h.get("/health").status_code == 200
    finally:
        server.stop()


def test_reading_an_output_the_os_refuses_answers_410(tmp_path: Path) -> None:
    """What the output route answers for a path with a component over 255 bytes (a job stored
    before submissions were checked): 410 with the reason, not the OS's error."""
    spec = {"output": str(tmp_path / ("x" * 300))}
    with pytest.raises(OutputUnreadable) as caught:
        read_run_output(spec, 1, str(tmp_path), 1, stream="stdout", offset=0, starting=False)
    assert caught.value.status == 410
    os.mkfifo(tmp_path / "f")  # a FIFO is never opened (it would block the server)
    spec = {"output": str(tmp_path / "f")}
    with pytest.raises(OutputUnreadable):
        read_run_output(spec, 1, str(tmp_path), 1, stream="stdout", offset=0, starting=False)
