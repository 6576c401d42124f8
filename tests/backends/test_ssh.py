"""The SSH runner: quoting, error mapping, one master reused, a dead master restarted, options.

A fake ``ssh`` program (a Python script) stands in for OpenSSH: with ``-o ControlMaster=yes`` it is a master that
binds the control socket and records itself; otherwise it runs the remote command with ``sh -c``
if the control socket answers, and fails as ssh does (exit 255) if not. What it prints on a
failed login comes from a file beside it, so a test chooses ssh's answer.
"""

from __future__ import annotations

import os
import shlex
import signal
import sys
import time
from pathlib import Path

import pytest
from pydantic import ValidationError

from isthmus.backends.gridengine import GridEngineBatch, GridEngineOptions
from isthmus.backends.runner import (
    LOCAL,
    CommandFailedError,
    CommandNotFoundError,
    RemoteAuthError,
    RemoteHostKeyError,
    RemoteUnreachableError,
)
from isthmus.backends.slurm import SlurmBatch, SlurmOptions
from isthmus.backends.ssh import SshRunner, classify_ssh_failure

FAKE_SSH = r"""#!{python}
import os, socket, subprocess, sys, time
here = os.path.dirname(os.path.abspath(__file__))
args = sys.argv[1:]
opts = dict(a.split("=", 1) for a in (args[i + 1] for i, x in enumerate(args) if x == "-o") if "=" in a)
path = opts["ControlPath"]
with open(os.path.join(here, "calls"), "a") as f:
    f.write(repr(args) + "\n")
    f.write("ENV " + repr(sorted(os.environ)) + "\n")
if "ControlMaster=yes" in args:
    fail = os.path.join(here, "fail")
    if os.path.exists(fail):
        sys.stderr.write(open(fail).read())
        sys.exit(255)
    s = socket.socket(socket.AF_UNIX)
    s.bind(path)
    s.listen(8)
    with open(os.path.join(here, "masters"), "a") as f:
        f.write(f"{{os.getpid()}}\n")
    while True:
        c, _ = s.accept()
        c.close()
try:
    c = socket.socket(socket.AF_UNIX)
    c.connect(path)
    c.close()
except OSError:
    sys.stderr.write("ssh: connect to host proxy: Connection closed by UNKNOWN port 65535\n")
    sys.exit(255)
command = args[args.index("--") + 1]
sys.exit(subprocess.call(["sh", "-c", command]))
"""


@pytest.fixture
def fake(tmp_path: Path) -> Path:
    """A directory holding the fake ssh and its records."""
    prog = tmp_path / "ssh"
    prog.write_text(FAKE_SSH.format(python=sys.executable))
    prog.chmod(0o755)
    (tmp_path / "known_hosts").write_text("host ssh-ed25519 AAAA\n")
    return tmp_path


def runner(fake: Path, **kw: object) -> SshRunner:
    """An SSH runner that calls the fake ssh, with its socket beside it."""
    ctl = fake / "ctl"
    ctl.mkdir(exist_ok=True)
    return SshRunner(
        "alice@login",
        known_hosts=str(fake / "known_hosts"),
        ssh_program=str(fake / "ssh"),
        control_dir=str(ctl),
        connect_timeout=5,
        **kw,  # type: ignore[arg-type]
    )


def masters(fake: Path) -> list[int]:
    """The pids of every master the fake ssh started."""
    f = fake / "masters"
    return [int(x) for x in f.read_text().split()] if f.exists() else []


def test_one_master_serves_many_commands_and_arguments_arrive_unchanged(fake: Path) -> None:
    r = runner(fake, remote_env={"SLURM_CONF": "/etc/my slurm.conf"})
    try:
        tricky = ["a b", "$(touch pwned)", "it's", ";", "*", "--x=1,2"]
        for _ in range(5):
            out = r.run(["printf", "%s\\n", *tricky], timeout=10).stdout
            assert out.splitlines() == tricky
        assert not Path("pwned").exists()
        assert r.run(["sh", "-c", 'echo "$SLURM_CONF|$EXTRA"'], timeout=10, env={"EXTRA": "x y"}).stdout == (
            "/etc/my slurm.conf|x y\n"
        )
        assert r.run(["cat"], timeout=10, input_text="script\nbody\n").stdout == "script\nbody\n"
        assert len(masters(fake)) == 1 and r.masters_started == 1
    finally:
        r.close()


