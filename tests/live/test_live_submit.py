"""Batch scripts, output files, host names, relative state directories, token hints and
refusals at server start, against real managers and pilots."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from livekit import LiveServer, wait_for, wait_state, write_env
from typer.testing import CliRunner

from isthmus.cli.main import app
from isthmus.live.client import ApiError, Client
from isthmus.live.manager import free_port

TERMINAL = ("completed", "failed", "cancelled", "rejected")

SCRIPT = """#!/bin/sh
# nightly run
#ISTHMUS --size 3
#ISTHMUS --name scripted -o out-%j.txt
#ISTHMUS --time 5:00
echo "procs=$ISTHMUS_NPROCS hosts=$ISTHMUS_HOSTS args=$*"
cat "$ISTHMUS_NODEFILE"
echo "to stderr" >&2
"""


def _cli(live: LiveServer, cwd: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ISTHMUS_URL": live.url, "ISTHMUS_TOKEN": live.admin_token, **extra}
    return subprocess.run(  # noqa: PLW1510
        [sys.executable, "-m", "isthmus.cli.live_entry", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
    )


def test_script_runs_with_its_directives_and_output_lands_in_the_o_file(live: LiveServer, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "job.sh").write_text(SCRIPT)
    r = _cli(live, work, "submit", "--json", "job.sh", "first", "second")
    assert r.returncode == 0, r.stderr
    jid = json.loads(r.stdout)["id"]
    (work / "job.sh").write_text("#!/bin/sh\necho edited after submission\n")  # must not change the job
    c = live.client()
    j = wait_state(c, jid, TERMINAL)
    assert j["state"] == "completed", j
    assert (j["size"], j["name"], j["requested_runtime"]) == (3, "scripted", 300.0)
    host = socket.gethostname()
    out = work / f"out-{jid}.txt"
    assert out.read_text() == f"procs=3 hosts={host}:3 args=first second\n{host} slots=3\nto stderr\n"
    assert not (Path(j["spec"]["cwd"]) / "out-%j.txt").exists()
    r = _cli(live, work, "logs", str(jid))
    assert r.stdout == out.read_text()  # logs reads from wherever the output went
    r = _cli(live, work, "show", str(jid))
    assert f"StdOut {work}/out-{jid}.txt" in r.stdout  # the pattern as it expands for this job


def test_command_line_overrides_directives_and_error_file(live: LiveServer, tmp_path: Path) -> None:
    (tmp_path / "job.sh").write_text(SCRIPT)
    r = _cli(live, tmp_path, "submit", "--json", "-n", "1", "-o", "o/%j.log", "-e", "e-%%-%j.log", "job.sh")
    assert r.returncode == 0, r.stderr
    jid = json.loads(r.stdout)["id"]
    c = live.client()
    j = wait_state(c, jid, TERMINAL)
    # the o/ directory does not exist: the run fails and says why in the error file
    assert j["state"] == "failed" and j["size"] == 1
    err = (tmp_path / f"e-%-{jid}.log").read_text()
    assert "cannot open the output file" in err and f"o/{jid}.log" in err
    (tmp_path / "o").mkdir()
    r = _cli(live, tmp_path, "submit", "--json", "-n", "1", "-o", "o/%j.log", "-e", "e-%%-%j.log", "job.sh")
    jid = json.loads(r.stdout)["id"]
    j = wait_state(c, jid, TERMINAL)
    assert j["state"] == "completed"
    host = socket.gethostname()
    assert (tmp_path / "o" / f"{jid}.log").read_text() == f"procs=1 hosts={host}:1 args=\n{host} slots=1\n"
    assert (tmp_path / f"e-%-{jid}.log").read_text() == "to stderr\n"
    assert c.output(jid, "stderr")[0] == "to stderr\n"


def test_api_refuses_relative_or_null_output_paths(live: LiveServer) -> None:
    c = live.client()
    for field, value, words in [
        ("output", "relative/out", "must be absolute"),
        ("error", "/tmp/a\x00b", "null byte"),
        ("output", "/tmp/%N", "unknown pattern"),
    ]:
        with pytest.raises(ApiError) as info:
            c.submit(command="true", **{field: value})
        assert info.value.status == 422 and words in str(info.value), str(info.value)
    with pytest.raises(ApiError) as info:
        c.submit(command="x", script="#!/bin/sh\n\x00")
    assert info.value.status == 422 and "null byte" in str(info.value)


def test_401_names_what_to_set(live: LiveServer, tmp_path: Path) -> None:
    r = httpx.get(live.url + "/jobs")
    assert r.status_code == 401
    detail = r.json()["detail"]
    assert "ISTHMUS_TOKEN" in detail and str(live.state_dir.absolute() / "admin.token") in detail
    r = _cli(live, tmp_path, "jobs", ISTHMUS_TOKEN="nope")
    assert r.returncode == 2
    assert "invalid token" in r.stderr and "ISTHMUS_TOKEN" in r.stderr
    assert "hint: the token sent came from ISTHMUS_TOKEN;" in r.stderr
    env = {k: v for k, v in os.environ.items() if not k.startswith("ISTHMUS_")}
    r = subprocess.run(  # noqa: PLW1510
        [sys.executable, "-m", "isthmus.cli.live_entry", "jobs", "--url", live.url],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert r.returncode == 2 and "missing token" in r.stderr
    assert "hint: no token was sent: set ISTHMUS_TOKEN=<token>" in r.stderr


def test_relative_state_dir(tmp_path: Path, tag: str) -> None:
    env_file = write_env(tmp_path / "env.toml")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    cmd = [sys.executable, "-m", "isthmus.cli.live_entry", "server", "--env", "env.toml", "--state-dir", "./rel-state"]
    cmd += ["--listen", f"127.0.0.1:{port}", "--poll-wait", "1"]
    assert env_file.parent == tmp_path
    with open(tmp_path / "server.log", "wb") as log:
        proc = subprocess.Popen(
            cmd, cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ, ISTHMUS_TAG=tag)
        )
    try:
        wait_for(lambda: _up(url), 30, what="server up")
        token = (tmp_path / "rel-state" / "admin.token").read_text().strip()
        with Client(url, token) as c:
            # the job runs in its spool directory: a relative node file path would not resolve there
            jid = c.submit(command="sh", args=["-c", 'echo "ran in $(pwd)"; cat "$ISTHMUS_NODEFILE"'])
            j = wait_state(c, jid, TERMINAL)
            assert j["state"] == "completed", (j, c.output(jid, "stderr"))
            spool = tmp_path / "rel-state" / "spool" / str(jid)
            assert c.output(jid)[0] == f"ran in {spool}\n{socket.gethostname()} slots=1\n"
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=20)


def _up(url: str) -> bool:
    try:
        return httpx.get(url + "/health", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def test_port_in_use_is_refused_before_anything_is_created(tmp_path: Path) -> None:
    env_file = write_env(tmp_path / "env.toml")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        state = tmp_path / "never"
        args = ["server", "--env", str(env_file), "--state-dir", str(state), "--listen", f"127.0.0.1:{port}"]
        result = CliRunner().invoke(app, args)
    assert result.exit_code == 2
    assert result.stderr.strip().startswith(f"error: cannot listen on 127.0.0.1:{port}: the address is already in use")
    assert not state.exists()


def test_state_of_another_environment_is_refused(live: LiveServer, tmp_path: Path) -> None:
    live.stop()
    started = time.time()
    other = write_env(tmp_path / "other.toml", name="other")
    base = ["server", "--state-dir", str(live.state_dir), "--db", live.db_url, "--listen", f"127.0.0.1:{free_port()}"]
    result = CliRunner().invoke(app, [*base, "--env", str(other)])
    assert result.exit_code == 2
    assert "the database belongs to environment 't', not 'other'" in result.stderr
    renamed_site = tmp_path / "same-name.toml"
    renamed_site.write_text(live.env_file.read_text().replace('name = "c1"', 'name = "c9"'))
    result = CliRunner().invoke(app, [*base, "--env", str(renamed_site)])
    assert result.exit_code == 2
    assert "was made for environment 't' with sites c1, cloud; this one has sites c9, cloud" in result.stderr
    assert time.time() - started < 10  # refused at once, no server started
    live.start()  # the same environment is welcome back
    assert live.client().sites()[0]["name"] == "c1"
