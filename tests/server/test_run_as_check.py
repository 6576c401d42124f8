"""`isthmus server` refuses, at start and naming the field, a ``[users]`` table it could not
honour: a site whose jobs would still run as the manager's user."""

from __future__ import annotations

import pytest

from isthmus.config import environment_from_text
from isthmus.server import main

USERS = '[users]\nrun_as = "nobody"\n'
LOCAL = 'name = "x"\n[[sites]]\nname = "here"\nnodes = 1\n'
DIRECT = 'name = "x"\n[[sites]]\nname = "hpc"\nnodes = 1\n[sites.lrm]\ndriver = "slurm"\nmode = "direct"\n'
CLOUD = (
    'name = "x"\n[[sites]]\nname = "vms"\nkind = "cloud"\nmax_vms = 1\n'
    '[sites.provider]\ndriver = "ec2"\nkey_env = "K"\nsecret_env = "S"\nimage = "ami-1"\ninstance_type = "t3.micro"\n'
)


def test_direct_mode_takes_users_on_slurm_only_and_as_root(monkeypatch: pytest.MonkeyPatch) -> None:
    main.check_run_as(environment_from_text(DIRECT, "toml"))  # no [users]: nothing to honour
    monkeypatch.setattr(main.os, "geteuid", lambda: 0)
    main.check_run_as(environment_from_text(DIRECT + USERS, "toml"))  # sbatch --uid/--gid
    grid = DIRECT.replace('"slurm"', '"gridengine"')
    with pytest.raises(ValueError, match=r"^environment file: users: site hpc runs each job as a gridengine job"):
        main.check_run_as(environment_from_text(grid + USERS, "toml"))
    monkeypatch.setattr(main.os, "geteuid", lambda: 54321)
    with pytest.raises(ValueError, match=r"^environment file: users: the pilots or jobs of site hpc run as"):
        main.check_run_as(environment_from_text(DIRECT + USERS, "toml"))


def test_pilots_of_the_managers_user_need_the_manager_to_be_root(monkeypatch: pytest.MonkeyPatch) -> None:
    env = environment_from_text(LOCAL + USERS, "toml")
    monkeypatch.setattr(main.os, "geteuid", lambda: 0)
    main.check_run_as(env)
    monkeypatch.setattr(main.os, "geteuid", lambda: 54321)
    with pytest.raises(ValueError, match=r"^environment file: users: the pilots or jobs of site here run as"):
        main.check_run_as(env)
    main.check_run_as(environment_from_text(CLOUD + USERS, "toml"))  # the image starts those pilots


def test_an_unknown_account_is_refused_naming_the_field() -> None:
    env = environment_from_text(LOCAL + '[users.map]\nalice = "no-such-account-x"\n', "toml")
    with pytest.raises(ValueError, match=r"^environment file: users\.map\.alice: no Unix account"):
        main.check_run_as(env)


def test_a_manager_without_users_is_told_its_jobs_can_read_its_state() -> None:
    said = main.shared_account_warning(environment_from_text(LOCAL, "toml"))
    assert said is not None and said.startswith("no [users] table: jobs of site here run as this manager's")
    assert main.shared_account_warning(environment_from_text(LOCAL + USERS, "toml")) is None
    assert main.shared_account_warning(environment_from_text(CLOUD, "toml")) is None  # VMs elsewhere
