"""Jobs run as the Unix accounts their users map to, and reach nothing of the manager's or of
another user's (docs/security.md, "Running jobs as their users").

One live manager, running as root, with a local site and ``[users.map]`` sending alice's jobs to
one fresh account and bob's to another (made with useradd for this test, removed after it). While
bob's job runs, alice's job tries to read and write the database, to read the admin token, the
pilot's memory and environment and bob's output file and spool directory, and to signal bob's job's process group
and the pilot: its own output, read through the API, shows that each fails, and that it ran as
its account (``id -u``). The state directory's modes, submissions refused at once (a user
without an account, an output path the account may not write) and a run whose output directory
its account cannot use (it fails with the reason) are checked on the same manager.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from livekit import LiveServer, tagged_pids, wait_for, wait_state

from isthmus.live.client import ApiError
from isthmus.live.launch import kill_tagged

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("useradd") is None,
    reason="switching jobs to other accounts needs root and useradd (CI runs as root)",
)

ENV = """
name = "privsep"
round_interval = "event"
[[sites]]
name = "c1"
nodes = 1
cores_per_node = 3
[policies]
allocation = "fcfs"
provisioning = "none"
fairshare = "sep"
[users.map]
alice = "{a}"
bob = "{b}"
"""

PROBE = r"""
id -u
for f in "$DB" "$TOKEN"; do
  if cat "$f" >/dev/null 2>&1; then echo "read $f: YES"; else echo "read $f: denied"; fi
done
if (echo x >>"$DB") 2>/dev/null; then echo "write db: YES"; else echo "write db: denied"; fi
for f in "/proc/$PILOT/mem" "/proc/$PILOT/environ" "$BOBOUT"; do
  if (exec 3<"$f") 2>/dev/null; then echo "open $f: YES"; else echo "open $f: denied"; fi
