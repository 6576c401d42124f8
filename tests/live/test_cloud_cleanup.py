"""`isthmus cloud cleanup` against a local EC2-compatible server: instances tagged with this
manager's id that its database does not know are listed, then terminated; known ones and other
managers' are left alone; after a lost database `--all-of-this-manager` takes them all."""

from __future__ import annotations

import json
from pathlib import Path

from cloudkit import AMI, ec2_client
from sqlalchemy import insert
from test_live_cloud import ENV
from typer.testing import CliRunner

from isthmus.cli.main import app
from isthmus.store.tables import Store, sqlite_url, vms


def _lease(endpoint: str, manager: str, key: str) -> str:
    tags = [{"Key": "isthmus-manager", "Value": manager}, {"Key": "isthmus-vm", "Value": key}]
    return str(
        ec2_client(endpoint).run_instances(
            ImageId=AMI,
            MinCount=1,
            MaxCount=1,
            InstanceType="t2.micro",
            TagSpecifications=[{"ResourceType": "instance", "Tags": tags}],
        )["Instances"][0]["InstanceId"]
    )


def _states(endpoint: str) -> dict[str, str]:
    reservations = ec2_client(endpoint).describe_instances()["Reservations"]
    return {i["InstanceId"]: i["State"]["Name"] for r in reservations for i in r["Instances"]}


def test_cleanup_terminates_the_instances_of_this_manager_its_database_does_not_know(
    tmp_path: Path, endpoint: str
) -> None:
    env = tmp_path / "env.toml"
    env.write_text(ENV.format(ami=AMI, endpoint=endpoint, boot_timeout=20))
    state = tmp_path / "state"
    state.mkdir()
    store = Store(sqlite_url(state / "isthmus.db"))
    store.create()
    known = _lease(endpoint, "abc123", "1/vm0")
    by_key = _lease(endpoint, "abc123", "1/vm1")  # recorded, its lease answer lost: claimed by its key
    stray = _lease(endpoint, "abc123", "1/vm7")
    other = _lease(endpoint, "fff999", "1/vm7")  # another manager's
    with store.begin() as conn:
        store.set_meta(conn, "manager_id", "abc123")
        for vm, pid in ((0, known), (1, None)):
            conn.execute(insert(vms).values(site=1, vm=vm, state="ready", cores=1, leased_at=0.0, provider_id=pid))
    store.close()
    args = ["cloud", "cleanup", "--env", str(env), "--state-dir", str(state)]

    listed = CliRunner().invoke(app, [*args, "--dry-run", "--json"])
    assert listed.exit_code == 0, listed.output
    rows = json.loads(listed.output)
    assert [(r["provider_id"], r["key"], r["outcome"]) for r in rows] == [(stray, "1/vm7", "dry run")]
    assert set(_states(endpoint).values()) == {"running"}

    done = CliRunner().invoke(app, args)
    assert done.exit_code == 0 and stray in done.output and "terminated" in done.output, done.output
    states = _states(endpoint)
    assert states[stray] == "terminated"
    assert {states[known], states[by_key], states[other]} == {"running"}
    again = CliRunner().invoke(app, args)
    assert again.exit_code == 0 and "no unknown instance of manager abc123" in again.output, again.output

    # a lost database: every instance of the manager, known or not; never another manager's
    lost = CliRunner().invoke(app, ["cloud", "cleanup", "--env", str(env), "--all-of-this-manager", "abc123"])
    assert lost.exit_code == 0, lost.output
    states = _states(endpoint)
    assert states[known] == states[by_key] == "terminated" and states[other] == "running"
