"""Bags of tasks for a simulation, from specs like 'tasks=1000,runtime=60,user=u1,submit=0'.

A bag is a `Job` of kind MALLEABLE in the lowest priority class (super-low, KOALA-CS thesis
§3.1.1) with `tasks` independent tasks of `runtime` seconds each. A bags file holds one spec a
line; blank lines and lines starting with '#' are skipped. A bad spec is a `WorkloadError`
naming the file and line (or the option) and the field, with what was expected.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path

from isthmus.model.job import Job, JobKind, PriorityClass
from isthmus.workloads.errors import WorkloadError

#: The fields of a bag spec, in the order they are documented.
FIELDS: tuple[str, ...] = ("tasks", "runtime", "user", "submit", "id")


class _Where:
    """Where a spec came from, to name it in errors: an option or a file's line."""

    def __init__(self, spec: str, source: str | None, line: int | None) -> None:
        self.spec = spec
        self.source = source
        self.line = line

    def error(self, detail: str) -> WorkloadError:
        if self.source is None:
            return WorkloadError(f"--bag {self.spec!r}: {detail}")
        return WorkloadError(detail, source=self.source, line=self.line)


def _number(where: _Where, name: str, text: str, *, integer: bool, low: float, strict: bool) -> float:
    bound = f"{'>' if strict else '>='} {low:g}"
    kind = "an integer" if integer else "a number"
    try:
        value = float(int(text)) if integer else float(text)
    except ValueError:
        raise where.error(f"field {name!r}: expected {kind} {bound}, got {text!r}") from None
    if not math.isfinite(value) or value < low or (strict and value == low):
        raise where.error(f"field {name!r}: expected {kind} {bound}, got {text!r}")
    return value


def parse_bag(spec: str, bag_id: int, *, source: str | None = None, line: int | None = None) -> Job:
    """One bag from `spec` (fields `tasks` and `runtime` required; `user`, `submit`, `id`
    optional). `bag_id` is its id unless the spec gives one; errors name the `--bag` option, or
    `source` and `line` for a spec read from a file."""
    where = _Where(spec, source, line)
    fields: dict[str, str] = {}
    for part in spec.split(","):
        part = part.strip()
        if not part:
            continue
        key, sep, value = part.partition("=")
        key = key.strip()
        if not sep:
            raise where.error(f"{part!r} is not a field=value pair")
        if key not in FIELDS:
            raise where.error(f"unknown field {key!r}; expected one of {', '.join(FIELDS)}")
        if key in fields:
            raise where.error(f"field {key!r} given twice")
        fields[key] = value.strip()
    for required in ("tasks", "runtime"):
        if required not in fields:
            raise where.error(f"field {required!r} is required")
    tasks = int(_number(where, "tasks", fields["tasks"], integer=True, low=1, strict=False))
    runtime = _number(where, "runtime", fields["runtime"], integer=False, low=0, strict=True)
    submit = _number(where, "submit", fields.get("submit", "0"), integer=False, low=0, strict=False)
    if "id" in fields:
        bag_id = int(_number(where, "id", fields["id"], integer=True, low=0, strict=False))
    user = fields.get("user", "bags")
    if not user:
        raise where.error("field 'user': expected a name, got ''")
    return Job(
        bag_id,
        submit,
        1,
        runtime,
        user=user,
        priority=PriorityClass.SUPER_LOW,
        kind=JobKind.MALLEABLE,
        tasks=tasks,
    )


def read_bags_file(path: Path, first_id: int) -> list[Job]:
    """The bags of a file, one spec a line; ids from `first_id` on unless a spec gives one."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise WorkloadError(f"{path}: cannot read the bags file: {exc.strerror or exc}") from None
    bags: list[Job] = []
    for n, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        bags.append(parse_bag(line, first_id + len(bags), source=str(path), line=n))
    return bags


def build_bags(specs: Iterable[str], files: Iterable[Path], job_ids: Iterable[int]) -> list[Job]:
    """The bags of `specs` (options) and `files`, numbered after the largest of the jobs' ids
    `job_ids`; an id taken twice (by a job or another bag) is refused."""
    taken = set(job_ids)
    next_id = max(taken, default=0) + 1
    bags: list[Job] = []
    for spec in specs:
        bags.append(parse_bag(spec, next_id + len(bags)))
    for path in files:
        bags.extend(read_bags_file(path, next_id + len(bags)))
    for bag in bags:
        if bag.id in taken:
            raise WorkloadError(f"bag id {bag.id} is already the id of a job or another bag")
        taken.add(bag.id)
    return sorted(bags, key=lambda b: b.submit)
