"""Waiting for the runs of a pilot to exit: one thread for all of them.

On Linux each run's process gets a pidfd (readable once the process has exited) and one
thread selects over all of them, so a burst of starts does not also start a thread per run.
Where pidfds are missing (other systems, old kernels), each run gets a waiting thread.
"""

from __future__ import annotations

import os
import selectors
import threading
import traceback
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class Reaper(Generic[T]):
    """Calls `on_exit(item)` in a background thread once the process `pid` of a watched item has
    exited; `on_exit` reaps it (e.g. ``Popen.wait()``, which then returns at once)."""

    def __init__(self, on_exit: Callable[[T], None]) -> None:
        self._on_exit = on_exit
        self._lock = threading.Lock()
        self._new: list[tuple[int, T]] = []
        self._pidfd = hasattr(os, "pidfd_open")
        if self._pidfd:
            self._sel = selectors.DefaultSelector()
            self._wake_r, self._wake_w = os.pipe()
            os.set_blocking(self._wake_r, False)
            self._sel.register(self._wake_r, selectors.EVENT_READ, None)
            threading.Thread(target=self._loop, name="reaper", daemon=True).start()

    def watch(self, pid: int, item: T) -> None:
        """Call `on_exit(item)` once process `pid` (a child of this process) has exited."""
        fd = -1
        if self._pidfd:
            try:
                fd = os.pidfd_open(pid)
            except OSError:  # e.g. a kernel without pidfds: fall back to a thread
                fd = -1
        if fd < 0:
            threading.Thread(target=self._on_exit, args=(item,), name=f"wait-{pid}", daemon=True).start()
            return
        with self._lock:
            self._new.append((fd, item))
        os.write(self._wake_w, b"\0")

    def _loop(self) -> None:
        while True:
            for key, _ in self._sel.select():
                if key.data is None:  # woken up: register the new pidfds
                    while True:
                        try:
                            if not os.read(self._wake_r, 4096):
                                break
                        except BlockingIOError:
                            break
                    with self._lock:
                        new, self._new = self._new, []
                    for fd, item in new:
                        self._sel.register(fd, selectors.EVENT_READ, item)
                    continue
                self._sel.unregister(key.fd)
                os.close(key.fd)
                try:
                    self._on_exit(key.data)
                except Exception:  # one bad callback must not stop the reports of every later exit
                    traceback.print_exc()
