"""Slurm's spelling means Slurm's meaning: sbatch's time grammar, `#SBATCH` directives,
`--export`, the output filename patterns, and the sbatch options isthmus refuses."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import pytest
from clikit import FakeClient
from typer.testing import CliRunner

from isthmus.backends.jobfiles import ScriptError, directive_options, expand, fill, parse_directives
from isthmus.cli.live import common as live_common
from isthmus.cli.live.common import export_environment, parse_duration, parse_time_limit
from isthmus.cli.main import app

runner = CliRunner()
OPTIONS = directive_options(parse_time_limit, live_common.PRIORITIES)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90", 90 * 60),  # minutes
        ("1", 60),
        ("10:30", 10 * 60 + 30),  # MM:SS
        ("90:00", 90 * 60),
        ("1:30:00", 3600 + 30 * 60),  # HH:MM:SS
        ("1-12", 86400 + 12 * 3600),  # D-HH
        ("2-03:04", 2 * 86400 + 3 * 3600 + 4 * 60),  # D-HH:MM
        ("1-00:00:05", 86400 + 5),  # D-HH:MM:SS
        ("90s", 90),  # isthmus's units
        ("5m", 300),
        ("2h", 7200),
        ("1.5h", 5400),
        ("1d", 86400),
    ],
)
def test_time_grammar_is_sbatch_s(text: str, seconds: int) -> None:
    assert parse_time_limit(text) == seconds
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["UNLIMITED", "infinite", "0", "0:00"])
def test_no_limit(text: str) -> None:
    assert parse_time_limit(text) is None
    with pytest.raises(ValueError, match="expected a duration > 0"):
        parse_duration(text)  # a token's lifetime must be one


@pytest.mark.parametrize("text", ["-5", "", " ", "soon", "1.5", "1-", "-1-2", "1:2:3:4", "1-2:3:4:5", "5 m", "1e3"])
def test_anything_else_is_refused_naming_the_forms(text: str) -> None:
    with pytest.raises(ValueError, match=r"expected minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS"):
        parse_time_limit(text)


@pytest.mark.parametrize("value", ["-5", "", "1.5", "1-2-3"])
def test_submit_refuses_a_bad_time_in_one_line(submitted: list[dict[str, Any]], value: str) -> None:
    result = runner.invoke(app, ["submit", "-t", value, "--", "true"])
    assert result.exit_code == 2
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("error: -t/--time: expected minutes, MM:SS") and repr(value) in line
    assert submitted == []


def test_submit_time_is_minutes_and_unlimited_sends_none(submitted: list[dict[str, Any]]) -> None:
    assert runner.invoke(app, ["submit", "-t", "1-12", "--", "true"]).exit_code == 0
    assert submitted[-1]["requested_runtime"] == 86400 + 12 * 3600
    assert runner.invoke(app, ["submit", "--time=UNLIMITED", "--", "true"]).exit_code == 0
    assert "requested_runtime" not in submitted[-1]


@pytest.mark.parametrize("args", [["-p", "gpu"], ["--partition=gpu"], ["-d", "afterok:1"], ["--array", "1-3"]])
def test_unsupported_sbatch_options_are_refused_not_ignored(submitted: list[dict[str, Any]], args: list[str]) -> None:
    result = runner.invoke(app, ["submit", *args, "--", "true"])
    assert result.exit_code == 2
    assert "not supported by isthmus" in result.output
    assert submitted == []


def test_help_lists_priority_not_partition() -> None:
    result = runner.invoke(app, ["submit", "--help"], terminal_width=200)
    assert result.exit_code == 0
    assert "--priority" in result.output and "--export" in result.output
    assert "--partition" not in result.output and "--array" not in result.output
    assert runner.invoke(app, ["submit", "-p", "low", "--", "true"]).exit_code == 2  # -p is not priority


SBATCH_SCRIPT = """#!/bin/bash
#SBATCH --job-name=nightly
#SBATCH -n4 --time=1-12
#SBATCH --output=logs/%x-%j.out
#ISTHMUS --priority low
#SBATCH --export=NONE
srun ./a.out
#SBATCH --ntasks=99
"""


def test_sbatch_directives_mean_what_sbatch_makes_them_mean() -> None:
    found = parse_directives(SBATCH_SCRIPT, "job.sh", OPTIONS, live_common.REFUSED_DIRECTIVES)
    assert found == {
        "name": "nightly",
        "size": 4,
        "time": 86400 + 12 * 3600,
        "output": "logs/%x-%j.out",
        "priority": "low",
        "export": "NONE",
    }


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("#SBATCH --partition=gpu", "job.sh:2: #SBATCH --partition: not supported by isthmus (partitions are not"),
        ("#SBATCH -p gpu", "job.sh:2: #SBATCH -p: not supported by isthmus (partitions"),
        ("#SBATCH -pgpu", "job.sh:2: #SBATCH -p: not supported by isthmus (partitions"),
        ("#SBATCH --array=1-10", "job.sh:2: #SBATCH --array: not supported by isthmus (job arrays"),
        ("#SBATCH --mem=4G", "job.sh:2: unknown #SBATCH option '--mem'; valid:"),
        ("#SBATCH -t 1.5", "job.sh:2: #SBATCH -t: expected minutes, MM:SS"),
    ],
)
def test_an_unsupported_sbatch_directive_is_refused_naming_it_and_its_line(line: str, message: str) -> None:
    with pytest.raises(ScriptError) as info:
        parse_directives(f"#!/bin/sh\n{line}\ntrue\n", "job.sh", OPTIONS, live_common.REFUSED_DIRECTIVES)
    assert str(info.value).startswith(message)


def test_an_sbatch_script_is_submitted_unchanged(
    submitted: list[dict[str, Any]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "job.sh").write_text(SBATCH_SCRIPT)
    result = runner.invoke(app, ["submit", "job.sh"])
    assert result.exit_code == 0, result.output
    (spec,) = submitted
    assert (spec["name"], spec["size"], spec["requested_runtime"]) == ("nightly", 4, 129600)
    assert spec["output"] == str(tmp_path / "logs/%x-%j.out") and spec["env"] == {}  # --export=NONE


ENV = {
    "HOME": "/home/ann",
    "PROJECT": "p1",
    "ISTHMUS_TOKEN": "secret-token",
    "ISTHMUS_URL": "http://m:8750",
    "BASH_FUNC_f%%": "() { true; }",
    "BAD": "a\x00b",
}


def test_export_all_none_and_lists() -> None:
    assert export_environment("ALL", ENV) == {"HOME": "/home/ann", "PROJECT": "p1"}
    assert export_environment("NONE", ENV) == {}
    assert export_environment("PROJECT,X=1,UNSET", ENV) == {"PROJECT": "p1", "X": "1"}
    assert export_environment("ALL,PROJECT=p2,Y=a=b", ENV) == {"HOME": "/home/ann", "PROJECT": "p2", "Y": "a=b"}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("ISTHMUS_TOKEN", "ISTHMUS_* variables are set by the manager"),
        ("ALL,ISTHMUS_JOB_ID=3", "ISTHMUS_* variables are set by the manager"),
        ("NONE,A=1", "NONE takes no variables"),
        ("", "expected ALL, NONE"),
        ("A,,B", "expected ALL, NONE"),
        ("1X=2", "'1X' is not a variable name"),
    ],
)
def test_export_refuses_internal_variables_and_bad_lists(text: str, message: str) -> None:
    with pytest.raises(ValueError) as info:
        export_environment(text, ENV)
    assert message in str(info.value)


def test_submit_exports_the_callers_environment_by_default(
    submitted: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_SETTING", "on")
    monkeypatch.setenv("ISTHMUS_TOKEN", "never-sent")
    assert runner.invoke(app, ["submit", "--env", "MY_SETTING=over", "--", "true"]).exit_code == 0
    env = submitted[-1]["env"]
    assert env["MY_SETTING"] == "over" and env["PATH"] == live_common.os.environ["PATH"]
    assert not any(k.startswith("ISTHMUS_") for k in env)
    assert runner.invoke(app, ["submit", "--export", "MY_SETTING", "--", "true"]).exit_code == 0
    assert submitted[-1]["env"] == {"MY_SETTING": "on"}
    result = runner.invoke(app, ["submit", "--export", "ISTHMUS_TOKEN=x", "--", "true"])
    assert result.exit_code == 2 and "--export: ISTHMUS_TOKEN" in result.stderr


def test_output_patterns() -> None:
    filled = fill("/o/%x-%u-%%x-%j.%A_%a", {"x": "run%1", "u": "ann"})
    assert filled == "/o/run%%1-ann-%%x-%j.%A_%a"  # a % in the name stays literal
    assert expand(filled, 12) == "/o/run%1-ann-%x-12.12_4294967294"


ROWS = [
    {"id": 1, "user": "ann", "name": "big", "state": "queued", "size": 4, "priority": "high", "site": None,
     "requested_runtime": 5400.0, "start_time": None, "end_time": None, "submit_time": 1.0, "exit_code": None,
     "restarts": 0, "slots": [], "reason": "waiting for processors", "spec": {"cwd": "/w"}},
    {"id": 2, "user": "ann", "name": "small", "state": "running", "size": 1, "priority": "low", "site": "c1",
     "requested_runtime": None, "start_time": 1.0, "end_time": None, "submit_time": 1.0, "exit_code": None,
     "restarts": 1, "slots": [["n0", 1]], "reason": None, "spec": {}},
    {"id": 3, "user": "bob", "name": "big", "state": "running", "size": 2, "priority": "high", "site": "c1",
     "requested_runtime": 60.0, "start_time": 1.0, "end_time": None, "submit_time": 1.0, "exit_code": None,
     "restarts": 0, "slots": [["n1", 2]], "reason": None, "spec": {}},
]  # fmt: skip


class ListingClient(FakeClient):
    """Answers a listing of ROWS (as an admin sees it) and records cancellations."""

    cancelled: ClassVar[list[int]] = []
    listed_as: ClassVar[list[str | None]] = []

    def jobs(self, *, user: str | None = None, **_kw: Any) -> list[dict[str, Any]]:
        ListingClient.listed_as.append(user)
        return ROWS

    def cancel(self, job_id: int) -> dict[str, Any]:
        ListingClient.cancelled.append(job_id)
        return {"id": job_id, "state": "cancelled"}


@pytest.fixture
def listing(monkeypatch: pytest.MonkeyPatch) -> type[ListingClient]:
    ListingClient.cancelled = []
    ListingClient.listed_as = []
    monkeypatch.setattr(live_common, "Client", ListingClient)
    return ListingClient


def test_jobs_format_prints_slurm_fields(listing: type[ListingClient]) -> None:
    result = runner.invoke(app, ["jobs", "--format", "JobID,jobname%4,State,TimeLimit,NodeList,ExitCode,Reason"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["JOBID", "NAME", "STATE", "TIMELIMIT", "NODELIST", "EXITCODE", "REASON"]
    assert lines[1].split() == ["1", "big", "PENDING", "01:30:00", "-", "0:0", "waiting", "for", "processors"]
    assert lines[2].split()[:5] == ["2", "smal", "RUNNING", "UNLIMITED", "n0"]  # JobName%4 cuts to 4


@pytest.mark.parametrize(("fmt", "message"), [("JobID,Partition", "unknown field 'Partition'"), ("JobID%x", "width")])
def test_jobs_format_refuses_an_unknown_field(listing: type[ListingClient], fmt: str, message: str) -> None:
    result = runner.invoke(app, ["jobs", "--format", fmt])
    assert result.exit_code == 2 and message in result.output
    assert listing.listed_as == []  # refused before asking


@pytest.mark.parametrize(
    ("args", "cancelled"),
    [
        (["-n", "big"], [1, 3]),
        (["-u", "ann", "-t", "RUNNING"], [2]),
        (["-t", "PENDING"], [1]),
        (["3", "2", "-n", "big"], [3]),  # ids and filters: the ids that match
        (["-u", "carl"], []),
        (["5"], [5]),  # ids alone: sent as they are (the server answers for them)
    ],
)
def test_cancel_filters(listing: type[ListingClient], args: list[str], cancelled: list[int]) -> None:
    result = runner.invoke(app, ["cancel", *args])
    assert result.exit_code == 0, result.output
    assert listing.cancelled == cancelled


def test_cancel_needs_ids_or_a_filter_and_a_known_state(listing: type[ListingClient]) -> None:
    assert runner.invoke(app, ["cancel"]).exit_code == 2
    bad = runner.invoke(app, ["cancel", "-t", "COMPLETED"])
    assert bad.exit_code == 2 and "expected PENDING or RUNNING" in bad.output
    assert listing.cancelled == []
