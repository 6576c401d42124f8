"""Opening trace files (plain or gzip, decided by content) and writing outputs atomically."""

from __future__ import annotations

import contextlib
import gzip
import io
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import Self, TextIO

from isthmus.workloads.errors import SkipReport, WorkloadError

_GZIP_MAGIC = b"\x1f\x8b"

#: Exceptions that reading a damaged or unreadable file can raise mid-way.
READ_ERRORS: tuple[type[BaseException], ...] = (OSError, EOFError, UnicodeDecodeError)

try:  # zlib.error is not an OSError subclass
    import zlib

    READ_ERRORS = (*READ_ERRORS, zlib.error)
except ImportError:  # pragma: no cover - zlib is always there in CPython builds with gzip
    pass


def is_gzip(path: Path) -> bool:
    """True when the file starts with the gzip magic bytes (whatever its name)."""
    with path.open("rb") as raw:
        return raw.read(2) == _GZIP_MAGIC


def open_text(path: str | os.PathLike[str]) -> TextIO:
    """Open a trace for reading text, transparently decompressing gzip.

    Bytes that are not UTF-8 are replaced (U+FFFD) rather than raising mid-file, so a damaged
    job line fails later with a clean field error. Raises WorkloadError when the file cannot be
    opened (missing, a directory, no permission).
    """
    p = Path(path)
    try:
        if is_gzip(p):
            compressed = gzip.GzipFile(filename=str(p), mode="rb")
            return io.TextIOWrapper(compressed, encoding="utf-8", errors="replace")
        return p.open("r", encoding="utf-8", errors="replace")
    except FileNotFoundError:
        raise WorkloadError("no such file", source=str(path)) from None
    except IsADirectoryError:
        raise WorkloadError("is a directory, not a trace file", source=str(path)) from None
    except OSError as exc:
        raise WorkloadError(f"cannot open: {exc.strerror or exc}", source=str(path)) from None


def _umask() -> int:
    """The process umask (read by setting and restoring it)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_writer(path: str | os.PathLike[str], *, compress: bool | None = None) -> Iterator[TextIO]:
    """Yield a text stream whose content replaces `path` only if the block ends without error.

    The data goes to a temporary file in the same folder, which is renamed over `path` at the
    end (an atomic step on POSIX), so a failure never leaves a half-written output and never
    damages an existing file. With `compress` None, a name ending in ``.gz`` is gzip-compressed
    (with a zero timestamp, so equal content gives equal bytes).
    """
    target = Path(path)
    if compress is None:
        compress = target.name.endswith(".gz")
    folder = target.parent if str(target.parent) else Path(".")
    try:
        fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=folder)
    except OSError as exc:
        raise WorkloadError(f"cannot write: {exc.strerror or exc}", source=str(path)) from None
    tmp = Path(tmp_name)
    try:
        os.chmod(tmp, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as raw_file:
            if compress:
                with gzip.GzipFile(filename="", mode="wb", fileobj=raw_file, mtime=0) as gz:
                    text = io.TextIOWrapper(gz, encoding="utf-8", newline="\n")
                    yield text
                    text.flush()
                    text.detach()
            else:
                plain = io.TextIOWrapper(raw_file, encoding="utf-8", newline="\n")
                yield plain
                plain.flush()
                plain.detach()
            raw_file.flush()
            os.fsync(raw_file.fileno())
        try:
            os.replace(tmp, target)
        except OSError as exc:
            raise WorkloadError(f"cannot write: {exc.strerror or exc}", source=str(path)) from None
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


class TextFileReader:
    """Base of the streaming trace readers: a path, a lazily opened text file (plain or gzip),
    the line number of the record last yielded and the count of skipped lines.

    Subclasses read from `self._file` and may extend `open`/`close` for their own state.
    """

    def __init__(self, path: str | os.PathLike[str], *, skip_invalid: bool = False, name: str | None = None) -> None:
        self.path = path
        self.name = name if name is not None else str(path)
        self.skip_invalid = skip_invalid
        self.skipped = SkipReport()
        self.line_number = 0
        self._file: TextIO | None = None

    def open(self) -> Self:
        """Open the file (done by ``with`` and by the first read)."""
        if self._file is None:
            self._file = open_text(self.path)
        return self

    def close(self) -> None:
        """Close the file; safe to call twice."""
        if self._file is not None:
            self._file.close()
            self._file = None

    def text(self) -> TextIO:
        """The open file (opening it if needed)."""
        TextFileReader.open(self)  # not self.open(): subclasses build on this
        assert self._file is not None
        return self._file

    def __enter__(self) -> Self:
        return self.open()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
