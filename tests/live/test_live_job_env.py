"""No credential in any job's environment: a manager whose own environment holds a peer secret,
cloud keys, tokens and an operator's variable runs jobs on every kind of site (a local cluster,
an EC2 cloud whose VMs boot pilots, Slurm pilots, Slurm direct), each job dumping its whole
environment; no job variable holds any secret the manager holds, and every variable is one the
job's environment is documented to have (docs/live.md, "What a job sees")."""

from __future__ import annotations

import json
import os
import pwd
import secrets
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cloudkit import AMI, VmPlayer, ec2_client
from livekit import LiveServer, wait_state

from isthmus.agent.jobenv import DEFAULTS

PEERS = """
[[peers]]
name = "B"
address = "http://127.0.0.1:9"
role = "both"
token_env = "ISTHMUS_PEER_SECRET_AB"
"""

SITES = {
    "local": """
[[sites]]
name = "here"
nodes = 1
cores_per_node = 2
""",
    "ec2": """
[[sites]]
name = "ec2"
kind = "cloud"
max_vms = 1
cores_per_node = 2
boot_time = 0.5
shutdown_time = 0
price_per_hour = 0.065
billing_increment = 60
idle_release_time = 30
[sites.provider]
driver = "ec2"
image = "{ami}"
instance_type = "t2.micro"
endpoint = "{endpoint}"
key_env = "ISTHMUS_TEST_EC2_KEY"
secret_env = "ISTHMUS_TEST_EC2_SECRET"
boot_timeout = 60
""",
    "slurm-pilots": """
[[sites]]
name = "fs1"
nodes = 1
cores_per_node = 2
[sites.lrm]
driver = "slurm"
config = "{conf}"
poll_interval = 0.3
""",
    "slurm-direct": """
[[sites]]
name = "fs1"
nodes = 1
cores_per_node = 2
[sites.lrm]
driver = "slurm"
mode = "direct"
config = "{conf}"
poll_interval = 0.3
""",
}

DUMP = "import json, os; print(json.dumps(dict(os.environ)))"


@pytest.mark.parametrize("kind", list(SITES))
def test_no_secret_of_the_manager_reaches_a_job(
    kind: str, tmp_path: Path, tag: str, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    held = {
        "ISTHMUS_PEER_SECRET_AB": "peer-" + secrets.token_hex(16),
        "ISTHMUS_TEST_EC2_KEY": "key-" + secrets.token_hex(16),
        "ISTHMUS_TEST_EC2_SECRET": "secret-" + secrets.token_hex(16),
        "ISTHMUS_TOKEN": "token-" + secrets.token_hex(16),
        "ISTHMUS_PILOT_TOKEN": "pilot-" + secrets.token_hex(16),
        "OPERATOR_SECRET": "operator-" + secrets.token_hex(16),
    }
    conf = request.getfixturevalue("slurm_conf") if kind.startswith("slurm") else ""
    endpoint = request.getfixturevalue("endpoint") if kind == "ec2" else ""
    for name, value in held.items():  # the manager's environment (LiveServer passes this process's on)
        monkeypatch.setenv(name, value)
    env_file = tmp_path / "env.toml"
    env_file.write_text(
        f'name = "secrets"\nround_interval = "event"\n{SITES[kind].format(conf=conf, ami=AMI, endpoint=endpoint)}'
        '[policies]\nallocation = "ff"\nprovisioning = "on-demand"\n' + PEERS
    )
    server = LiveServer(env_file, tmp_path / "state", f"sqlite:///{tmp_path / 'db.sqlite'}", tag).start()
    player = VmPlayer(endpoint, tmp_path / "vms", tag) if kind == "ec2" else None
    try:
        if player is not None:
            player.__enter__()
        with server.client() as c:
            user_token = c.create_token("alice")["token"]
            secrets_held = [*held.values(), server.admin_token, user_token]
            ids = [
                c.submit(command=sys.executable, args=["-c", DUMP], env={"ASKED_FOR": f"by-job-{i}"}, size=1)
                for i in range(2)
            ]
            envs: list[dict[str, str]] = []
            for jid in ids:
                job = wait_state(c, jid, ("completed", "failed"), timeout=120)
                out, _ = c.output(jid)
                assert job["state"] == "completed", (job, out)
                envs.append(json.loads(out.strip().splitlines()[-1]))
        if kind == "ec2":  # the VM pilot's token is in its user data: no job has it either
            ec2 = ec2_client(endpoint)
            for inst in [i for r in ec2.describe_instances()["Reservations"] for i in r["Instances"]]:
                data = ec2.describe_instance_attribute(InstanceId=inst["InstanceId"], Attribute="userData")
                script = _b64(data["UserData"]["Value"])
                secrets_held.append(script.split("\n")[-3])
    finally:
        if player is not None:
            player.__exit__(None, None, None)
        server.stop()
    seen = [(i, k) for i, env in enumerate(envs) for k, v in env.items() for s in secrets_held if s and s in v]
    assert seen == [], f"secrets in jobs' variables: {seen}"
    for i, env in enumerate(envs):
        assert env["ASKED_FOR"] == f"by-job-{i}"  # what the user asked for
        assert env["ISTHMUS_JOB_ID"] == str(ids[i]) and env["ISTHMUS_TAG"] == tag
        assert env.get("PATH") and env.get("HOME")
        # Slurm in direct mode loads the account's login environment when --export lists variables
        login = _login_environment() | {"HOSTNAME"} if kind == "slurm-direct" else set()
        extra = sorted(k for k in env if not _documented(k) and k not in login)
        assert extra == [], f"{kind}: variables no one asked for: {extra}"


def _login_environment() -> set[str]:
    """The names the account's login shell defines (what Slurm loads for a job run as it)."""
    user = pwd.getpwuid(os.getuid()).pw_name
    out = subprocess.run(["su", "-", user, "-c", "env"], capture_output=True, text=True, check=False).stdout
    return {line.split("=", 1)[0] for line in out.splitlines() if "=" in line}


def _documented(name: str) -> bool:
    """What a job's environment may hold: the defaults, what the user asked for, the job's
    ISTHMUS_* variables, and what the batch system or the shell adds to every process."""
    return (
        name in DEFAULTS
        or name == "ASKED_FOR"
        or name.startswith(("ISTHMUS_JOB", "ISTHMUS_RUN", "ISTHMUS_NODEFILE", "ISTHMUS_PILOT_NODE"))
        or name in ("ISTHMUS_TAG", "ISTHMUS_NPROCS", "ISTHMUS_SLOTS", "ISTHMUS_HOSTS", "ISTHMUS_SITE")
        or name.startswith(("SLURM_", "SLURMD_"))
        or name in ("PWD", "SHLVL", "_", "OLDPWD", "ENVIRONMENT")
        or name.startswith("LC_")
    )


def _b64(value: Any) -> str:
    import base64

    return base64.b64decode(value).decode()
