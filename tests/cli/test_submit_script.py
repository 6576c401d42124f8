"""`isthmus submit SCRIPT`: directives, overrides and output templates, checked before any request."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from isthmus.backends.jobfiles import (
    OutputTemplateError,
    ScriptError,
    check_template,
    directive_options,
    expand,
    parse_directives,
    run_files,
)
from isthmus.cli.live import common as live_common
from isthmus.cli.main import app

runner = CliRunner()
OPTIONS = directive_options(live_common.parse_time_limit, live_common.PRIORITIES)


SCRIPT = """#!/bin/sh
# a comment
#ISTHMUS --size 4 --time 10:00
#ISTHMUS -J nightly
#ISTHMUS --output=logs/out-%j.txt --priority low

echo "$ISTHMUS_NPROCS"
#ISTHMUS --size 99
"""


def test_directives_are_read_up_to_the_first_command() -> None:
    found = parse_directives(SCRIPT, "job.sh", OPTIONS)
    assert found == {"size": 4, "time": 600.0, "name": "nightly", "output": "logs/out-%j.txt", "priority": "low"}


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("#ISTHMUS --size abc", "job.sh:3: #ISTHMUS --size: expected a positive integer, got 'abc'"),
        ("#ISTHMUS -n 0", "job.sh:3: #ISTHMUS -n: expected a positive integer, got '0'"),
        ("#ISTHMUS --time soon", "job.sh:3: #ISTHMUS --time: expected minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM,"),
        ("#SBATCH --time=-5", "job.sh:3: #SBATCH --time: expected minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM,"),
        ("#ISTHMUS --partition gpu", "job.sh:3: unknown #ISTHMUS option '--partition'; valid: --size, --time,"),
        ("#ISTHMUS --priority urgent", "job.sh:3: #ISTHMUS --priority: expected one of super-high, high, low"),
        ("#ISTHMUS -o out-%N.txt", "job.sh:3: #ISTHMUS -o: 'out-%N.txt': unknown pattern '%N' (the node's"),
        ("#SBATCH -p gpu", "job.sh:3: unknown #SBATCH option '-p'; valid: --size, --time,"),
        ("#ISTHMUS --name", "job.sh:3: #ISTHMUS --name needs a value"),
    ],
)
def test_a_bad_directive_names_file_and_line(line: str, message: str) -> None:
    with pytest.raises(ScriptError) as info:
        parse_directives(f"#!/bin/sh\n\n{line}\necho\n", "job.sh", OPTIONS)
    assert str(info.value).startswith(message)


def test_templates() -> None:
    assert expand("/o/%j.out", 17) == "/o/17.out"
    assert expand("/o/100%%-%j", 3) == "/o/100%-3"
    for bad in ("/o/%N", "/o/%y", "/o/50%"):
        with pytest.raises(OutputTemplateError):
            check_template(bad)
    spec = {"output": "/o/out-%j"}
    assert run_files(spec, 5, "/spool/5", 2) == ("/o/out-5", "/o/out-5", True)  # stderr joins stdout
    assert run_files({"error": "/e/%j"}, 5, "/spool/5", 1) == ("/spool/5/run1.out", "/e/5", True)
    assert run_files({}, 5, "/spool/5", 3) == ("/spool/5/run3.out", "/spool/5/run3.err", False)


def test_submit_script_sends_its_text_and_directives(
    submitted: list[dict[str, Any]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "job.sh").write_text(SCRIPT)
    result = runner.invoke(app, ["submit", "job.sh", "arg1"])
    assert result.exit_code == 0, result.output
    assert result.stdout == "Submitted job 41\n"
    (spec,) = submitted
    assert spec["command"] == str(tmp_path / "job.sh") and spec["args"] == ["arg1"]
    assert spec["script"] == SCRIPT
    assert spec["size"] == 4 and spec["requested_runtime"] == 600.0 and spec["name"] == "nightly"
    assert spec["priority"] == "low"
    assert spec["output"] == str(tmp_path / "logs/out-%j.txt") and "error" not in spec


def test_command_line_overrides_directives(
    submitted: list[dict[str, Any]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "job.sh").write_text(SCRIPT)
    work = tmp_path / "work"
    args = ["submit", "-n", "2", "-t", "90", "-J", "adhoc", "--priority", "high", "-D", str(work)]
    result = runner.invoke(app, [*args, "-o", "o-%j", "-e", "/abs/e-%j", "job.sh"])
    assert result.exit_code == 0, result.output
    (spec,) = submitted
    # -t 90 is 90 minutes, as sbatch reads it
    assert (spec["size"], spec["requested_runtime"], spec["name"], spec["priority"]) == (2, 5400.0, "adhoc", "high")
    assert spec["cwd"] == str(work)
    assert spec["output"] == str(work / "o-%j") and spec["error"] == "/abs/e-%j"


def test_plain_command_is_not_a_script(submitted: list[dict[str, Any]], tmp_path: Path) -> None:
    result = runner.invoke(app, ["submit", "--", "echo", "hi"])
    assert result.exit_code == 0, result.output
    (spec,) = submitted
    assert spec["command"] == "echo" and "script" not in spec and spec["size"] == 1 and spec["priority"] == "high"


def test_bad_directive_exits_2_before_submitting(
    submitted: list[dict[str, Any]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.sh").write_text("#!/bin/sh\n#ISTHMUS --size 4\n#ISTHMUS --size many\ntrue\n")
    result = runner.invoke(app, ["submit", "bad.sh"])
    assert result.exit_code == 2
    assert result.stderr.strip() == "error: bad.sh:3: #ISTHMUS --size: expected a positive integer, got 'many'"
    assert submitted == []
    bad_output = runner.invoke(app, ["submit", "-o", "x-%N", "--", "true"])
    assert bad_output.exit_code == 2
    assert "--output: 'x-%N': unknown pattern '%N'" in bad_output.stderr


@pytest.mark.parametrize("bag", [False, True])
def test_env_options_are_sent_and_one_without_equals_exits_2(submitted: list[dict[str, Any]], bag: bool) -> None:
    what = ["--sweep", "echo {x}", "--param", "x=1..2"] if bag else ["--", "true"]
    if not bag:  # (the fake client takes jobs only; a bag's --env is checked before sending)
        result = runner.invoke(app, ["submit", "--export=NONE", "--env", "A=1", "--env", "B=x=y", *what])
        assert result.exit_code == 0, result.output
        assert submitted[-1]["env"] == {"A": "1", "B": "x=y"}
    result = runner.invoke(app, ["submit", "--env", "NOEQUALS", *what])
    assert result.exit_code == 2
    assert result.stderr.strip() == "error: --env expects KEY=VALUE, got 'NOEQUALS'"
    assert all("NOEQUALS" not in str(spec.get("env")) for spec in submitted)
