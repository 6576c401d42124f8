"""`isthmus simulate --repeat N` / `--seeds`: every policy on N workloads, each metric's mean and
95% confidence interval per policy.

A generated workload is drawn again with each seed. A trace is resampled with each seed: a
bootstrap of its weekly blocks (`isthmus.workloads.resample`). The filters (`--max-size`,
`--jobs`, `--vm`) apply to each drawn workload. Every repetition's per-job records, summaries
(and plots, with `--plots`) go to ``OUT/seed-S/``; ``OUT/comparison.json`` holds each policy's
intervals and every repetition's figures; ``OUT/repeated_<kind>.<format>`` draws each policy's
mean with its interval as an error bar (unless `--no-plots`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from isthmus.model.environment import Environment, PolicyChoice, policy_label
from isthmus.model.job import Job

#: How a repeated run over a trace resamples it (stated in comparison.json and the docs).
TRACE_RESAMPLING = (
    "bootstrap of the trace's blocks of {block:g} s (drawn with replacement, seeded by the repetition's seed)"
)
MODEL_RESAMPLING = "the model drawn again with each seed"


@dataclass(frozen=True)
class RepeatPlan:
    """What each repetition runs: the workload spec, the seeds, and the filters of the jobs."""

    workload: str
    seeds: tuple[int, ...]
    max_size: int | None
    first: int | None
    vm: tuple[str, ...]
    skip_invalid: bool


def parse_seeds(text: str) -> tuple[int, ...]:
    """`--seeds 1,2,5` -> (1, 2, 5); ValueError naming the part that is not an integer, or a
    repeated seed (two equal repetitions would narrow the interval for nothing)."""
    seeds: list[int] = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        try:
            seed = int(part)
        except ValueError:
            raise ValueError(f"--seeds: {part!r} is not an integer") from None
        if seed in seeds:
            raise ValueError(f"--seeds: seed {seed} is given twice")
        seeds.append(seed)
    if not seeds:
        raise ValueError("--seeds: expected integers separated by commas, e.g. 1,2,3")
    return tuple(seeds)


def workloads(plan: RepeatPlan, conversion: Any) -> tuple[str, list[tuple[int, list[Job]]]]:
    """(how the workloads were drawn, [(seed, jobs)] one per repetition); WorkloadError,
    ValueError or OSError for a workload that cannot be read."""
    from isthmus.workloads import resolve_workload
    from isthmus.workloads.resample import block_count, block_length, resample_blocks
    from isthmus.workloads.resolve import looks_like_path

    drawn: list[tuple[int, list[Job]]] = []
    if looks_like_path(plan.workload):
        wl = resolve_workload(plan.workload, skip_invalid=plan.skip_invalid, conversion=conversion)
        trace = list(wl.jobs)
        block = block_length(trace)
        if block_count(trace, block) < 2:
            raise ValueError(
                f"{plan.workload}: its jobs arrive within one hour, so a resampling of its blocks would "
                "give the same trace every time; repeat over a longer trace or a model"
            )
        how = TRACE_RESAMPLING.format(block=block)
        for seed in plan.seeds:
            drawn.append((seed, _filtered(plan, resample_blocks(trace, seed))))
    else:
        how = MODEL_RESAMPLING
        for seed in plan.seeds:
            wl = resolve_workload(plan.workload, seed=seed, conversion=conversion)
            drawn.append((seed, _filtered(plan, list(wl.jobs))))
    return how, drawn


def _filtered(plan: RepeatPlan, jobs: list[Job]) -> list[Job]:
    if plan.max_size is not None:
        jobs = [j for j in jobs if j.size <= plan.max_size]
    if plan.first is not None:
        jobs = jobs[: plan.first]
    if plan.vm:
        from isthmus.workloads.vm_requirements import apply_vm_rules, parse_vm_rule

        jobs = list(apply_vm_rules(jobs, [parse_vm_rule(text) for text in plan.vm]))
    return jobs


def run_repeated(
    environment: Environment,
    drawn: Sequence[tuple[int, list[Job]]],
    choices: Sequence[PolicyChoice],
    out: Path,
    *,
    plots: bool,
    simulate_one: Callable[[list[Job], PolicyChoice, str], Any],
    formats: str = "png",
    workload: str | None = None,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Run every policy on every drawn workload; ([per-policy intervals], [per-repetition rows]).

    `simulate_one(jobs, choice, label)` runs one simulation (a `SimulationResult`). A policy's
    row holds, for each figure of `COMPARE_KEYS`, `isthmus.metrics.stats.interval` of its
    values over the repetitions plus the values themselves. With `plots`, each repetition's
    figures go to its folder in `formats`, titled with `workload` (its seed named) and the
    environment."""
    from isthmus.metrics.records import JobColumns
    from isthmus.metrics.run import COMPARE_KEYS, WrittenRun, compare_table, stream_run
    from isthmus.metrics.stats import interval
    from isthmus.metrics.summary import write_summary

    labels = [policy_label(c) for c in choices]
    repetitions: list[dict[str, Any]] = []
    for seed, jobs in drawn:
        folder = out / f"seed-{seed}"
        columns = JobColumns.from_jobs(jobs)
        runs: dict[str, WrittenRun] = {}
        for choice, label in zip(choices, labels, strict=True):
            result = simulate_one(jobs, choice, label)
            base = folder / safe_name(label)
            runs[label] = stream_run(
                result.log,
                columns,
                environment,
                result.end_time,
                f"{base}.jobs.csv",
                f"{base}.jobs.parquet",
                series=plots,
            )
            write_summary(runs[label].summary, folder / f"{safe_name(label)}.summary.json")
        if plots:
            from isthmus.metrics.plots import plot_all

            name = f"{workload} (seed {seed})" if workload else f"seed {seed}"
            plot_all(runs, folder, formats=formats, workload=name, environment=environment)
        repetitions.append({"seed": seed, "jobs": len(jobs), "folder": str(folder), "policies": compare_table(runs)})
    rows: list[dict[str, Any]] = []
    for k, label in enumerate(labels):
        row: dict[str, Any] = {"policy": label}
        for key in COMPARE_KEYS:
            values = [rep["policies"][k].get(key) for rep in repetitions]
            row[key] = {**interval(values), "values": values}
        rows.append(row)
    return rows, repetitions


