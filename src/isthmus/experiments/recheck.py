"""Whether this version still computes an experiment's published rows.

A results directory (docs/experiments/NAME, or one a colleague sent) holds the CSV an
`isthmus experiment NAME` run wrote. `recheck` runs the same experiment again but simulates
only a sample of its points (the lightest ones of each trace and each part: fewest jobs), stops
before the experiment's tables and figures, and compares each sampled row with the CSV row of
the same labels, column by column (`simulation_seconds`, a wall time, excepted; columns the CSV
does not have, written by an older version, are named and not compared). A difference means
the directory was written by a version that computes otherwise (or with other options):
regenerate it with the command its summary gives.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from numbers import Number
from pathlib import Path
from typing import Any

from isthmus.experiments.runner import Point, Sweep, point_jobs, run_points

#: columns that measure this machine, not the simulated system
UNCOMPARED = frozenset({"simulation_seconds"})
#: the labels whose values make separate groups of points, each sampled on its own: the trace
#: simulated and the part of an experiment whose points measure different things
#: (koala-cs-unobtrusive's probes and delays, villegas-forwarding's chapters)
GROUP_LABELS = ("trace", "part")


class _SampleTaken(BaseException):  # not an error: no `except Exception` of an experiment takes it
    """Raised by `SamplingSweep.run` to stop the experiment once its sample is simulated."""

    def __init__(self, points: list[Point], rows: list[dict[str, Any]]) -> None:
        super().__init__(f"{len(points)} sampled point(s)")
        self.points = points
        self.rows = rows


@dataclass(frozen=True)
class SamplingSweep(Sweep):
    """A sweep that simulates only the `sample` lightest points of each group of the points an
    experiment runs (a group: the points with the same `GROUP_LABELS` values, a label a point
    lacks counting as one value; lightest by the experiment's own weight, else by number of
    jobs; ties in the experiment's order), in this process, and then stops the experiment
    (`recheck` catches it)."""

    sample: int = 1

    def run(self, experiment: str, points: Sequence[Point]) -> list[dict[str, Any]]:
        """Simulate the sample; never returns (raises `_SampleTaken` with the rows)."""
        weigh = self.weigh_point or point_jobs
        order = sorted(range(len(points)), key=lambda i: (weigh(points[i]), i))
        per_group: dict[tuple[object, ...], int] = {}
        chosen = []
        for i in order:
            labels = dict(points[i].labels)
            group = tuple(labels.get(k) for k in GROUP_LABELS)
            taken = per_group.get(group, 0)
            if taken < self.sample:
                per_group[group] = taken + 1
                chosen.append(points[i])
        rows = run_points(
            chosen,
            workers=1,
            evaluate_point=self.evaluate_point,
            weigh_point=self.weigh_point,
            experiment=experiment,
        )
        raise _SampleTaken(chosen, rows)


@dataclass(frozen=True)
class Difference:
    """One value of a sampled row that differs from the published one (`published` None: the
    CSV has no row with these labels at all, `column` then empty)."""

    labels: tuple[tuple[str, Any], ...]
    column: str
    published: str | None
    computed: Any

    def __str__(self) -> str:
        where = ", ".join(f"{k}={v}" for k, v in self.labels)
        if self.published is None:
            return f"no published row with {where}"
        return f"{where}: {self.column} published {self.published}, computed {self.computed}"


@dataclass(frozen=True)
class Recheck:
    """The sampled points' labels, every difference found (none: the sample agrees), how
    many values were compared (labels excepted) and the computed columns the published CSV
    lacks (not compared: a version that wrote fewer columns made it)."""

    sampled: list[tuple[tuple[str, Any], ...]]
    differences: list[Difference]
    compared: int
    unpublished: tuple[str, ...] = ()


def same_value(published: str, computed: Any) -> bool:
    """Whether a CSV cell holds `computed` as `csv` wrote it (numbers to 1e-9 relative, so that
    a float summed in another order still agrees; empty cells are None)."""
    if computed is None:
        return published == ""
    if published == str(computed):
        return True
    if isinstance(computed, bool) or not isinstance(computed, int | float):
        return False
    try:
        value = float(published)
    except ValueError:
        return False
    if math.isnan(value) and math.isnan(computed):
        return True
    return math.isclose(value, computed, rel_tol=1e-9, abs_tol=1e-12)


def _cell(value: Any) -> bool:
    """Whether a row's value is one the experiment's CSV can hold (a list, such as
    koala-cs-unobtrusive's chunk start times for its figure, never goes to the CSV)."""
    return value is None or isinstance(value, str | Number)


def compare_rows(
    labels: tuple[tuple[str, Any], ...], computed: Mapping[str, Any], published: Sequence[Mapping[str, str]]
) -> tuple[list[Difference], int]:
    """The differences between a computed row and the published row with the same labels, and
    how many values were compared. ValueError when the published rows have no column for a label (rows that aggregate
    several simulations, or another experiment's CSV)."""
    missing = [k for k, _ in labels if published and k not in published[0]]
    if missing:
        raise ValueError(
            f"the published CSV has no column {', '.join(missing)}: its rows are not one simulation each "
            "(another experiment's CSV?)"
        )
    matching = [row for row in published if all(same_value(row.get(k, ""), v) for k, v in labels)]
    if not matching:
        return [Difference(labels, "", None, None)], 0
    row = matching[0]
    label_keys = {k for k, _ in labels}
    columns = [c for c in computed if c in row and c not in UNCOMPARED and c not in label_keys]
    differences = [Difference(labels, c, row[c], computed[c]) for c in columns if not same_value(row[c], computed[c])]
    return differences, len(columns)


def read_published(path: Path) -> list[dict[str, str]]:
    """The rows of a published experiment CSV; ValueError naming the file (and the line) when
    it is not CSV text."""
    with path.open(newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f, strict=True)  # what `write_csv` writes is strict CSV
        try:
            return list(reader)
        except UnicodeDecodeError as exc:
            raise ValueError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
        except csv.Error as exc:
            raise ValueError(f"{path}:{reader.line_num}: not a CSV row ({exc})") from None


def recheck(
    name: str,
    published: Path,
    *,
    sample: int = 1,
    traces: Sequence[str] | None = None,
    options: Mapping[str, Any] | None = None,
) -> Recheck:
    """Run experiment `name` (of `isthmus.experiments.catalog`) on its sample of points and
    compare the rows with the CSV `published`. `traces`: the trace files of an experiment that
    reads traces (the CLI's default: the seed's own, `spec.traces`); `options`: the experiment's
    keyword options (otherwise the experiment's own defaults, which are the CLI's). ValueError
    for an unknown experiment or no traces."""
    import tempfile

    from isthmus.experiments.catalog import EXPERIMENTS

    spec = EXPERIMENTS.get(name)
    if spec is None:
        raise ValueError(f"unknown experiment {name!r}; valid: {', '.join(EXPERIMENTS)}")
    if spec.traces is not None and not traces:
        raise ValueError(
            f"{name} reads traces: give the trace files its CSV was computed from ({', '.join(spec.traces)})"
        )
    rows = read_published(published)
    with tempfile.TemporaryDirectory() as tmp:
        try:
            spec.run(list(traces or []), Path(tmp), sweep=SamplingSweep(sample=sample), **(options or {}))
        except _SampleTaken as done:
            sampled = done
        else:
            raise RuntimeError(f"experiment {name} ran no points")
    differences: list[Difference] = []
    compared = 0
    header = set(rows[0]) if rows else set()
    unpublished: dict[str, None] = {}  # in the order the rows have them
    for point, row in zip(sampled.points, sampled.rows, strict=True):
        if rows:
            unpublished.update(
                (c, None) for c, v in row.items() if c not in header and c not in UNCOMPARED and _cell(v)
            )
        try:
            found, n = compare_rows(point.labels, row, rows)
        except ValueError as exc:
            raise ValueError(f"{published}: {exc}") from None
        differences += found
        compared += n
    return Recheck([p.labels for p in sampled.points], differences, compared, tuple(unpublished))
