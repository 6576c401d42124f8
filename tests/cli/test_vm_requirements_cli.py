"""VM requirements through the command line: `#ISTHMUS --vm-*` directives and `isthmus submit
--vm-*` options become the request's `vm` object; `isthmus simulate --vm` gives jobs
requirements and prints the jobs no site can match with the reason."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from isthmus.backends.jobfiles import ScriptError, directive_options, parse_directives, vm_options
from isthmus.cli.live import common as live_common
from isthmus.cli.main import app
from isthmus.model import VmRequirements
from isthmus.workloads.vm_requirements import parse_vm_rule

runner = CliRunner()
OPTIONS = directive_options(live_common.parse_time_limit, live_common.PRIORITIES)

SCRIPT = """#!/bin/sh
#ISTHMUS --vm-type big --vm-memory 8192 --vm-arch=x86_64
#ISTHMUS --vm-storage 20.5 --vm-network private --vm-image ami-1 --vm-cores 4
echo hi
"""


def test_vm_directives_are_the_requests_vm_object() -> None:
    found = parse_directives(SCRIPT, "job.sh", OPTIONS)
    assert vm_options(found) == {
        "vm_type": "big",
        "memory_mb": 8192,
        "cpu_arch": "x86_64",
        "storage_gb": 20.5,
        "network": "private",
        "image": "ami-1",
        "cores": 4,
    }


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("#ISTHMUS --vm-memory lots", "job.sh:2: #ISTHMUS --vm-memory: expected a positive integer, got 'lots'"),
        ("#ISTHMUS --vm-storage -1", "job.sh:2: #ISTHMUS --vm-storage: expected a number > 0, got '-1'"),
        ("#ISTHMUS --vm-type", "job.sh:2: #ISTHMUS --vm-type needs a value"),
    ],
)
def test_a_bad_vm_directive_names_file_and_line(line: str, message: str) -> None:
    with pytest.raises(ScriptError) as info:
        parse_directives(f"#!/bin/sh\n{line}\necho\n", "job.sh", OPTIONS)
    assert str(info.value) == message


def test_submit_sends_directives_and_options_override_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, submitted: list[dict[str, Any]]
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "job.sh").write_text(SCRIPT)
    result = runner.invoke(app, ["submit", "--vm-memory", "4096", "--vm-network", "public", "job.sh"])
    assert result.exit_code == 0, result.output
    (spec,) = submitted
    assert spec["vm"] == {
        "vm_type": "big",
        "memory_mb": 4096,
        "cpu_arch": "x86_64",
        "storage_gb": 20.5,
        "network": "public",
        "image": "ami-1",
        "cores": 4,
    }


def test_vm_rules_for_simulation() -> None:
    rule = parse_vm_rule("user=3:memory_mb=4096,cpu_arch=x86_64")
    assert (rule.user, rule.vm) == ("3", VmRequirements(cpu_arch="x86_64", memory_mb=4096))
    assert parse_vm_rule("storage_gb=1.5").vm == VmRequirements(storage_gb=1.5)
    for bad, fragment in [
        ("memory=4", "unknown key 'memory'"),
        ("cores=0", "cores expects an integer >= 1"),
        ("user=:cores=1", "user= needs a name"),
        ("", "no requirement given"),
    ]:
        with pytest.raises(ValueError, match=fragment):
            parse_vm_rule(bad)


ENV = """\
name = "typed"
round_interval = "event"

[policies]
provisioning = "on-demand"

[[sites]]
name = "cloud"
kind = "cloud"
max_vms = 4
boot_time = 60
networks = ["private"]

[[sites.instance_types]]
name = "small"
cores = 1
memory_mb = 2048
price_per_hour = 0.05

