"""The Unix accounts jobs run as: looking them up, checking the mapping, and what they may write.

The environment file's ``[users]`` table names, for each isthmus user, the Unix account its
jobs run as (``map``), or one account for all (``run_as``). A pilot running as root switches
to that account in the child before the job's program starts (setgid, setgroups, setuid);
a pilot that is not root runs only jobs mapped to its own account. The manager checks the
mapping at start (`check_users`) and each submission's output paths (`write_problem`).

Only the standard library is used here: pilots import it on machines where nothing but
isthmus's agent is installed.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import stat
from collections.abc import Callable, Mapping
from dataclasses import dataclass


class AccountError(LookupError):
    """An account that does not exist here, or that jobs must never run as; the message says which."""


@dataclass(frozen=True, slots=True)
class Account:
    """A Unix account as this machine knows it: name, uid, primary gid and every group it is in."""

    name: str
    uid: int
    gid: int
    groups: tuple[int, ...]
    home: str


def lookup(name: str) -> Account:
    """The account called `name` on this machine; AccountError when there is none."""
    try:
        pw = pwd.getpwnam(name)
    except KeyError:
        raise AccountError(f"no Unix account {name!r} on this machine") from None
    try:
        groups = tuple(sorted(set(os.getgrouplist(name, pw.pw_gid))))
    except OSError:
        groups = (pw.pw_gid,)
    return Account(name, pw.pw_uid, pw.pw_gid, groups, pw.pw_dir)


def own_name() -> str:
    """The name of the account this process runs as (its uid in digits when it has no name)."""
    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        return str(os.geteuid())


def check_account(name: str, *, manager_uid: int) -> Account:
    """The account `name`, refused (AccountError) when it does not exist, is root (uid 0) or is
    the manager's own user (`manager_uid`): a job must never hold the manager's rights."""
    account = lookup(name)
    if account.uid == 0:
        raise AccountError(f"{name!r} is root (uid 0): jobs never run as root")
    if account.uid == manager_uid:
        raise AccountError(f"{name!r} is the manager's own user (uid {manager_uid}): jobs never run as it")
    return account


def check_users(run_as: str | None, accounts: Mapping[str, str], *, manager_uid: int | None = None) -> None:
    """ValueError naming the field (``users.run_as``, ``users.map.NAME``) of the first account of
    an environment's ``[users]`` table that `check_account` refuses on this machine."""
    uid = os.geteuid() if manager_uid is None else manager_uid
    fields = ([("users.run_as", run_as)] if run_as else []) + [(f"users.map.{u}", a) for u, a in accounts.items()]
    for where, name in fields:
        try:
            check_account(name, manager_uid=uid)
        except AccountError as exc:
            raise ValueError(f"environment file: {where}: {exc}") from None


def _allows(st: os.stat_result, account: Account, bits: int) -> bool:
    """Whether the mode bits of `st` grant `account` all of `bits` (a mask of the owner's bits,
    e.g. ``stat.S_IWUSR | stat.S_IXUSR``), as the kernel judges it without ACLs."""
    if account.uid == 0:
        return True
    mode = st.st_mode
    if st.st_uid == account.uid:
        granted = mode & 0o700
    elif st.st_gid in account.groups:
        granted = (mode & 0o070) << 3
    else:
        granted = (mode & 0o007) << 6
    return granted & bits == bits


def write_problem(path: str, account: Account) -> str | None:
    """Why `account` may not write file `path` (an absolute path), or None when it may: every
    directory on the way must let it pass, and the file must let it write, or, when the file does
    not exist yet, its directory must let it create it. A directory missing on this machine is
    not judged (the file may be on a machine the run goes to). Mode bits only: an ACL granting
    more than they do is not seen."""
    if path == "/dev/null":
        return None
    parent = os.path.dirname(os.path.abspath(path))
    walked = "/"
    for part in [p for p in parent.split("/") if p]:
        try:
            st = os.stat(walked)
        except OSError:
            return None
        if not _allows(st, account, stat.S_IXUSR):
            return f"{account.name} may not enter {walked}"
        walked = os.path.join(walked, part)
    try:
        st = os.stat(walked)
    except OSError:
        return None
    if not stat.S_ISDIR(st.st_mode):
        return None  # the type problem is reported by the output-path check
    if not _allows(st, account, stat.S_IXUSR):
        return f"{account.name} may not enter {walked}"
    try:
        target = os.stat(path)
    except FileNotFoundError:
        if not _allows(st, account, stat.S_IWUSR | stat.S_IXUSR):
            return f"{account.name} may not create files in {walked}"
        return None
    except OSError:
        return None
    if stat.S_ISREG(target.st_mode) and not _allows(target, account, stat.S_IWUSR):
        return f"{account.name} may not write {path}"
    return None


def own_dir(path: str, account: Account, make: Callable[[str], None] | None = None) -> None:
    """Make directory `path` the private directory of `account` (mode 700), creating it if
    missing (with `make` when given, else with its parents). Never through a link: a directory
    inside one the account owns may have been replaced by one."""
    if make is not None:
        make(path)
    else:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with contextlib.suppress(FileExistsError):
            os.mkdir(path, 0o700)
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if (st.st_uid, st.st_gid) != (account.uid, account.gid):
            os.fchown(fd, account.uid, account.gid)
        if stat.S_IMODE(st.st_mode) != 0o700:
            os.fchmod(fd, 0o700)
    finally:
        os.close(fd)


def create_for(path: str, data: bytes, mode: int, account: Account) -> None:
    """Write `data` to a new file `path` owned by `account`, replacing what is there without ever
    writing through it (the directory is the account's: it may have left a link to a file of
    root's there)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, mode)
    except FileExistsError:
        os.unlink(path)  # the name only: a link is removed, not followed
        fd = os.open(path, flags, mode)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fchown(fd, account.uid, account.gid)
        os.fchmod(fd, mode)
    finally:
        os.close(fd)