def workload_title(spec: str) -> str:
    """How figure titles name workload `spec`: a trace by its file name, a model by its spec."""
    from isthmus.workloads.resolve import looks_like_path

    return Path(spec).name if looks_like_path(spec) else spec


def plot_intervals(
    environment: Environment,
    rows: Sequence[dict[str, Any]],
    out: Path,
    *,
    runs: int,
    formats: str,
    workload: str,
) -> dict[str, Path]:
    """Write the figures of a repeated run into `out` (beside the per-seed folders): each policy's
    mean wait, mean bounded slowdown, utilization and (with a cloud) charged cost as bars with
    their 95% confidence intervals as error bars (`isthmus.metrics.plots.plot_repeated`);
    returns the first format's file by kind."""
    from isthmus.metrics.plots import plot_repeated

    return plot_repeated(rows, out, runs=runs, formats=formats, workload=workload, environment=environment)


def safe_name(label: str) -> str:
    """A run label as a file name: runs of other characters become one underscore."""
    return re.sub(r"[^A-Za-z0-9_.=-]+", "_", label)


def write_report(path: Path, report: dict[str, Any]) -> None:
    """Write comparison.json atomically, with the permissions of every other output."""
    from isthmus.metrics.records import atomic_write

    text = json.dumps(report, indent=2, default=str) + "\n"

    def write(tmp: Path) -> None:
        tmp.write_text(text, encoding="utf-8")

    atomic_write(path, write)