[[sites.instance_types]]
name = "big"
cores = 4
memory_mb = 16384
price_per_hour = 0.2
"""

SWF = """\
1 0 0 100 1 -1 -1 1 100 -1 1 1 1 -1 -1 -1 -1 -1
2 0 0 100 1 -1 -1 1 100 -1 1 2 1 -1 -1 -1 -1 -1
3 10 0 100 2 -1 -1 2 100 -1 1 2 1 -1 -1 -1 -1 -1
"""


def test_simulate_with_vm_rules_prints_refusals_and_leases_the_cheapest_type(tmp_path: Path) -> None:
    env, trace, out = tmp_path / "typed.toml", tmp_path / "w.swf", tmp_path / "out"
    env.write_text(ENV)
    trace.write_text(SWF)
    args = ["simulate", "-e", str(env), "-w", str(trace), "-p", "ff", "--no-plots", "-o", str(out)]
    result = runner.invoke(app, [*args, "--vm", "user=2:memory_mb=8000", "--vm", "user=1:memory_mb=64000"])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "ff: 1 of 3 jobs rejected, never run (1: no site can match its VM requirements (memory=64000 MB)" in text
    summary = json.loads((out / "ff.summary.json").read_text())
    # user 2's two jobs (1 and 2 processors, 8 GB): one big VM holds both, one hour at $0.20
    assert summary["jobs_completed"] == 2 and summary["jobs_rejected"] == 1
    assert summary["cost_charged"] == pytest.approx(0.2)
    bad = runner.invoke(app, [*args, "--vm", "ram=1"])
    assert bad.exit_code == 2 and "--vm: 'ram=1': unknown key 'ram'" in bad.stderr


def test_simulate_with_vm_share_reports_vm_hours_per_user(tmp_path: Path) -> None:
    env, trace, out = tmp_path / "share.toml", tmp_path / "w.swf", tmp_path / "out"
    env.write_text(ENV.replace('provisioning = "on-demand"', 'provisioning = "none"\nfairshare = "vm-share"'))
    trace.write_text(SWF)
    result = runner.invoke(
        app, ["simulate", "-e", str(env), "-w", str(trace), "-p", "ff", "--no-plots", "-o", str(out)]
    )
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "ff.summary.json").read_text())
    # No requirements: the cheapest type is small (a 2-processor job: two small VMs at $0.10 an
    # hour beat one big at $0.20). t=0: one small VM for each user (ready at 60). t=10: job 3 of
    # user 2 needs two more: user 2's share is 3 of 4, two VMs leased (ready at 70). Jobs 1 and 2
    # run 60-160, job 3 70-170; each VM is released when its user has no more work.
    # VM-hours: user 1: 0-160; user 2: 0-160 and twice 10-170.
    assert summary["vm_hours_by_user"] == pytest.approx({"1": 160 / 3600, "2": 480 / 3600})
    assert "VM-hours per user: 1 " in " ".join(result.output.split())
    wrong = runner.invoke(
        app, ["simulate", "-e", str(env), "-w", str(trace), "-p", "ff", "--provisioning", "startup", "-o", str(out)]
    )
    assert wrong.exit_code == 2 and "provisioning 'none' or 'on-demand', not 'startup'" in wrong.stderr


def test_the_commands_of_docs_clouds_print_the_figures_shown(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/clouds.md's two simulate examples, run as written, print the lines the page shows."""
    import re

    monkeypatch.chdir(tmp_path)
    doc = (Path(__file__).resolve().parents[2] / "docs" / "clouds.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```toml\n(.*?)```", doc, flags=re.S)
    typed = next(b for b in blocks if "instance_types" in b)
    policies = next(b for b in blocks if "vm-share" in b)
    (tmp_path / "typed.toml").write_text(typed)
    (tmp_path / "share.toml").write_text(
        re.sub(r"\[policies\]\n.*?\n\n", lambda _m: policies + "\n", typed, flags=re.S)
    )
    swf = re.search(r"cat > three.swf <<'SWF'\n(.*?)SWF\n", doc, flags=re.S)
    assert swf is not None
    (tmp_path / "three.swf").write_text(swf.group(1))
    shown = re.findall(r"```\n(│ ff .*?)```", doc, flags=re.S)
    commands = re.findall(r"^isthmus (simulate -e \S+ -w three.swf .*)$", doc, flags=re.M)
    assert len(commands) == len(shown) == 2
    for command, lines in zip(commands, shown, strict=True):
        args = [a.strip("'") for a in re.findall(r"'[^']*'|\S+", command)]
        result = runner.invoke(app, [*args, "-o", str(tmp_path / "out")], catch_exceptions=False)
        assert result.exit_code == 0, result.output
        printed = " ".join(result.output.split())
        for line in lines.strip().splitlines():
            for part in re.split(r"\s{2,}|│", line):
                assert part.strip() in printed, (part, result.output)


def test_validate_takes_vm_rules_and_names_a_bad_one(tmp_path: Path) -> None:
    # a bad rule is refused before anything starts (exit 2, naming the option); the rules themselves
    # are those of `simulate --vm` (tests/live/test_live_cloud_e2e.py runs requirements live)
    trace = tmp_path / "t.swf"
    trace.write_text("1 0 -1 10 1 -1 -1 1 10 -1 1 1 1 -1 1 -1 -1 -1\n")
    result = runner.invoke(app, ["validate", "-w", str(trace), "--vm", "memory_mb=lots", "-o", str(tmp_path / "o")])
    assert result.exit_code == 2 and "--vm:" in result.stderr and "memory_mb" in result.stderr, result.stderr
