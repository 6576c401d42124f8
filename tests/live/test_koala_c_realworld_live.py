"""KOALA-C's real-world experiment run live end to end: `isthmus experiment
koala-c-realworld` on a real Slurm cluster site, a site of local pilots and two clouds leased
through Libcloud from a local EC2-compatible server (two regions, each played by a VmPlayer),
a few jobs at a strong time compression; every job completes on every side, the figures and the
summary are written, and the runs resume without being repeated."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cloudkit import AMI, VmPlayer
from typer.testing import CliRunner

from isthmus.cli.main import app

ENV = """
name = "realworld-test"
round_interval = 30
[policies]
allocation = "ff"
provisioning = "on-demand"

[[sites]]
name = "fs1"
nodes = 4
cores_per_node = 2
[sites.lrm]
driver = "slurm"
mode = "direct"
config = "{conf}"
poll_interval = 0.3

[[sites]]
name = "fs2"
nodes = 2
cores_per_node = 2

[[sites]]
name = "one"
kind = "cloud"
cores_per_node = 1
max_vms = 4
boot_time = 60
shutdown_time = 10
billing_increment = 3600
idle_release_time = 300
[sites.provider]
driver = "ec2"
region = "us-east-1"
image = "{ami}"
instance_type = "t2.micro"
endpoint = "{endpoint}"
key_env = "ISTHMUS_TEST_EC2_KEY"
secret_env = "ISTHMUS_TEST_EC2_SECRET"
boot_timeout = 30

[[sites]]
name = "ec2"
kind = "cloud"
cores_per_node = 1
max_vms = 8
boot_time = 120
shutdown_time = 30
price_per_hour = 0.065
billing_increment = 3600
idle_release_time = 300
[sites.provider]
driver = "ec2"
region = "eu-west-1"
image = "{ami}"
instance_type = "t2.micro"
endpoint = "{endpoint}"
key_env = "ISTHMUS_TEST_EC2_KEY"
secret_env = "ISTHMUS_TEST_EC2_SECRET"
boot_timeout = 30

[[sets]]
name = "short"
sites = ["fs1", "fs2", "one", "ec2"]
runtime_limit = 600

[[sets]]
name = "long"
sites = ["fs2", "one", "ec2"]
"""


def test_the_realworld_experiment_runs_on_slurm_and_two_clouds(
    tmp_path: Path, tag: str, slurm_conf: str, endpoint: str
) -> None:
    env = tmp_path / "env.toml"
    env.write_text(ENV.format(conf=slurm_conf, ami=AMI, endpoint=endpoint))
    out = tmp_path / "out"
    scale = 1 / 3000
    args = ["experiment", "koala-c-realworld", "--env", str(env), "--jobs", "8", "--scale", "1/3000"]
    with (
        VmPlayer(endpoint, tmp_path / "one-vms", tag, region="us-east-1", boot_delay=60 * scale),
        VmPlayer(endpoint, tmp_path / "ec2-vms", tag, region="eu-west-1", boot_delay=120 * scale),
    ):
        result = CliRunner().invoke(app, [*args, "--repeat", "1", "-o", str(out)])
        assert result.exit_code == 0, result.output
        rows = [json.loads(line) for line in (out / "runs.jsonl").read_text().splitlines()]
        assert sorted((r["policy"], r["side"]) for r in rows) == sorted(
            (p, s) for p in ("ff", "sjf", "tags-sets") for s in ("simulated", "live")
        )
        for r in rows:
            assert r["completed"] == r["jobs"] > 0, r
            assert sum(r[f"site_{n}"] for n in ("fs1", "fs2", "one", "ec2")) == pytest.approx(1.0)
        ff_live = next(r for r in rows if r["policy"] == "ff" and r["side"] == "live")
        assert ff_live["site_fs1"] > 0  # FF fills the first site, here the Slurm cluster
        for name in ("fig7.png", "fig8.png", "fig9.png", "koala-c-realworld.csv", "summary.md"):
            assert (out / name).stat().st_size > 0
        summary = (out / "summary.md").read_text()
        assert "fs1 (8 processors, slurm direct)" in summary
        assert "Every job completes in every live run: **holds**" in summary

        # a second live run per policy resumes: the first ones are not repeated
        again = CliRunner().invoke(app, [*args, "--repeat", "2", "--resume", "-o", str(out)])
        assert again.exit_code == 0, again.output
        assert again.output.count("live run 1 of 2") == 0
        assert again.output.count("live run 2 of 2") == 3
        assert len((out / "runs.jsonl").read_text().splitlines()) == 9

        # resuming with another case is refused: runs of two cases are never mixed
        mixed = CliRunner().invoke(app, [*args[:4], "--jobs", "7", "--scale", "1/3000", "--resume", "-o", str(out)])
        assert mixed.exit_code == 2, mixed.output
        assert "holds runs of another case" in mixed.output