done
if (exec 3</proc/self/mem) 2>/dev/null; then echo "own memory: opened"; fi
if (echo x >>"$BOBOUT") 2>/dev/null; then echo "write bob: YES"; else echo "write bob: denied"; fi
if kill -TERM -- "-$BOBGROUP" 2>/dev/null; then echo "kill bob: YES"; else echo "kill bob: denied"; fi
if kill -0 "$PILOT" 2>/dev/null; then echo "signal pilot: YES"; else echo "signal pilot: denied"; fi
ls "$STATE" >/dev/null 2>&1 && echo "list state: YES" || echo "list state: denied"
ls "$BOBSPOOL" >/dev/null 2>&1 && echo "list bob's spool: YES" || echo "list bob's spool: denied"
echo done
"""


@pytest.fixture
def accounts(tag: str) -> Iterator[tuple[str, str]]:
    """Two fresh system accounts (no home), removed once whatever ran as them is killed."""
    stem = uuid.uuid4().hex[:8]
    names = (f"isa{stem}", f"isb{stem}")
    made = []
    try:
        for name in names:
            subprocess.run(["useradd", "--system", "--no-create-home", name], check=True, capture_output=True)
            made.append(name)
        yield names
    finally:
        kill_tagged(tag)
        for name in made:
            subprocess.run(["userdel", name], check=False, capture_output=True)


def _uid(name: str) -> int:
    import pwd

    return pwd.getpwnam(name).pw_uid


def test_jobs_run_as_their_accounts_and_reach_nothing_else(tag: str, accounts: tuple[str, str]) -> None:
    a, b = accounts
    # a directory every account may enter (pytest's temporary directories are private to root)
    base = Path(tempfile.mkdtemp(prefix="isthmus-privsep-"))
    base.chmod(0o755)
    out_a, out_b = base / "out-a", base / "out-b"
    for d, name in ((out_a, a), (out_b, b)):
        d.mkdir(mode=0o700)
        os.chown(d, _uid(name), -1)
    env = base / "env.toml"
    env.write_text(ENV.format(a=a, b=b))
    state = base / "state"
    state.mkdir()
    db = state / "isthmus.db"
    server = LiveServer(env, state, f"sqlite:///{db}", tag)
    try:
        server.start()
        with server.client() as admin:
            tokens = {u: admin.create_token(u)["token"] for u in ("alice", "bob", "carol")}
        alice, bob, carol = (server.client(tokens[u]) for u in ("alice", "bob", "carol"))
        # the state is the manager's: 711 lets the accounts pass to their own spool directories only
        assert stat.S_IMODE(state.stat().st_mode) == 0o711
        assert stat.S_IMODE((state / "spool").stat().st_mode) == 0o711
        for f in (db, state / "admin.token"):
            assert stat.S_IMODE(f.stat().st_mode) == 0o600, f

        # refused at submission: a user with no account, a path the account may not write
        with pytest.raises(ApiError) as caught:
            carol.submit(command="true")
        assert caught.value.status == 403 and "no Unix account" in str(caught.value)
        for field in ("output", "error"):
            with pytest.raises(ApiError) as caught:
                alice.submit(command="true", **{field: str(out_b / "x.out")})
            assert caught.value.status == 400 and str(caught.value).endswith(f"{field}: {a} may not enter {out_b}")

        bob_out = out_b / "bob.out"
        victim = bob.submit(command="sh", args=["-c", "echo secret-of-bob; exec sleep 60"], output=str(bob_out))
        wait_state(bob, victim, ("running",), timeout=30)
        wait_for(lambda: bob_out.exists() and "secret-of-bob" in bob_out.read_text(), what="bob's output")
        assert bob_out.stat().st_uid == _uid(b)  # opened by the run, as bob's account
        mine = {p: os.stat(f"/proc/{p}") for p in tagged_pids(tag)}
        pilot = next(p for p in mine if b"isthmus.agent" in Path(f"/proc/{p}/cmdline").read_bytes())
        assert mine[pilot].st_uid == 0
        bob_group = next(os.getpgid(p) for p, st in mine.items() if st.st_uid == _uid(b))

        probe = alice.submit(
            command="sh",
            args=["-c", PROBE],
            env={
                "DB": str(db),
                "TOKEN": str(state / "admin.token"),
                "STATE": str(state),
                "PILOT": str(pilot),
                "BOBOUT": str(bob_out),
                "BOBGROUP": str(bob_group),
                "BOBSPOOL": str(state / "spool" / str(victim)),
            },
        )
        job = wait_state(alice, probe, ("completed", "failed"), timeout=30)
        text, _ = alice.output(probe)
        assert job["state"] == "completed", (job, text)
        lines = text.splitlines()
        assert lines[0] == str(_uid(a)) and lines[-1] == "done", text
        assert "own memory: opened" in lines  # the probe can tell an open that works
        assert not [line for line in lines if line.endswith("YES")], text
        assert len([line for line in lines if line.endswith("denied")]) == 11, text
        assert bob.job(victim)["state"] == "running"  # its group took no signal
        spool = state / "spool" / str(probe)
        assert (spool.stat().st_uid, stat.S_IMODE(spool.stat().st_mode)) == (_uid(a), 0o700)

        # a job may replace its output file by a link to a file of root's: the manager, reading it
        # as root, answers only files the job's account owns
        swap = alice.submit(
            command="sh",
            args=["-c", 'echo mine; rm -f run1.out; ln -s "$T" run1.out'],
            env={"T": str(state / "admin.token")},
        )
        assert wait_state(alice, swap, ("completed", "failed"), timeout=30)["state"] == "completed"
        assert (state / "spool" / str(swap) / "run1.out").is_symlink()
        with pytest.raises(ApiError) as caught:
            alice.output(swap)
        assert caught.value.status == 410 and server.admin_token not in str(caught.value)

        # a bag's tasks run as its user's account too
        bag = alice.submit_bag(tasks=["id -u", "cat /etc/shadow"])
        wait_for(lambda: alice.job(bag)["state"] in ("completed", "failed"), timeout=30, what="the bag's end")
        assert alice.task_output(bag, 0)[0] == f"{_uid(a)}\n"
        assert "Permission denied" in alice.task_output(bag, 1, stream="stderr")[0]

        # a directory missing at submission and made unusable for alice's account: the run fails,
        # saying why, as that account
        late = out_a / "late"
        failing = alice.submit(command="true", output=str(late / "x.out"))
        job = wait_state(alice, failing, ("completed", "failed"), timeout=30)
        assert job["state"] == "failed", job
        assert f"cannot open the output file {late / 'x.out'} as {a}" in job["history"][-1]["detail"], job
        bob.cancel(victim)
        wait_state(bob, victim, ("cancelled",), timeout=30)
    finally:
        server.stop()
        kill_tagged(tag)
        shutil.rmtree(base, ignore_errors=True)


SLURM_ENV = """
name = "privsep-slurm"
round_interval = "event"
[[sites]]
name = "pilots"
nodes = 1
cores_per_node = 2
[sites.lrm]
driver = "slurm"
config = "{conf}"
poll_interval = 0.3
[[sites]]
name = "direct"
nodes = 3
cores_per_node = 2
[sites.lrm]
driver = "slurm"
mode = "direct"
config = "{conf}"
poll_interval = 0.3
[policies]
allocation = "ff"
provisioning = "none"
[users.map]
alice = "{a}"
"""

PROBE_DB = 'id -u; if cat "$DB" >/dev/null 2>&1; then echo "read db: YES"; else echo "read db: denied"; fi; sleep 1'


def test_slurm_jobs_run_as_their_accounts(tag: str, accounts: tuple[str, str], slurm_conf: str) -> None:
    """On Slurm, as root: a pilot job (root on its node) switches to the job's account, and a
    direct-mode run is submitted with sbatch --uid/--gid of that account; either way the job runs
    as the account, which owns its spool directory and output, and cannot read the database. The
    first job fills the pilot site (first fit), the second goes to the direct-mode site."""
    a, _b = accounts
    base = Path(tempfile.mkdtemp(prefix="isthmus-privsep-"))
    base.chmod(0o755)
    env = base / "env.toml"
    env.write_text(SLURM_ENV.format(conf=slurm_conf, a=a))
    state = base / "state"
    state.mkdir()
    db = state / "isthmus.db"
    server = LiveServer(env, state, f"sqlite:///{db}", tag)
    try:
        server.start()
        with server.client() as admin:
            alice = server.client(admin.create_token("alice")["token"])
            # the pilot site's processors count once its pilot job runs and registers
            wait_for(lambda: next(x for x in admin.sites() if x["name"] == "pilots")["free"] == 2, timeout=60)
        jobs = [alice.submit(command="sh", args=["-c", PROBE_DB], env={"DB": str(db)}, size=2) for _ in range(2)]
        sites = set()
        for job_id in jobs:
            job = wait_state(alice, job_id, ("completed", "failed", "cancelled"), timeout=90)
            text, _ = alice.output(job_id)
            assert job["state"] == "completed", (job, text)
            assert text.splitlines() == [str(_uid(a)), "read db: denied"], text
            spool = state / "spool" / str(job_id)
            assert spool.stat().st_uid == _uid(a) and (spool / "run1.out").stat().st_uid == _uid(a)
            sites.add(job["site"])
        assert sites == {"pilots", "direct"}
    finally:
        server.stop()
        kill_tagged(tag)
        shutil.rmtree(base, ignore_errors=True)
