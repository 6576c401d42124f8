"""Empty files and directories made ahead of need, renamed into place when a run starts.

A run needs a spool directory, a nodefile and two output files. Creating each costs an inode
allocation, which on some file systems is far dearer than renaming one: on the ext4 disk of
the machines isthmus is developed on, 0.55 ms per directory and 0.85 ms per file against 21 µs
per rename (measured with 500 of each). For a pilot starting 25 runs at once that is 75 ms of
system time on the path from the manager's decision to the runs' start. So a thread keeps a
few of each ready in a pool directory beside the spool directories (same file system, so a
rename is atomic and cheap), and a start takes them from there; when the pool is empty, or a
rename fails, the entry is created directly, so the pool only ever saves time. The thread
refills only once no entry has been taken for QUIET seconds: runs start in bursts (a round
places many at once), and creating entries during one would compete with it for the CPU and
for the pool directory's lock, which the renames need too.

The pool of a node lives in ``<spool root>/.fresh-<node>``; entries left by a pilot that was
killed are adopted by the next pilot of the node, a pilot that exits removes what is left, and
the manager removes the pools of nodes that are gone (released VMs; see `remove_pools`).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import threading
import time
from collections import deque

QUIET = 0.05  # seconds without a start before the pool is refilled


POOL_PREFIX = ".fresh-"


def pool_dir(root: str | os.PathLike[str], node: str) -> str:
    """Where the pool of pilot node `node` lives under the spool root `root`."""
    return os.path.join(root, POOL_PREFIX + node.replace("/", "-"))


def remove_pools(root: str | os.PathLike[str], keep: set[str]) -> int:
    """Remove the pools under `root` of nodes not in `keep` (left by pilots that were killed);
    returns how many. A pool holds only empty files and directories."""
    kept = {os.path.basename(pool_dir(root, n)) for n in keep}
    removed = 0
    with contextlib.suppress(FileNotFoundError), os.scandir(root) as it:
        for entry in it:
            if entry.name.startswith(POOL_PREFIX) and entry.name not in kept and entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path, ignore_errors=True)
                removed += 1
    return removed


class FreshEntries:
    """A pool of empty files and directories in `root`/.fresh-`name`, refilled in the background."""

    def __init__(self, root: str, name: str, *, files: int, dirs: int) -> None:
        self.pool = pool_dir(root, name)
        os.makedirs(self.pool, exist_ok=True)
        self._want = {"f": files, "d": dirs}
        self._ready: dict[str, deque[str]] = {"f": deque(), "d": deque()}
        for entry in os.scandir(self.pool):  # adopt what an earlier pilot of this node left
            kind = "d" if entry.is_dir(follow_symlinks=False) else "f"
            self._ready[kind].append(entry.path)
        self._names = itertools.count()
        self._cv = threading.Condition()
        self._closed = False
        self._last_take = 0.0
        self._thread = threading.Thread(target=self._refill, name="fresh-entries", daemon=True)
        self._thread.start()

    def file(self, target: str) -> None:
        """Make `target` an empty file (replacing one that is there)."""
        if not self._take("f", target):
            os.close(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644))

    def dir(self, target: str) -> None:
        """Make sure directory `target` exists."""
        if os.path.isdir(target):
            return
        if not self._take("d", target):
            os.makedirs(target, exist_ok=True)

    def close(self) -> None:
        """Stop refilling and remove the pool with what is left in it."""
        with self._cv:
            self._closed = True
            self._cv.notify()
        self._thread.join(timeout=5)
        with self._cv:
            left = [*self._ready["f"], *self._ready["d"]]
            self._ready = {"f": deque(), "d": deque()}
        for path in left:
            with contextlib.suppress(OSError):
                if os.path.isdir(path):
                    os.rmdir(path)
                else:
                    os.unlink(path)
        with contextlib.suppress(OSError):
            os.rmdir(self.pool)

    def _take(self, kind: str, target: str) -> bool:
        """Rename a ready entry of `kind` to `target`; False when none could be used."""
        while True:
            with self._cv:
                if not self._ready[kind]:
                    self._cv.notify()
                    return False
                src = self._ready[kind].popleft()
                self._last_take = time.monotonic()
                if len(self._ready[kind]) < self._want[kind] // 2:
                    self._cv.notify()
            try:
                os.rename(src, target)
                return True
            except OSError as exc:
                if isinstance(exc, FileNotFoundError) and not os.path.lexists(src):
                    continue  # taken by another pilot of this node: try the next
                # the target's directory is missing, another file system, the directory appeared
                # meanwhile...: the entry stays ready and the caller creates the target itself
                with self._cv:
                    self._ready[kind].appendleft(src)
                return False

    def _refill(self) -> None:
        prefix = f"{os.getpid()}-"
        while True:
            with self._cv:
                while not self._closed:
                    if all(len(self._ready[k]) >= self._want[k] for k in self._ready):
                        self._cv.wait()
                        continue
                    quiet = self._last_take + QUIET - time.monotonic()
                    if quiet <= 0:
                        break
                    self._cv.wait(quiet)
                if self._closed:
                    return
                kind = min(self._ready, key=lambda k: len(self._ready[k]) / max(1, self._want[k]))
            path = os.path.join(self.pool, f"{kind}{prefix}{next(self._names)}")
            try:
                if kind == "d":
                    os.mkdir(path)
                else:
                    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
            except OSError:  # the spool is gone or full: starts create their entries themselves
                with self._cv:
                    if not self._closed:
                        self._cv.wait(5.0)
                continue
            with self._cv:
                self._ready[kind].append(path)
