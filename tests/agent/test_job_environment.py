"""A job's environment is built from the defaults, what was asked for and the job variables;
outputs are opened without blocking and only when they are regular files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from isthmus.agent.jobenv import DEFAULTS, job_environment, pilot_environment
from isthmus.agent.outputs import OutputFileError, open_output


def test_nothing_but_defaults_requested_and_job_variables() -> None:
    source = {"PATH": "/bin", "HOME": "/h", "SECRET_KEY": "s3cret", "ISTHMUS_PEER_SECRET_AB": "p", "LANG": "C"}
    env = job_environment({"MINE": "1", "PATH": "/opt/bin"}, {"ISTHMUS_JOB_ID": "7"}, source)
    assert env["PATH"] == "/opt/bin" and env["HOME"] == "/h" and env["LANG"] == "C"
    assert env["MINE"] == "1" and env["ISTHMUS_JOB_ID"] == "7"
    assert "s3cret" not in env.values() and "p" not in env.values()
    assert set(env) <= {*DEFAULTS, "MINE", "ISTHMUS_JOB_ID"}


def test_job_variables_win_and_a_bare_source_still_has_a_path() -> None:
    env = job_environment({"ISTHMUS_JOB_ID": "forged"}, {"ISTHMUS_JOB_ID": "7"}, {})
    assert env["ISTHMUS_JOB_ID"] == "7" and env["PATH"]


def test_a_pilot_gets_its_python_path_and_tag_only() -> None:
    env = pilot_environment("t1", {"PYTHONPATH": "/src", "AWS_SECRET_ACCESS_KEY": "k", "PATH": "/bin"})
    assert env["PYTHONPATH"] == "/src" and env["ISTHMUS_TAG"] == "t1" and "AWS_SECRET_ACCESS_KEY" not in env


def test_a_fifo_nobody_reads_is_refused_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(OutputFileError, match="FIFO"):
        open_output(str(fifo), append=False)


def test_a_directory_is_refused_and_dev_null_taken(tmp_path: Path) -> None:
    with pytest.raises(OSError):
        open_output(str(tmp_path), append=True)
    with open_output("/dev/null", append=False) as f:
        f.write(b"x")


def test_a_regular_file_is_truncated_or_appended(tmp_path: Path) -> None:
    path = tmp_path / "out"
    path.write_bytes(b"old\n")
    with open_output(str(path), append=True) as f:
        f.write(b"more\n")
    assert path.read_bytes() == b"old\nmore\n"
    with open_output(str(path), append=False) as f:
        f.write(b"new\n")
    assert path.read_bytes() == b"new\n"