def test_the_manager_environment_and_user_config_stay_home(fake: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ISTHMUS_SECRET_TOKEN", "s3cret")
    monkeypatch.setenv("SSH_AUTH_SOCK", "/tmp/agent")
    r = SshRunner("alice@login", known_hosts=str(fake / "known_hosts"), ssh_program=str(fake / "ssh"), key="/keys/id")
    try:
        r.run(["true"], timeout=10)
        own = Path(r.control_path).parent
        assert own.is_dir() and own.stat().st_mode & 0o777 == 0o700
    finally:
        r.close()
    assert not own.exists()  # the socket's private directory goes with the master
    calls = (fake / "calls").read_text()
    assert "s3cret" not in calls and "ISTHMUS_SECRET_TOKEN" not in calls and "SSH_AUTH_SOCK" not in calls
    for opt in ("StrictHostKeyChecking=yes", f"UserKnownHostsFile={fake / 'known_hosts'}", "IdentityAgent=none"):
        assert opt in calls
    assert "'-F', 'none'" in calls and "'-i', '/keys/id'" in calls
    assert "ProxyCommand=false" in calls  # a command never opens a connection of its own
    assert "'-M'" not in calls  # -M with ControlMaster=yes would make the master ask before each session


def test_a_dead_master_is_started_again_before_the_next_command(fake: Path) -> None:
    r = runner(fake)
    try:
        r.run(["true"], timeout=10)
        first = r.master_pid
        assert first is not None
        os.kill(first, signal.SIGKILL)
        deadline = time.monotonic() + 5
        while r.master_alive() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert r.run(["echo", "again"], timeout=10).stdout == "again\n"
        assert r.masters_started == 2 and len(masters(fake)) == 2 and r.master_pid != first
    finally:
        r.close()
    assert r.master_pid is None


def test_command_failures_are_the_commands_own(fake: Path) -> None:
    r = runner(fake)
    try:
        with pytest.raises(CommandFailedError) as failed:
            r.run(["sh", "-c", "echo boom >&2; exit 3"], timeout=10)
        assert failed.value.returncode == 3 and "boom" in str(failed.value)
        assert r.run(["sh", "-c", "exit 3"], timeout=10, check=False).returncode == 3
        with pytest.raises(CommandNotFoundError):
            r.run(["no-such-lrm-command-here"], timeout=10)
    finally:
        r.close()


@pytest.mark.parametrize(
    ("stderr", "kind"),
    [
        ("Host key verification failed.\n", RemoteHostKeyError),
        ("@@@ REMOTE HOST IDENTIFICATION HAS CHANGED! @@@\nHost key verification failed.\n", RemoteHostKeyError),
        ("alice@login: Permission denied (publickey).\n", RemoteAuthError),
        ("ssh: connect to host login port 22: Connection refused\n", RemoteUnreachableError),
        ("ssh: Could not resolve hostname login: Name or service not known\n", RemoteUnreachableError),
    ],
)
def test_ssh_failures_are_typed(fake: Path, stderr: str, kind: type[Exception]) -> None:
    (fake / "fail").write_text(stderr)
    r = runner(fake)
    with pytest.raises(kind) as err:
        r.run(["sinfo"], timeout=10)
    assert stderr.strip().splitlines()[-1] in str(err.value)
    assert classify_ssh_failure(stderr, "x", None).__class__ is kind


def test_no_known_hosts_file_no_connection(fake: Path) -> None:
    r = SshRunner("alice@login", known_hosts=str(fake / "missing"), ssh_program=str(fake / "ssh"))
    with pytest.raises(RemoteHostKeyError, match="ssh-keyscan"):
        r.run(["sinfo"], timeout=10)
    assert masters(fake) == []


def test_slurm_maps_ssh_failures_to_site_errors(fake: Path) -> None:
    from isthmus.backends.errors import AuthenticationError, TransientError

    (fake / "fail").write_text("alice@login: Permission denied (publickey).\n")
    batch = SlurmBatch("s1", "m1", runner=runner(fake))
    with pytest.raises(AuthenticationError, match="Permission denied"):
        batch.capacity()
    (fake / "fail").write_text("ssh: connect to host login port 22: Connection refused\n")
    with pytest.raises(TransientError, match="Connection refused"):
        batch.capacity()
    ge = GridEngineBatch("g1", "m1", runner=runner(fake))
    with pytest.raises(TransientError, match="Connection refused"):
        ge.capacity()
    (fake / "fail").write_text("Host key verification failed.\n")
    with pytest.raises(AuthenticationError, match="host key"):
        ge.capacity()


def test_options_validate_the_login_host() -> None:
    opts = SlurmOptions.model_validate(
        {"ssh": "alice@login.example.org", "known_hosts": "/etc/isthmus/kh", "remote_env": {"SLURM_CONF": "/x"}}
    )
    r = opts.runner()
    assert isinstance(r, SshRunner) and r.remote_env == {"SLURM_CONF": "/x"} and r.port == 22
    assert SlurmOptions.model_validate({}).runner() is LOCAL
    assert SlurmBatch.open("s", "m", opts).runner.__class__ is SshRunner
    for bad, needle in (
        ({"ssh": "alice@login"}, "known_hosts"),
        ({"ssh": "-oProxyCommand=x@h", "known_hosts": "/k"}, "user@host"),
        ({"ssh": "login", "known_hosts": "/k"}, "user@host"),
        ({"known_hosts": "/k"}, "without ssh"),
        ({"remote_env": {"A": "1"}}, "without ssh"),
        ({"ssh": "a@h", "known_hosts": "/k", "remote_env": {"A B": "1"}}, "environment variable names"),
        ({"ssh": "a@h", "known_hosts": "/k", "ssh_port": 0}, "ssh_port"),
    ):
        with pytest.raises(ValidationError, match=needle):
            SlurmOptions.model_validate(bad)
    # a Slurm key on a Grid Engine site is refused; the login host keys are the same for both
    with pytest.raises(ValidationError, match="partition"):
        GridEngineOptions.model_validate({"ssh": "a@h", "known_hosts": "/k", "partition": "debug"})
    assert GridEngineOptions.model_validate({"ssh": "a@h", "known_hosts": "/k"}).ssh == "a@h"


def test_remote_command_is_one_quoted_line() -> None:
    r = SshRunner("a@h", known_hosts="/k", remote_env={"SLURM_CONF": "/a b"})
    line = r.remote_command(["sbatch", "--comment=isthmus:m:k 1"], {"X": "$HOME"})
    assert shlex.split(line) == ["env", "SLURM_CONF=/a b", "X=$HOME", "sbatch", "--comment=isthmus:m:k 1"]
    assert "'X=$HOME'" in line


def test_an_environment_file_names_a_login_host_and_the_server_needs_only_ssh_here(
    fake: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from isthmus.config import ConfigError, environment_from_text
    from isthmus.server.main import check_batch_commands

    site = """
name = "e"
[[sites]]
name = "far"
nodes = 2
cores_per_node = 2
[sites.lrm]
driver = "%s"
mode = "direct"
ssh = "alice@login.example.org"
ssh_port = 2222
known_hosts = "/etc/isthmus/known_hosts"
remote_env = { SLURM_CONF = "/opt/slurm/etc/slurm.conf" }
"""
    env = environment_from_text(site % "slurm", "toml")
    options = env.sites[0].lrm.driver_options  # type: ignore[union-attr]
    assert isinstance(options, SlurmOptions) and options.ssh_port == 2222
    assert options.remote_env == {"SLURM_CONF": "/opt/slurm/etc/slurm.conf"}
    monkeypatch.setenv("PATH", str(fake))  # ssh here, no sbatch: the LRM's commands are on the login host
    check_batch_commands(env)
    monkeypatch.setenv("PATH", str(fake / "ctl"))
    with pytest.raises(ValueError, match="ssh is not on PATH"):
        check_batch_commands(env)
    with pytest.raises(ConfigError, match="known_hosts"):
        environment_from_text((site % "gridengine").replace('known_hosts = "/etc/isthmus/known_hosts"\n', ""), "toml")


def test_threads_share_one_master(fake: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    r = runner(fake)
    try:
        with ThreadPoolExecutor(4) as pool:
            outs = list(pool.map(lambda i: r.run(["echo", str(i)], timeout=10).stdout, range(8)))
        assert outs == [f"{i}\n" for i in range(8)]
        assert r.masters_started == 1 and len(masters(fake)) == 1
    finally:
        r.close()
