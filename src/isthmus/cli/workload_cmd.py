"""``isthmus workload``: inspect, generate, convert, reduce and filter workloads.

Every command that prints data also offers ``--json``; every command accepts
``--skip-invalid``; bad input gives a one-line ``error: ...`` on stderr and exit code 2;
outputs are written atomically (a failure never leaves a half-written file).
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar, cast

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from isthmus.workloads import (
    MODELS,
    DropUnknownRuntime,
    Filter,
    FirstJobs,
    MaxSize,
    SkipReport,
    SubmitWindow,
    SwfConversion,
    WorkloadError,
    reduce_workload,
    resolve_workload,
    summarize,
    write_swf,
)
from isthmus.workloads.conversion import CANCELLED_MEANINGS, RUN_CANCELLED, Cancelled, Oversize, describe_cancelled
from isthmus.workloads.filters import describe_filters
from isthmus.workloads.generators.params import describe_params
from isthmus.workloads.pipeline import convert_trace, filter_trace
from isthmus.workloads.resolve import looks_like_path
from isthmus.workloads.seeds import DEFAULT_SEED
from isthmus.workloads.stats import WorkloadSummary

app = typer.Typer(
    no_args_is_help=True,
    help="Inspect, generate, convert, reduce and filter workloads (SWF, GWF, synthetic models).",
)

EXIT_BAD_INPUT = 2
F = TypeVar("F", bound=Callable[..., Any])

SPEC_HELP = "A trace file (.swf, .swf.gz, .gwf) or a model spec such as 'lublin' or 'lublin:jobs=5000,max_size=64'."


def _stdout() -> Console:
    return Console(highlight=False, soft_wrap=True)


def _fail(message: str) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(EXIT_BAD_INPUT)


def handles_bad_input(func: F) -> F:
    """Turn WorkloadError / file errors into one 'error: ...' line on stderr and exit code 2."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except WorkloadError as exc:
            raise _fail(str(exc)) from None
        except OSError as exc:
            where = f"{exc.filename}: " if exc.filename else ""
            raise _fail(f"{where}{exc.strerror or exc}") from None

    return cast(F, wrapper)


def _report_skipped(skipped: SkipReport, source: str) -> None:
    if skipped.count:
        typer.echo(f"warning: {source}: {skipped.summary()}", err=True)


def _emit_json(data: object) -> None:
    typer.echo(json.dumps(data, indent=2, default=_json_default))


def _json_default(value: object) -> object:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return str(value)


_DURATION = re.compile(r"^\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*([smhdw]?)\s*$")
_UNIT_SECONDS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}


def parse_time(text: str | None, what: str) -> float | None:
    """Seconds from '3600', '90m', '12h', '7d', '2w' (None stays None)."""
    if text is None:
        return None
    match = _DURATION.match(text.lower())
    if not match:
        raise WorkloadError(f"{what}: expected seconds or a number with s/m/h/d/w, got {text!r}")
    return float(match.group(1)) * _UNIT_SECONDS[match.group(2)]


