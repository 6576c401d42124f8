"""Opening a run's output files without ever blocking the pilot.

A user names its job's output and error files. A path that is not a regular file would hang or
misuse the pilot: opening a FIFO nobody reads blocks until a reader comes (the pilot stops
answering, is declared lost, and the job takes the next pilot down the same way), a device or a
directory is not where output goes. So a file is opened with O_NONBLOCK (a FIFO without a reader
then fails at once with ENXIO instead of blocking), its type is checked on the open descriptor,
and anything but a regular file (or /dev/null, the usual way to discard output) is refused with
the reason; the run then fails alone, saying why.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
from typing import BinaryIO

DISCARD = "/dev/null"
"""The one path that is not a regular file and is still taken: output thrown away."""


class OutputFileError(OSError):
    """An output path that cannot be a run's output file; the message says why."""


def kind_of(mode: int) -> str:
    """What a file of `st_mode` `mode` is, in words ("a FIFO", "a directory", ...)."""
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def open_output(path: str, *, append: bool) -> BinaryIO:
    """`path` opened for writing (created if missing; truncated unless `append`), never blocking;
    OutputFileError when it is not a regular file or the OS refuses it."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY
    try:
        fd = os.open(path, flags | (os.O_APPEND if append else 0), 0o644)
    except OSError as exc:
        if exc.errno == errno.ENXIO:  # a FIFO without a reader (or a device that is not there)
            raise OutputFileError(f"{path} is a FIFO nobody reads, not a regular file") from None
        raise
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode) and path != DISCARD:
            raise OutputFileError(f"{path} is {kind_of(mode)}, not a regular file")
        if not append and stat.S_ISREG(mode):
            os.ftruncate(fd, 0)
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        return os.fdopen(fd, "ab" if append else "wb")
    except BaseException:
        os.close(fd)
        raise
