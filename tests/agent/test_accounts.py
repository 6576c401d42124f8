"""The ``[users]`` table: what the file's models refuse (naming the key), what the manager refuses
at start on this machine (an unknown account, root, its own user, naming the field), and which
output paths a mapped account may write (refused at submission naming -o/-e)."""

from __future__ import annotations

import os
import pwd
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from isthmus.agent.accounts import Account, AccountError, check_account, check_users, write_problem
from isthmus.backends.jobfiles import OutputPathError, check_outputs
from isthmus.config import ConfigError, environment_from_text

BASE = 'name = "x"\n[[sites]]\nname = "a"\nnodes = 1\n'


def test_the_table_maps_users_and_falls_back_to_run_as() -> None:
    env = environment_from_text(BASE + '[users]\nrun_as = "nobody"\n[users.map]\nalice = "daemon"\n', "toml")
    assert env.users is not None
    assert (env.users.account_of("alice"), env.users.account_of("bob")) == ("daemon", "nobody")
    only_map = environment_from_text(BASE + '[users.map]\nalice = "daemon"\n', "toml")
    assert only_map.users is not None and only_map.users.account_of("bob") is None
    assert environment_from_text(BASE, "toml").users is None


@pytest.mark.parametrize(
    ("table", "path", "words"),
    [
        ("[users]\n", "users", "set run_as"),
        ('[users]\nrun_as = "no body"\n', "users.run_as", "Unix account name"),
        ('[users.map]\nalice = "-x"\n', "users.map.alice", "Unix account name"),
        ('[users]\nrunas = "nobody"\n', "users.runas", "did you mean 'run_as'"),
    ],
)
def test_the_file_refuses_bad_tables_naming_the_key(table: str, path: str, words: str) -> None:
    with pytest.raises(ConfigError) as caught:
        environment_from_text(BASE + table, "toml")
    assert caught.value.path == path and words in caught.value.message, str(caught.value)


def test_the_manager_refuses_unknown_root_and_its_own_accounts_naming_the_field() -> None:
    daemon = pwd.getpwnam("daemon").pw_uid
    check_users("nobody", {"alice": "daemon"}, manager_uid=12345)  # both exist, neither is root nor uid 12345
    for run_as, accounts, field, words in [
        ("no-such-account-here", {}, "users.run_as", "no Unix account 'no-such-account-here'"),
        (None, {"alice": "root"}, "users.map.alice", "is root"),
        ("nobody", {"bob": "daemon"}, "users.map.bob", "the manager's own user"),
    ]:
        with pytest.raises(ValueError, match=rf"^environment file: {field}: .*{words}"):
            check_users(run_as, accounts, manager_uid=daemon)
    with pytest.raises(AccountError, match="jobs never run as"):  # root, or the user running the tests
        check_account(pwd.getpwuid(os.geteuid()).pw_name, manager_uid=os.geteuid())


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A directory everyone may enter (pytest's own are private to the user running it)."""
    path = Path(tempfile.mkdtemp(prefix="isthmus-accounts-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path)


def test_what_an_account_may_write_follows_the_mode_bits(open_dir: Path) -> None:
    base = open_dir
    other = Account("other", 54321, 54321, (54321,), "/")
    member = Account("member", 54322, 54322, (54322, os.stat(base).st_gid), "/")
    assert write_problem(str(base / "new.out"), other) == f"other may not create files in {base}"
    assert write_problem(str(base / "new.out"), member) == f"member may not create files in {base}"
    base.chmod(0o775)  # the group may create files: its members may, others still not
    assert write_problem(str(base / "new.out"), member) is None
    assert write_problem(str(base / "new.out"), other) == f"other may not create files in {base}"
    (base / "exists.out").write_text("")
    (base / "exists.out").chmod(0o644)
    assert write_problem(str(base / "exists.out"), other) == f"other may not write {base / 'exists.out'}"
    (base / "exists.out").chmod(0o666)
    assert write_problem(str(base / "exists.out"), other) is None
    shut = base / "shut"
    shut.mkdir(mode=0o700)
    (shut / "inner").mkdir()
    assert write_problem(str(shut / "inner" / "x"), other) == f"other may not enter {shut}"
    assert write_problem(str(base / "missing" / "x"), other) is None  # not judged here: maybe on another machine
    assert write_problem("/dev/null", other) is None
    with pytest.raises(OutputPathError) as caught:
        check_outputs({"output": str(base / "exists.out"), "error": str(shut / "%j.err")}, 7, other)
    assert caught.value.field == "error" and str(caught.value) == f"error: other may not enter {shut}"
    check_outputs({"output": str(base / "exists.out")}, 7, other)
