"""Finished sweep points on disk, so an interrupted sweep resumes without recomputing them.

`points.jsonl` in the experiment's output folder holds one JSON object per finished point:
`{"key": {...}, "jobs": N, "row": {...}}`. The key names the point completely (experiment,
trace, environment, policies with their parameters and seeds, trace preparation, labels), so
a resumed run reuses a saved row only for exactly the same simulation. Each line is appended
whole, flushed and fsynced before the next point is taken, so a kill loses at most the point
being written: reading ignores a torn last line (no newline, or not JSON) with a note and cuts
it off before appending. Any other bad line is an error naming the file and line.
"""

from __future__ import annotations

import dataclasses
import fcntl
import json
import os
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

from isthmus.experiments.runner import Point

POINTS_FILE = "points.jsonl"


class SweepExistsError(ValueError):
    """The output folder already holds saved points and neither resume nor force was asked for."""


class TornPointWarning(UserWarning):
    """The last line of a points file was cut by a kill; that point is computed again."""


def point_key(experiment: str, point: Point) -> dict[str, Any]:
    """Everything that identifies one simulation of an experiment, as JSON-ready data (a
    `window` of None is left out, so points saved before the field existed keep their key)."""
    fields = dataclasses.asdict(point)
    if fields.get("window") is None:
        fields.pop("window", None)
    return json.loads(json.dumps({"experiment": experiment, **fields}))  # type: ignore[no-any-return]


def canonical(key: Mapping[str, Any]) -> str:
    """The key as one string: equal for equal keys whatever their order."""
    return json.dumps(key, sort_keys=True, separators=(",", ":"))


@dataclasses.dataclass(frozen=True)
class SavedPoint:
    """One finished point read back: its key, its number of jobs (its weight) and its row."""

    key: dict[str, Any]
    jobs: int
    row: dict[str, Any]


class PointStore:
    """An append-only file of finished points, locked against a second writer.

    Open with `PointStore.open`; `get` returns a saved point, `add` appends one durably.
    `notes` collects what the caller should tell the user (torn line dropped, nothing to resume).
    """

    def __init__(self, path: Path, saved: dict[str, SavedPoint], handle: IO[str], notes: list[str]) -> None:
        self.path = path
        self.saved = saved
        self.notes = notes
        self._handle = handle

    @classmethod
    def open(cls, path: Path, *, resume: bool = False, force: bool = False) -> PointStore:
        """Open `path` for a sweep.

        An existing file is read when `resume`, deleted when `force`, and otherwise refused with
        `SweepExistsError` so that a finished or interrupted sweep is never silently mixed with or
        replaced by a new one. Raises ValueError when both are asked for, or for a corrupt line.
        """
        if resume and force:
            raise ValueError("--resume and --force exclude each other: resume reuses saved points, force discards them")
        notes: list[str] = []
        n = sum(1 for line in path.read_text().splitlines() if line.strip()) if path.exists() else 0
        if n and not resume and not force:  # an empty file (nothing finished yet) holds nothing to lose
            raise SweepExistsError(
                f"{path} already holds {n} finished point(s) of an earlier run; "
                "pass --resume to reuse them and compute only the rest, or --force to discard them and start over"
            )
        path.parent.mkdir(parents=True, exist_ok=True)
        handle = path.open("a+", encoding="utf-8")
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            raise ValueError(
                f"{path} is being written by another running sweep; wait for it or use another --out"
            ) from None
        try:
            if force:
                handle.truncate(0)
            saved = _read(path, handle, notes) if resume else {}
        except BaseException:
            handle.close()
            raise
        if resume and not saved:
            notes.append(f"nothing to resume in {path}: every point is computed")
        return cls(path, saved, handle, notes)

    def get(self, experiment: str, point: Point) -> SavedPoint | None:
        """The saved result of this exact point, if any."""
        return self.saved.get(canonical(point_key(experiment, point)))

    def add(self, experiment: str, point: Point, jobs: int, row: Mapping[str, Any]) -> None:
        """Append one finished point and make it durable before returning."""
        key = point_key(experiment, point)
        line = json.dumps({"key": key, "jobs": jobs, "row": dict(row)}, default=_plain) + "\n"
        self._handle.write(line)
        self._handle.flush()
        os.fsync(self._handle.fileno())
        self.saved[canonical(key)] = SavedPoint(key, jobs, json.loads(line)["row"])

    def close(self) -> None:
        """Release the file and its lock."""
        self._handle.close()

    def __enter__(self) -> PointStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _plain(value: Any) -> Any:
    """JSON for numpy scalars and other objects with `.item()`; anything else is an error."""
    if hasattr(value, "item"):
        return value.item()
    raise TypeError(f"cannot save {type(value).__name__} {value!r} in a points file")


def _read(path: Path, handle: IO[str], notes: list[str]) -> dict[str, SavedPoint]:
    """The saved points of `handle`; a torn last line is noted, warned about and cut off."""
    handle.seek(0)
    text = handle.read()
    lines = text.split("\n")
    # text ends with "\n" when the last line is complete: then the final element is "".
    tail = lines.pop()
    saved: dict[str, SavedPoint] = {}
    good_bytes = 0
    for number, line in enumerate(lines, 1):
        if line.strip():
            record = _parse(line, path, number)
            saved[canonical(record.key)] = record
        good_bytes += len(line.encode("utf-8")) + 1
    if tail.strip():
        try:
            record = _parse(tail, path, len(lines) + 1)
        except ValueError as exc:
            message = f"{path}:{len(lines) + 1}: ignoring a torn last line (a run was killed while writing it): {exc}"
        else:
            # Complete JSON without its newline: keep the point, end the line before appending.
            saved[canonical(record.key)] = record
            handle.write("\n")
            handle.flush()
            return saved
        notes.append(message)
        warnings.warn(message, TornPointWarning, stacklevel=3)
        handle.truncate(good_bytes)
        handle.seek(good_bytes)
    return saved


def _parse(line: str, path: Path, number: int) -> SavedPoint:
    where = f"{path}:{number}"
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{where}: not a JSON line ({exc.msg} at column {exc.colno})") from None
    if not isinstance(obj, dict):
        raise ValueError(f"{where}: expected a JSON object with key, jobs and row, got {type(obj).__name__}")
    for name, kind in (("key", dict), ("jobs", int), ("row", dict)):
        if not isinstance(obj.get(name), kind):
            raise ValueError(f"{where}: field {name!r} missing or not a {kind.__name__}")
    return SavedPoint(obj["key"], obj["jobs"], obj["row"])
