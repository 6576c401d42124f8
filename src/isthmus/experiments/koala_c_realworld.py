"""KOALA-C's real-world experiment, time-scaled, live on real sites and in simulation.

Seed: koala-c-multicluster-multicloud.txt §V-A (last paragraph) and §V-D, Figs 7-9. Two
32-node cluster sites fs1 and fs2 under a local resource manager, a free private cloud of up
to 32 VMs and a paid public cloud of up to 64 VMs ($0.065 per VM-hour); "a part of the
CTC-SP2 workload of approximately 12 hours that imposes an average utilization of 70% on the
system computed using the maximum cloud sizes"; FF, SJF and TAGS-sets (set 1: all four sites,
short-job limit 10 minutes; set 2: all but fs1); error bars are the standard error of the mean.

What this module fixes where the paper is silent, so that the experiment fits on one machine:

* **The window**: of the 12-hour windows starting at 00:00 or 08:00 of each trace day (jobs of at
  most 32 processors), the one whose offered load (processor-seconds over 12 hours of the
  environment's full capacity) is closest to 70% (`select_window`). On CTC-SP2 that is day 168
  from 00:00: 358 jobs, load 0.700.
* **Time scale**: submit times, runtimes and every time of the environment (boot and shutdown
  times, billing increment, the sets' runtime limits) × `scale` (default 1/120: 12 hours in 6
  minutes), prices per hour ÷ `scale` so a billing increment costs what it did
  (:func:`isthmus.live.validate.scale_environment`). Runtimes are floored at 0.5 s. Rounds are
  every `round_interval` seconds on both sides (default 1 s: the paper's 30 s scaled would be
  0.25 s, shorter than a batch system takes to start a job), i.e. every 2 minutes of trace time
  at the default scale.
* **Repetitions**: the simulation is deterministic and runs once per policy; the live run is
  repeated `repeat` times per policy and its figures are means ± standard error, as in the paper.

The live side is :func:`isthmus.live.validate.run_live`: a real manager on the environment given
(real Slurm or Grid Engine sites in direct or pilot mode, clouds through Libcloud: the paper's
setting), each job submitted through the API at its scaled submit time as ``sleep RUNTIME``.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from isthmus.experiments.output import figure, fmt, markdown_table, save
from isthmus.experiments.result import ExperimentResult, finish
from isthmus.live.validate import (
    LiveRun,
    SimRun,
    ValidationCase,
    prepare_case,
    run_live,
    scale_environment,
    simulate_case,
    write_events,
)
from isthmus.metrics.run import RunMetrics, write_run
from isthmus.metrics.stats import mean_sem
from isthmus.model.environment import Environment, PolicyChoice
from isthmus.workloads import Workload, load_workload
from isthmus.workloads.conversion import RUN_CANCELLED, SwfConversion
from isthmus.workloads.filters import MaxSize, SubmitWindow

NAME = "koala-c-realworld"
DEFAULT_TRACES = ("CTC-SP2-1996-3.1-cln.swf.gz",)
POLICIES = ("ff", "sjf", "tags-sets")
DEFAULT_SCALE = 1 / 120
DEFAULT_REPEAT = 3
DEFAULT_ROUND_INTERVAL = 1.0
MIN_RUNTIME = 0.5
WINDOW_HOURS = 12.0
TARGET_LOAD = 0.7
MAX_NODES = 32
LIVE_WITHIN = 0.10  # the bar for live against simulated ("within 10%")
RUNS_FILE = "runs.jsonl"

Progress = Callable[[str], None]


@dataclass(frozen=True)
class Window:
    """The part of the trace the experiment runs: jobs submitted in [start, end) seconds of the
    trace, their count and their offered load on the environment's full capacity."""

    start: float
    end: float
    jobs: int
    load: float


def full_capacity(env: Environment) -> int:
    """Processors of the environment with every cloud at its maximum size (the paper's base of
    the 70% utilization)."""
    return sum(s.cores_per_node * (s.max_vms if s.is_cloud else s.nodes) for s in env.sites)


