"""The files of an SQLite store and the faults SQLite cannot turn into an error.

SQLite writes the database and its write-ahead log (`-wal`) with write(2): a file that refuses
writes gives an error, which the manager answers 503 for until a write works again. The WAL
index (`-shm`) is different: every connection maps it into memory and reads and writes it
there. Two changes to that file make the kernel kill the process with SIGBUS at the next
access, with no error SQLite could report:

- the file truncated below the size SQLite mapped (a page of the map past the file's end);
- the file marked immutable (`chattr +i`; the file system refuses the write fault of the map).

A change of mode (`chmod`) or a replaced file does not: the open descriptor and the map stay
valid. `ShmGuard` looks at the `-shm` file (without opening it: closing a descriptor of it
would drop this process's SQLite locks) before a connection is used: a truncated file is
extended back to the size seen (SQLite rebuilds the index from the WAL), an immutable one
makes the store refuse with `StoreUnavailableError` until the flag is removed. `start_problems`
is what the server checks before it opens a store: the files must belong to the manager's
user, be writable by nobody else and carry neither the immutable nor the append-only flag.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import stat
import struct
import threading
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("isthmus.store")

#: statx(2) attribute bits (linux/stat.h)
STATX_ATTR_IMMUTABLE = 0x10
STATX_ATTR_APPEND = 0x20
_AT_FDCWD = -100
_STATX_BASIC_STATS = 0x7FF

#: the companion files SQLite keeps beside a WAL database
SUFFIXES = ("", "-wal", "-shm")


class StoreUnavailableError(Exception):
    """The store refuses every use for now because using it could kill the process (the message
    says why and what lifts it); the manager answers 503 meanwhile."""


@dataclass(frozen=True)
class FileState:
    """What `file_state` saw of a file: its inode, size, owner, mode and protective flags."""

    ino: int
    size: int
    uid: int
    mode: int
    immutable: bool
    append_only: bool


def _libc_statx() -> ctypes._CFuncPtr | None:  # type: ignore[name-defined]
    try:
        fn = ctypes.CDLL(None, use_errno=True).statx
    except (OSError, AttributeError):
        return None
    fn.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_uint, ctypes.c_char_p)
    fn.restype = ctypes.c_int
    return fn


_STATX = _libc_statx()


def file_state(path: Path) -> FileState | None:
    """The file's state, None when it does not exist. Reads the immutable and append-only flags
    through statx(2) on Linux and st_flags elsewhere, without opening the file."""
    if _STATX is not None:
        buf = ctypes.create_string_buffer(256)
        if _STATX(_AT_FDCWD, os.fsencode(path), 0, _STATX_BASIC_STATS, buf) == 0:
            (attrs,) = struct.unpack_from("Q", buf, 8)
            uid, _gid, mode = struct.unpack_from("IIH", buf, 20)
            ino, size = struct.unpack_from("QQ", buf, 32)
            return FileState(ino, size, uid, mode, bool(attrs & STATX_ATTR_IMMUTABLE), bool(attrs & STATX_ATTR_APPEND))
        err = ctypes.get_errno()
        if err == 2:  # ENOENT
            return None
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    flags = getattr(st, "st_flags", 0)
    immutable = bool(flags & (stat.UF_IMMUTABLE | stat.SF_IMMUTABLE))
    append_only = bool(flags & (stat.UF_APPEND | stat.SF_APPEND))
    return FileState(st.st_ino, st.st_size, st.st_uid, st.st_mode, immutable, append_only)


def sqlite_file(url: str) -> Path | None:
    """The database file of an SQLite URL (None for another database or an in-memory one)."""
    if not url.startswith("sqlite"):
        return None
    _, _, rest = url.partition(":///")
    if not rest or rest.startswith(":memory:"):
        return None
    return Path(rest.split("?", 1)[0])


class ShmGuard:
    """Keeps this process from touching a `-shm` file that would kill it (see the module)."""

    def __init__(self, database: Path) -> None:
        self.shm = Path(f"{database}-shm")
        #: why the store refuses to be used, while it does; None while it may be used
        self.unsafe: str | None = None
        self._seen: tuple[int, int] = (0, 0)  # (inode, largest size seen)
        self._lock = threading.Lock()

    def check(self) -> None:
        """Before a connection is used: StoreUnavailableError while the `-shm` file is immutable;
        a `-shm` file shorter than seen before is extended back to that size first."""
        st = file_state(self.shm)
        with self._lock:
            if st is None:
                self._recovered()
                return
            if st.immutable:
                reason = (
                    f"{self.shm} is immutable (chattr +i): SQLite writes it through a memory map and "
                    "would die of SIGBUS; nothing is read or written until the flag is removed"
                )
                if self.unsafe is None:
                    log.error("%s", reason)
                self.unsafe = reason
                raise StoreUnavailableError(reason)
            ino, seen = self._seen
            if ino == st.ino and st.size < seen:
                # zeroes past the cut: SQLite finds the index invalid and rebuilds it from the WAL
                os.truncate(self.shm, seen)
                log.error(
                    "%s was truncated to %d bytes under the manager's memory map: extended back to %d",
                    self.shm,
                    st.size,
                    seen,
                )
            else:
                self._seen = (st.ino, max(st.size, seen if ino == st.ino else 0))
            self._recovered()

    def _recovered(self) -> None:
        if self.unsafe is not None:
            log.warning("%s may be used again", self.shm)
            self.unsafe = None


def start_problems(database: Path, uid: int | None = None) -> list[str]:
    """Why an SQLite store at `database` is not safe to run on, one line each (empty: it is).

    Its files (the database, `-wal`, `-shm`) must belong to `uid` (default: this process's user),
    its directory to that user or root, and none be writable by anybody else, since whoever can
    write the `-shm` file can truncate it and kill the manager; no file may be immutable or
    append-only (SQLite then dies of SIGBUS or refuses every write).
    """
    uid = os.geteuid() if uid is None else uid
    problems = []
    for path in (database.parent, *(Path(f"{database}{s}") for s in SUFFIXES)):
        st = file_state(path)
        if st is None:
            continue
        what = "directory" if path == database.parent else "file"
        if st.immutable or st.append_only:
            flag, fix = ("immutable", "chattr -i") if st.immutable else ("append-only", "chattr -a")
            problems.append(
                f"{what} {path} is {flag}: SQLite cannot write it, and dies of SIGBUS on such a -shm file ({fix})"
            )
        if st.uid != uid and not (what == "directory" and st.uid == 0):
            problems.append(
                f"{what} {path} belongs to uid {st.uid}, not to the manager's user (uid {uid}): that user "
                "could truncate the -shm file SQLite maps, which kills the manager (SIGBUS)"
            )
        # a sticky directory (like /tmp) lets others create files but not replace or remove ours
        others_write = st.mode & (stat.S_IWGRP | stat.S_IWOTH)
        if others_write and not (what == "directory" and st.mode & stat.S_ISVTX):
            problems.append(
                f"{what} {path} is writable by other users (mode {stat.S_IMODE(st.mode):04o}): they could "
                f"truncate the -shm file SQLite maps, which kills the manager (SIGBUS) (chmod go-w {path})"
            )
    return problems


def create_private(database: Path) -> None:
    """Create the database file readable and writable by its owner only, when it does not exist
    yet and its directory does: SQLite gives the `-wal` and `-shm` files the same mode."""
    if database.parent.is_dir():
        with contextlib.suppress(FileExistsError):
            os.close(os.open(database, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