def parse_factor(text: str, what: str) -> float:
    """A positive factor from '0.5', '1e-2' or a fraction '1/60'."""
    try:
        if "/" in text:
            top, _, bottom = text.partition("/")
            value = float(top) / float(bottom)
        else:
            value = float(text)
    except (ValueError, ZeroDivisionError):
        raise WorkloadError(f"{what}: expected a number or a fraction like 1/60, got {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise WorkloadError(f"{what}: expected a positive factor, got {text!r}")
    return value


CANCELLED_HELP = (
    "Jobs cancelled before they started (SWF status 5, no processors or runtime): "
    + "; ".join(f"{k} = {v}" for k, v in CANCELLED_MEANINGS.items())
    + "."
)


def _conversion(oversize: str) -> SwfConversion:
    try:
        return SwfConversion(oversize=cast(Oversize, oversize))
    except ValueError as exc:
        raise WorkloadError(f"--oversize: {exc}") from None


def conversion_options(oversize: str = "keep", cancelled: str = RUN_CANCELLED) -> SwfConversion:
    """The SwfConversion for --oversize and --cancelled, or WorkloadError naming the bad option."""
    base = _conversion(oversize)
    try:
        return SwfConversion(oversize=base.oversize, cancelled=cast(Cancelled, cancelled))
    except ValueError as exc:
        raise WorkloadError(f"--cancelled: {exc}") from None


# --------------------------------------------------------------------------- info


def _fmt(value: float | None, digits: int = 1) -> str:
    if value is None:
        return "-"
    return f"{value:,.{digits}f}"


def _time(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f} s ({value / 86400:.2f} d)"


def print_summary(summary: WorkloadSummary, console: Console, *, total: int | None = None) -> None:
    """Render a workload summary as Rich tables (KOALA-C Table II columns first)."""
    count = f"{summary.jobs:,}"
    if total is not None and total != summary.jobs:
        share = 100.0 * summary.jobs / total if total else 0.0
        count += f" ({share:.0f}% of {total:,})"
    overview = Table(title=Text(f"Workload {summary.name}"), show_header=False, title_justify="left")
    overview.add_column("what", style="bold")
    overview.add_column("value")
    overview.add_row("source", Text(summary.source))
    overview.add_row("jobs", count)
    overview.add_row("first submit", _time(summary.first_submit))
    overview.add_row("last submit", _time(summary.last_submit))
    overview.add_row("span", f"{summary.span_seconds:,.0f} s ({summary.span_days:.1f} days)")
    overview.add_row("machine (MaxProcs)", str(summary.max_procs) if summary.max_procs else "unknown")
    overview.add_row("offered load", _fmt(summary.offered_load, 3))
    overview.add_row("users", f"{summary.users:,}")
    overview.add_row("requested runtime known", f"{summary.requested_runtime_known:,}")
    if summary.cancelled:
        overview.add_row("cancelled before start", Text(describe_cancelled(summary.cancelled).partition(": ")[2]))
    console.print(overview)

    runtime = Table(title="Job runtime", title_justify="left")
    runtime.add_column("statistic")
    runtime.add_column("minutes", justify="right")
    runtime.add_column("seconds", justify="right")
    if summary.runtime is not None:
        for label, seconds in (
            ("mean", summary.runtime.mean),
            ("Q1", summary.runtime.q1),
            ("median", summary.runtime.median),
            ("Q3", summary.runtime.q3),
            ("99th", summary.runtime.p99),
            ("min", summary.runtime.minimum),
            ("max", summary.runtime.maximum),
        ):
            runtime.add_row(label, _fmt(seconds / 60.0), _fmt(seconds))
    console.print(runtime)

    sizes = Table(title=f"Job size (processors; mean {_fmt(summary.size_mean, 2)})", title_justify="left")
    sizes.add_column("size")
    sizes.add_column("jobs", justify="right")
    sizes.add_column("%", justify="right")
    for bucket in summary.size_buckets:
        sizes.add_row(bucket.label, f"{bucket.count:,}", f"{100 * bucket.fraction:.1f}")
    console.print(sizes)

    if summary.metadata:
        meta = Table(title="Header", show_header=False, title_justify="left")
        meta.add_column("key", style="bold")
        meta.add_column("value")
        for key, value in summary.metadata.items():
            meta.add_row(Text(key), Text(value))
        console.print(meta)
    changes = {k: v for k, v in summary.conversion.items() if v}
    if changes:
        conv = Table(title="Conversion (record -> job)", show_header=False, title_justify="left")
        conv.add_column("what")
        conv.add_column("jobs", justify="right")
        for what, jobs in changes.items():
            conv.add_row(what.replace("_", " "), f"{jobs:,}")
        console.print(conv)


@app.command()
@handles_bad_input
def info(
    spec: Annotated[str, typer.Argument(metavar="FILE|MODEL", help=SPEC_HELP)],
    seed: Annotated[int, typer.Option(help="Seed of a model's random numbers.", min=0)] = DEFAULT_SEED,
    jobs: Annotated[int | None, typer.Option(min=0, help="Model: number of jobs. File: keep only the first N.")] = None,
    first: Annotated[
        int | None, typer.Option(min=0, help="Keep the first N jobs (before --max-size, as KOALA-C).")
    ] = None,
    max_size: Annotated[
        int | None, typer.Option(min=1, help="Drop jobs larger than N processors (KOALA-C: 32).")
    ] = None,
    oversize: Annotated[str, typer.Option(help="Jobs larger than the machine: keep, clip or reject.")] = "keep",
    cancelled: Annotated[str, typer.Option(help=CANCELLED_HELP)] = RUN_CANCELLED,
    json_out: Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")] = False,
    skip_invalid: Annotated[bool, typer.Option("--skip-invalid", help="Skip (and count) malformed lines.")] = False,
) -> None:
    """Job count, runtime statistics (KOALA-C Table II), size distribution, span and header."""
    conversion = conversion_options(oversize, cancelled)
    workload = resolve_workload(spec, seed=seed, jobs=jobs, skip_invalid=skip_invalid, conversion=conversion)
    total: int = len(workload)
    filters: list[Filter] = []
    if first is not None:
        filters.append(FirstJobs(first))
    if max_size is not None:
        filters.append(MaxSize(max_size))
    if filters:
        if first is not None:
            total = min(total, first)
        workload = workload.filter(*filters)
    summary = summarize(workload)
    _report_skipped(workload.skipped, workload.source)
    if json_out:
        data = summary.to_dict()
        data["filters"] = describe_filters(filters)
        data["jobs_before_filters"] = total
        _emit_json(data)
        return
    print_summary(summary, _stdout(), total=total if filters else None)


# --------------------------------------------------------------------------- models / generate


@app.command()
@handles_bad_input
def models(json_out: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False) -> None:
    """List the synthetic workload models with their parameters and defaults."""
    if json_out:
        _emit_json(
            {
                name: {
                    "summary": m.summary,
                    "citation": m.citation,
                    "parameters": dict(describe_params(m.defaults)),
                }
                for name, m in MODELS.items()
            }
        )
        return
    console = _stdout()
    for name, model in MODELS.items():
        params = ", ".join(f"{k}={v}" for k, v in describe_params(model.defaults))
        console.print(Text.assemble((name, "bold"), f": {model.summary}"))
        console.print(f"  source: {model.citation}", markup=False)
        console.print(f"  parameters: {params}", markup=False)


@app.command()
@handles_bad_input
def generate(
    model: Annotated[
        str, typer.Argument(metavar="MODEL", help="A model spec, e.g. 'lublin' or 'sr50:arrivals=bursty'.")
    ],
    out: Annotated[Path, typer.Argument(metavar="OUT.swf", help="Output SWF file (.gz to compress).")],
    jobs: Annotated[int | None, typer.Option(min=0, help="Number of jobs (default: the model's).")] = None,
    seed: Annotated[int, typer.Option(help="Seed of the random numbers (same seed, same file).", min=0)] = DEFAULT_SEED,
    json_out: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    skip_invalid: Annotated[
        bool, typer.Option("--skip-invalid", help="Accepted for uniformity (models have no lines).")
    ] = False,
) -> None:
    """Generate a synthetic workload and write it as SWF."""
    del skip_invalid
    if looks_like_path(model):
        raise WorkloadError(f"{model!r} is a file, not a model; models: {', '.join(MODELS)}")
    workload = resolve_workload(model, seed=seed, jobs=jobs)
    count = write_swf(out, workload.to_records(), workload.header)
    if json_out:
        _emit_json({"model": workload.source, "seed": seed, "jobs": count, "output": str(out)})
    else:
        typer.echo(f"wrote {count:,} jobs of {workload.source} to {out}")


# --------------------------------------------------------------------------- convert / filter


@app.command()
@handles_bad_input
def convert(
    source: Annotated[Path, typer.Argument(metavar="IN", help="SWF or GWF trace (plain or gzip).")],
    out: Annotated[Path, typer.Argument(metavar="OUT.swf", help="Output SWF file (.gz to compress).")],
    json_out: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    skip_invalid: Annotated[bool, typer.Option("--skip-invalid", help="Skip (and count) malformed lines.")] = False,
) -> None:
    """Convert a GWF (or SWF) trace to SWF, validating every line."""
    result = convert_trace(source, out, skip_invalid=skip_invalid)
    _report_skipped(result.skipped, str(source))
    if json_out:
        _emit_json({"input": str(source), "output": str(out), **result.to_dict()})
    else:
        typer.echo(f"wrote {result.written:,} records to {out}")


@app.command(name="filter")
@handles_bad_input
def filter_command(
    source: Annotated[str, typer.Argument(metavar="IN", help=SPEC_HELP)],
    out: Annotated[Path, typer.Argument(metavar="OUT.swf", help="Output SWF file (.gz to compress).")],
    max_size: Annotated[int | None, typer.Option(min=1, help="Drop jobs larger than N processors.")] = None,
    first: Annotated[int | None, typer.Option(min=0, help="Keep the first N jobs.")] = None,
    start: Annotated[str | None, typer.Option(help="Keep jobs submitted at or after T (s, or 12h, 7d).")] = None,
    end: Annotated[str | None, typer.Option(help="Keep jobs submitted before T (s, or 12h, 7d).")] = None,
    drop_unknown_runtime: Annotated[
        bool, typer.Option("--drop-unknown-runtime", help="Drop jobs with runtime -1 or 0.")
    ] = False,
    oversize: Annotated[str, typer.Option(help="Jobs larger than the machine: keep, clip or reject.")] = "keep",
    cancelled: Annotated[
        str, typer.Option(help=CANCELLED_HELP + " Default keep: the output has every record unless asked.")
    ] = "keep",
    seed: Annotated[int, typer.Option(help="Seed, when IN is a model.", min=0)] = DEFAULT_SEED,
    json_out: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    skip_invalid: Annotated[bool, typer.Option("--skip-invalid", help="Skip (and count) malformed lines.")] = False,
) -> None:
    """Write the jobs that pass the filters (streaming; records unchanged).

    Filters apply in this order: time window, known runtime, first N, size; so
    --first 50000 --max-size 32 is KOALA-C's selection for the GWA traces.
    """
    filters: list[Filter] = []
    t0, t1 = parse_time(start, "--start"), parse_time(end, "--end")
    if t0 is not None or t1 is not None:
        try:
            filters.append(SubmitWindow(t0, t1))
        except ValueError as exc:
            raise WorkloadError(str(exc)) from None
    if drop_unknown_runtime:
        filters.append(DropUnknownRuntime())
    if first is not None:
        filters.append(FirstJobs(first))
    if max_size is not None:
        filters.append(MaxSize(max_size))
    conversion = conversion_options(oversize, cancelled)
    if looks_like_path(source):
        result = filter_trace(source, out, filters, conversion=conversion, skip_invalid=skip_invalid)
        read, written, skipped = result.read, result.written, result.skipped
    else:
        workload = resolve_workload(source, seed=seed)
        kept = workload.filter(*filters)
        header = kept.header.copy()
        header.add("Note", f"filtered by isthmus: {describe_filters(filters)}")
        read, written, skipped = len(workload), write_swf(out, kept.to_records(), header), workload.skipped
    _report_skipped(skipped, source)
    if json_out:
        _emit_json(
            {
                "input": source,
                "output": str(out),
                "filters": describe_filters(filters),
                "read": read,
                "written": written,
                "skipped": skipped.to_dict(),
            }
        )
    else:
        typer.echo(f"kept {written:,} of {read:,} jobs ({describe_filters(filters)}); wrote {out}")


# --------------------------------------------------------------------------- reduce


@app.command()
@handles_bad_input
def reduce(
    source: Annotated[str, typer.Argument(metavar="IN", help=SPEC_HELP)],
    out: Annotated[Path, typer.Argument(metavar="OUT.swf", help="Output SWF file (.gz to compress).")],
    start: Annotated[
        str | None, typer.Option(help="Interval start (submit time; s, or 12h, 7d). Default: first job.")
    ] = None,
    end: Annotated[str | None, typer.Option(help="Interval end, exclusive. Default: after the last job.")] = None,
    keep: Annotated[int, typer.Option(min=0, help="Keep K jobs ...")] = 1,
    every: Annotated[int, typer.Option(min=1, help="... of every N consecutive jobs.")] = 1,
    arrival_scale: Annotated[
        str, typer.Option(help="Factor on inter-arrival times (e.g. 1/60 to compress 60x).")
    ] = "1",
    runtime_scale: Annotated[str, typer.Option(help="Factor on runtimes (e.g. 1/60).")] = "1",
    seed: Annotated[
        int | None, typer.Option(help="Sample a random K of each block (default: the first K).", min=0)
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    skip_invalid: Annotated[bool, typer.Option("--skip-invalid", help="Skip (and count) malformed lines.")] = False,
) -> None:
    """Reduce a trace (dissertation §4.5.1.2): interval, sampling, time scaling; print the KS report."""
    if keep > every:
        raise WorkloadError(f"--keep ({keep}) cannot exceed --every ({every})")
    workload = resolve_workload(source, seed=seed or 0, skip_invalid=skip_invalid, keep_records=True)
    reduced, report = reduce_workload(
        workload,
        start=parse_time(start, "--start"),
        end=parse_time(end, "--end"),
        keep=keep,
        every=every,
        arrival_scale=parse_factor(arrival_scale, "--arrival-scale"),
        runtime_scale=parse_factor(runtime_scale, "--runtime-scale"),
        seed=seed,
    )
    write_swf(out, reduced.to_records(), reduced.header)
    _report_skipped(workload.skipped, workload.source)
    if json_out:
        _emit_json({"output": str(out), **report.to_dict()})
        return
    console = _stdout()
    table = Table(title=Text(f"Reduction of {workload.name} -> {out}"), show_header=False, title_justify="left")
    table.add_column("line")
    for line in report.lines():
        table.add_row(Text(line))
    console.print(table)