def select_window(
    workload: Workload, capacity: int, *, hours: float = WINDOW_HOURS, load: float = TARGET_LOAD
) -> Window:
    """The `hours`-long window starting at 00:00 or 08:00 of a trace day whose offered load
    (sum of size × runtime of the jobs submitted in it, over `hours` × `capacity`) is closest to
    `load`; the earliest among equals. ValueError if the trace is shorter than one window."""
    if capacity <= 0:
        raise ValueError(f"capacity must be positive, got {capacity}")
    jobs = workload.jobs
    if not jobs:
        raise ValueError(f"workload {workload.name!r} has no jobs")
    submit = np.array([j.submit for j in jobs])
    work = np.array([j.size * j.runtime for j in jobs])
    span = hours * 3600.0
    last = float(submit.max())
    best: Window | None = None
    for day in range(int(last // 86400) + 1):
        for start_hour in (0.0, 8.0):
            t0 = day * 86400.0 + start_hour * 3600.0
            if t0 + span > last:
                continue
            lo, hi = np.searchsorted(submit, [t0, t0 + span])
            w = Window(t0, t0 + span, int(hi - lo), float(work[lo:hi].sum()) / (capacity * span))
            if best is None or abs(w.load - load) < abs(best.load - load):
                best = w
    if best is None:
        raise ValueError(f"workload {workload.name!r} spans less than {hours:g} hours")
    return best


def check_environment(env: Environment) -> None:
    """The structure the experiment needs, or ValueError saying what is missing: two cluster
    sites, then two cloud sites, and TAGS-sets' two sets (all sites with a runtime limit; all
    but the first cluster, unlimited)."""
    clusters = [s.name for s in env.sites if not s.is_cloud]
    clouds = [s.name for s in env.sites if s.is_cloud]
    if len(clusters) != 2 or len(clouds) != 2 or [s.name for s in env.sites] != clusters + clouds:
        raise ValueError(
            f"environment {env.name!r}: {NAME} needs two cluster sites then two cloud sites (fs1, fs2, a private "
            f"and a public cloud), got {', '.join(s.name for s in env.sites)}"
        )
    if len(env.sets) != 2 or env.sets[0].runtime_limit is None or env.sets[1].runtime_limit is not None:
        raise ValueError(
            f"environment {env.name!r}: TAGS-sets needs two sets, the first of every site with a runtime limit, "
            "the second of all sites but the first cluster without one (see the bundled koala-c-realworld)"
        )
    if set(env.sets[1].sites) != set(clusters[1:] + clouds):
        raise ValueError(
            f"environment {env.name!r}: the second set must hold every site but {clusters[0]!r}, "
            f"got {', '.join(env.sets[1].sites)}"
        )


def scaled_environment(env: Environment, scale: float, round_interval: float = DEFAULT_ROUND_INTERVAL) -> Environment:
    """`env` with its times and the sets' runtime limits × `scale`, prices ÷ `scale`, and rounds
    every `round_interval` seconds."""
    if not (math.isfinite(round_interval) and round_interval > 0):
        raise ValueError(f"round interval must be a positive number of seconds, got {round_interval}")
    scaled = scale_environment(env, scale)
    sets = tuple(
        dataclasses.replace(s, runtime_limit=None if s.runtime_limit is None else s.runtime_limit * scale)
        for s in scaled.sets
    )
    return dataclasses.replace(scaled, sets=sets, round_interval=round_interval)


def prepare(
    env: Environment,
    trace: str,
    *,
    scale: float = DEFAULT_SCALE,
    jobs: int | None = None,
    window_start: float | None = None,
    cancelled: str = RUN_CANCELLED,
    round_interval: float = DEFAULT_ROUND_INTERVAL,
) -> tuple[ValidationCase, Window]:
    """The case both sides run: the window of `trace` (chosen by `select_window` unless
    `window_start`, in seconds of the trace, is given; its first `jobs` jobs with `jobs`),
    scaled onto the scaled `env`."""
    check_environment(env)
    if not (math.isfinite(scale) and 0 < scale <= 1):
        raise ValueError(f"scale must be in (0, 1], got {scale}")
    workload = load_workload(trace, conversion=SwfConversion(cancelled=cancelled))  # type: ignore[arg-type]
    workload = workload.filter(MaxSize(MAX_NODES))
    capacity = full_capacity(env)
    if window_start is None:
        window = select_window(workload, capacity)
    else:
        span = WINDOW_HOURS * 3600.0
        part = workload.filter(SubmitWindow(window_start, window_start + span))
        work = sum(j.size * j.runtime for j in part.jobs)
        window = Window(window_start, window_start + span, len(part.jobs), work / (capacity * span))
    part = workload.filter(SubmitWindow(window.start, window.end))
    if not part.jobs:
        raise ValueError(f"no job of {trace} is submitted in [{window.start:g}, {window.end:g}) s")
    case = prepare_case(
        scaled_environment(env, scale, round_interval),
        part,
        scale=scale,
        jobs=jobs,
        min_runtime=MIN_RUNTIME,
        name=f"{Path(trace).name} [{window.start / 86400:g} d, +{WINDOW_HOURS:g} h)",
    )
    return case, window


# ------------------------------------------------------------------------------ one run's row


def run_row(
    policy: str, side: str, run: int, metrics: RunMetrics, case: ValidationCase, live: LiveRun | None = None
) -> dict[str, Any]:
    """The figures of one run: means over all, short and long jobs (short: workload runtime within
    the first set's limit, the paper's job types), cost, makespan, utilization, and the fraction of
    the completed jobs that each site completed."""
    rec = metrics.records
    limit = case.env.sets[0].runtime_limit
    assert limit is not None
    done = np.isfinite(rec.end)
    # the job's type is its workload runtime: a live run's measured one includes the dispatch
    runtimes = {j.id: j.runtime for j in case.jobs}
    short = np.array([runtimes[int(i)] <= limit + 1e-9 for i in rec.job_id], dtype=bool)
    row: dict[str, Any] = {"policy": policy, "side": side, "run": run, "jobs": len(rec), "completed": int(done.sum())}
    for label, mask in (("all", np.ones(len(rec), dtype=bool)), ("short", short), ("long", ~short)):
        sel = mask & done
        row[f"slowdown_{label}"] = float(rec.slowdown[sel].mean()) if sel.any() else None
        row[f"wait_{label}"] = float(rec.wait[sel].mean()) if sel.any() else None
    row["short_fraction"] = float(short.mean()) if len(rec) else None
    s = metrics.summary
    row["cost"] = s.get("cost_charged")
    row["makespan"] = s.get("makespan")
    row["utilization"] = s.get("utilization")
    n_done = int(done.sum())
    for i, name in enumerate(metrics.site_names):
        row[f"site_{name}"] = float(((rec.site == i) & done).sum()) / n_done if n_done else None
    if live is not None:
        row["run_overhead_mean"] = live.run_overhead_mean
        row["notes"] = "; ".join(live.notes)
    return row


# ---------------------------------------------------------------------------------- the runs


class RunStore:
    """The finished runs of one output directory (OUT/runs.jsonl), appended as each completes so
    that an interrupted experiment resumes without repeating them."""

    def __init__(self, path: Path, *, resume: bool, force: bool) -> None:
        if resume and force:
            raise ValueError("--resume and --force exclude each other: resume reuses saved runs, force discards them")
        self.path = path
        self.rows: list[dict[str, Any]] = []
        if path.exists() and path.stat().st_size > 0:
            if force:
                path.unlink()
            elif not resume:
                raise ValueError(
                    f"{path} holds finished runs of an earlier experiment: --resume to keep them, --force to start over"
                )
            else:
                for n, line in enumerate(path.read_text().splitlines(), 1):
                    try:
                        self.rows.append(json.loads(line))
                    except json.JSONDecodeError:
                        raise ValueError(f"{path}:{n}: not a JSON run record (a run cut short?)") from None
        path.parent.mkdir(parents=True, exist_ok=True)

    def get(self, policy: str, side: str, run: int) -> dict[str, Any] | None:
        """The saved row of that run, if any."""
        for r in self.rows:
            if (r["policy"], r["side"], r["run"]) == (policy, side, run):
                return r
        return None

    def add(self, row: dict[str, Any]) -> None:
        """Save a finished run (one line, flushed)."""
        with self.path.open("a") as fh:
            fh.write(json.dumps(row, default=float) + "\n")
        self.rows.append(row)


def koala_c_realworld(
    env: Environment,
    trace: str,
    out: Path,
    *,
    policies: Sequence[str] = POLICIES,
    repeat: int = DEFAULT_REPEAT,
    scale: float = DEFAULT_SCALE,
    jobs: int | None = None,
    window_start: float | None = None,
    cancelled: str = RUN_CANCELLED,
    round_interval: float = DEFAULT_ROUND_INTERVAL,
    resume: bool = False,
    force: bool = False,
    progress: Progress | None = None,
) -> ExperimentResult:
    """Run the experiment: per policy one simulation and `repeat` live runs on `env`; write the
    runs (CSV, per-run job records and event logs), Figs 7-9 and summary.md."""
    say = progress or (lambda _m: None)
    if repeat < 1:
        raise ValueError(f"repeat must be at least 1, got {repeat}")
    case, window = prepare(
        env,
        trace,
        scale=scale,
        jobs=jobs,
        window_start=window_start,
        cancelled=cancelled,
        round_interval=round_interval,
    )
    out.mkdir(parents=True, exist_ok=True)
    store = RunStore(out / RUNS_FILE, resume=resume, force=force)
    # what the saved runs must have run, so that --resume never mixes two experiments
    made = f"{Path(trace).name} from {window.start:g} s, {len(case.jobs)} jobs, x {scale:g}, on {env.name}"
    other = next((r for r in store.rows if r.get("case") != made), None)
    if other is not None:
        raise ValueError(
            f"{store.path} holds runs of another case ({other.get('case', 'unrecorded')}; this one: {made}): "
            "--force to start over"
        )
    say(
        f"{len(case.jobs)} jobs of {case.workload}: offered load {window.load:.3f} of {full_capacity(env)} processors; "
        f"x {scale:g}: submissions over {case.span:.0f} s, rounds every {case.env.round_interval:g} s"
    )
    runs_dir = out / "runs"
    runs_dir.mkdir(exist_ok=True)
    for pol in policies:
        choice = PolicyChoice(pol)
        if store.get(pol, "simulated", 0) is None:
            say(f"{pol}: simulating")
            sim: SimRun = simulate_case(case, choice)
            _write(sim.metrics, sim.log, runs_dir, f"{pol}.sim")
            store.add({**run_row(pol, "simulated", 0, sim.metrics, case), "case": made})
        for r in range(1, repeat + 1):
            if store.get(pol, "live", r) is not None:
                continue
            say(f"{pol}: live run {r} of {repeat}")
            with tempfile.TemporaryDirectory(prefix="isthmus-realworld-") as tmp:
                live = run_live(case, choice, work_dir=Path(tmp), progress=say, tag=f"realworld-{pol}-{r}")
            _write(live.metrics, live.log, runs_dir, f"{pol}.live{r}")
            row = run_row(pol, "live", r, live.metrics, case, live)
            store.add({**row, "case": made})
            done = f"{row['completed']}/{row['jobs']} completed"
            say(f"{pol}: live run {r}: {done}, slowdown {fmt(row['slowdown_all'])}, wait {fmt(row['wait_all'])} s")
    rows = [r for r in store.rows if r["policy"] in policies and (r["side"] == "simulated" or r["run"] <= repeat)]
    return report(rows, case, window, out, policies, scale)


def _write(metrics: RunMetrics, log: Any, out: Path, label: str) -> None:
    write_run(metrics, out, label)
    write_events(log, out / f"{label}.events.csv")


# ------------------------------------------------------------------------------- the report


def _live(rows: Sequence[dict[str, Any]], policy: str, key: str) -> tuple[float | None, float | None]:
    vals = [float(r[key]) for r in rows if r["policy"] == policy and r["side"] == "live" and r.get(key) is not None]
    return mean_sem(vals)


def _sim(rows: Sequence[dict[str, Any]], policy: str, key: str) -> float | None:
    for r in rows:
        if r["policy"] == policy and r["side"] == "simulated":
            return None if r.get(key) is None else float(r[key])
    return None


def report(
    rows: list[dict[str, Any]],
    case: ValidationCase,
    window: Window,
    out: Path,
    policies: Sequence[str],
    scale: float,
) -> ExperimentResult:
    """Figs 7-9 and summary.md from the runs' rows, with the paper's statements checked."""
    result = ExperimentResult(NAME, out, rows)
    sites = list(case.env.sites)
    result.files["fig7"] = _fig7(rows, policies, out / "fig7.png")
    result.files["fig8"] = _fig8(rows, policies, out / "fig8.png")
    result.files["fig9"] = _fig9(rows, policies, [s.name for s in sites], out / "fig9.png")
    limit = case.env.sets[0].runtime_limit
    body = [
        f"Workload: {case.workload}: {len(case.jobs)} jobs (of at most {MAX_NODES} processors) submitted in "
        f"[{window.start / 3600:g} h, {window.end / 3600:g} h) of the trace, offered load {window.load:.3f} of "
        f"{full_capacity(case.env)} processors (the paper: about 12 hours at 70%). Time scale {scale:g}: "
        f"submissions over {case.span:.0f} s; runtimes floored to {case.min_runtime:g} s: {case.floored}; "
        f"environment times × {scale:g}, prices ÷ {scale:g} (costs as unscaled); short jobs: runtime ≤ "
        f"{fmt(limit)} s (the first set's limit); rounds every {case.env.round_interval:g} s on both sides.",
        "Sites: " + ", ".join(_describe_site(s) for s in sites) + ".",
        "## Results (live: mean ± standard error over the runs; simulated: one deterministic run)",
        _table(rows, policies, [s.name for s in sites]),
        "## The paper's statements (§V-D)",
        *_claims(rows, policies, sites),
    ]
    return finish(result, "KOALA-C real-world experiment (§V-D, Figs 7-9), time-scaled", body, traces=False)


def _describe_site(site: Any) -> str:
    size = f"cloud, up to {site.max_vms} VMs" if site.is_cloud else f"{site.nodes * site.cores_per_node} processors"
    backend = f", {site.lrm.driver} {site.lrm.mode}" if site.lrm is not None else ""
    backend += f", {site.provider.driver}" if site.provider is not None else ""
    return f"{site.name} ({size}{backend})"


def _pm(mean: float | None, err: float | None) -> str:
    if mean is None:
        return "n/a"
    return fmt(mean) + (f" ± {fmt(err)}" if err is not None else "")


def _table(rows: list[dict[str, Any]], policies: Sequence[str], site_names: Sequence[str]) -> str:
    keys = [
        ("slowdown_all", "slowdown"),
        ("slowdown_short", "slowdown, short"),
        ("slowdown_long", "slowdown, long"),
        ("wait_all", "wait s"),
        ("wait_short", "wait s, short"),
        ("wait_long", "wait s, long"),
        ("cost", "cost $"),
        ("makespan", "makespan s"),
        ("utilization", "utilization"),
        *[(f"site_{n}", f"jobs on {n}") for n in site_names],
    ]
    out_rows = []
    for key, label in keys:
        line: list[Any] = [label]
        for p in policies:
            line += [_pm(*_live(rows, p, key)), fmt(_sim(rows, p, key))]
        out_rows.append(line)
    runs = {p: sum(1 for r in rows if r["policy"] == p and r["side"] == "live") for p in policies}
    headers = ["figure"] + [h for p in policies for h in (f"{p} live (n={runs[p]})", f"{p} sim")]
    return markdown_table(headers, out_rows)


def _verdict(ok: bool | None) -> str:
    return "holds" if ok else ("does not hold" if ok is not None else "cannot be checked")


def _claims(rows: list[dict[str, Any]], policies: Sequence[str], sites: Sequence[Any]) -> list[str]:
    lines: list[str] = []

    def live(p: str, k: str) -> float | None:
        return _live(rows, p, k)[0]

    have = all(p in policies for p in POLICIES)
    if have:
        sd = {p: live(p, "slowdown_all") for p in POLICIES}
        wt = {p: live(p, "wait_all") for p in POLICIES}
        ok = None if None in sd.values() else sd["tags-sets"] == min(v for v in sd.values() if v is not None)
        lines.append(f"- TAGS-sets has the lowest job slowdown: **{_verdict(ok)}** ({_fmt_map(sd)}).")
        ok = None if None in wt.values() else wt["tags-sets"] == max(v for v in wt.values() if v is not None)
        lines.append(f"- TAGS-sets has the highest average wait: **{_verdict(ok)}** ({_fmt_map(wt)}).")
        ws, wl = live("tags-sets", "wait_short"), live("tags-sets", "wait_long")
        ok = None if ws is None or wl is None else ws < wl
        lines.append(
            f"- TAGS-sets gives short jobs short waits and long jobs long ones: **{_verdict(ok)}** "
            f"(short {fmt(ws)} s, long {fmt(wl)} s)."
        )
        fs1, fs2 = sites[0].name, sites[1].name
        gap = {
            p: (None if live(p, f"site_{fs1}") is None else abs(live(p, f"site_{fs1}") - live(p, f"site_{fs2}")))  # type: ignore[operator]
            for p in POLICIES
        }
        ok = None if None in gap.values() else all(gap["tags-sets"] < gap[p] for p in ("ff", "sjf"))  # type: ignore[operator]
        lines.append(
            f"- TAGS-sets balances {fs1} and {fs2} better than FF and SJF (|share {fs1} − share {fs2}|): "
            f"**{_verdict(ok)}** ({_fmt_map(gap)})."
        )
        shares = [live("tags-sets", f"site_{s.name}") for s in sites]
        ok = None if None in shares else all(a >= b for a, b in itertools.pairwise(shares))  # type: ignore[operator]
        lines.append(
            "- TAGS-sets completes decreasing shares of the jobs on "
            + ", ".join(s.name for s in sites)
            + f" (local, then private, then public): **{_verdict(ok)}** ("
            + ", ".join(f"{s.name} {fmt(v)}" for s, v in zip(sites, shares, strict=True))
            + ")."
        )
        for key, word, higher in (
            ("cost", "cost", True),
            ("makespan", "makespan", True),
            ("utilization", "utilization", False),
        ):
            v = {p: live(p, key) for p in POLICIES}
            if None in v.values():
                ok = None
            else:
                t = v["tags-sets"]
                ok = all((t >= v[p]) if higher else (t <= v[p]) for p in ("ff", "sjf"))  # type: ignore[operator]
            lines.append(
                f"- TAGS-sets has the {'highest' if higher else 'lowest'} {word}: **{_verdict(ok)}** ({_fmt_map(v)})."
            )
    completed = all(r["completed"] == r["jobs"] for r in rows if r["side"] == "live")
    lines.append(f"- Every job completes in every live run: **{_verdict(completed)}**.")
    for p in policies:
        parts = []
        for key, word in (("slowdown_all", "slowdown"), ("wait_all", "wait")):
            lv, sv = live(p, key), _sim(rows, p, key)
            if lv is None or sv is None or sv == 0:
                parts.append(f"{word} n/a")
                continue
            rel = (lv - sv) / sv
            parts.append(
                f"{word} {fmt(lv)} live vs {fmt(sv)} simulated ({rel:+.1%}, {_verdict(abs(rel) <= LIVE_WITHIN)})"
            )
        lines.append(f"- {p}: live and simulated within {LIVE_WITHIN:.0%}: " + "; ".join(parts) + ".")
    return lines


def _fmt_map(values: dict[str, float | None]) -> str:
    return ", ".join(f"{k} {fmt(v)}" for k, v in values.items())


def _bars(ax: Any, rows: list[dict[str, Any]], policies: Sequence[str], key: str, *, with_sim: bool = True) -> None:
    x = np.arange(len(policies))
    means, errs = zip(*(_live(rows, p, key) for p in policies), strict=True)
    ax.bar(
        x - (0.2 if with_sim else 0),
        [m or 0 for m in means],
        0.4 if with_sim else 0.6,
        yerr=[e or 0 for e in errs],
        capsize=3,
        label="live",
    )
    if with_sim:
        ax.bar(x + 0.2, [_sim(rows, p, key) or 0 for p in policies], 0.4, label="simulated")
    ax.set_xticks(x, [p.upper() if p != "tags-sets" else "TAGS-sets" for p in policies])
    ax.grid(True, axis="y", alpha=0.3)


def _types(ax: Any, rows: list[dict[str, Any]], policies: Sequence[str], metric: str) -> None:
    x = np.arange(len(policies))
    for label, off in (("short", -0.27), ("long", 0.0), ("all", 0.27)):
        means, errs = zip(*(_live(rows, p, f"{metric}_{label}") for p in policies), strict=True)
        frac = _live(rows, policies[0], "short_fraction")[0] if label != "all" else None
        share = "" if frac is None else f" ({(frac if label == 'short' else 1 - frac):.0%})"
        ax.bar(x + off, [m or 0 for m in means], 0.27, yerr=[e or 0 for e in errs], capsize=3, label=label + share)
    ax.set_xticks(x, [p.upper() if p != "tags-sets" else "TAGS-sets" for p in policies])
    ax.grid(True, axis="y", alpha=0.3)


def _fig7(rows: list[dict[str, Any]], policies: Sequence[str], path: Path) -> Path:
    fig, axes = figure(2, 2, width=5.5, height=3.8)
    _bars(axes[0][0], rows, policies, "slowdown_all")
    axes[0][0].set_title("(a) average job slowdown")
    _types(axes[0][1], rows, policies, "slowdown")
    axes[0][1].set_title("(b) slowdown per job type (live)")
    _bars(axes[1][0], rows, policies, "wait_all")
    axes[1][0].set_title("(c) average wait time [s, scaled]")
    _types(axes[1][1], rows, policies, "wait")
    axes[1][1].set_title("(d) wait time per job type (live) [s, scaled]")
    for ax in (axes[0][0], axes[0][1], axes[1][0], axes[1][1]):
        ax.legend(fontsize=8)
    return save(fig, path)


def _fig8(rows: list[dict[str, Any]], policies: Sequence[str], path: Path) -> Path:
    fig, axes = figure(3, 1, width=4.2, height=3.8)
    for ax, (key, title) in zip(
        axes[0],
        (("cost", "cost [$]"), ("makespan", "makespan [s, scaled]"), ("utilization", "utilization")),
        strict=True,
    ):
        _bars(ax, rows, policies, key)
        ax.set_title(title)
        ax.legend(fontsize=8)
    return save(fig, path)


def _fig9(rows: list[dict[str, Any]], policies: Sequence[str], site_names: Sequence[str], path: Path) -> Path:
    fig, axes = figure(1, 1, width=7, height=4)
    ax = axes[0][0]
    x = np.arange(len(policies))
    width = 0.8 / max(1, len(site_names))
    for k, name in enumerate(site_names):
        means, errs = zip(*(_live(rows, p, f"site_{name}") for p in policies), strict=True)
        ax.bar(
            x - 0.4 + (k + 0.5) * width,
            [m or 0 for m in means],
            width,
            yerr=[e or 0 for e in errs],
            capsize=2,
            label=name,
        )
    ax.set_xticks(x, [p.upper() if p != "tags-sets" else "TAGS-sets" for p in policies])
    ax.set_ylabel("fraction of jobs completed")
    ax.set_title("jobs completed per site (live)")
    ax.legend(fontsize=8)
    ax.grid(True, axis="y", alpha=0.3)
    return save(fig, path)
