"""`ibm-cloud`: the IBM meta-scheduler report's enterprise cluster and cloud domain, regenerated
as two peer managers on one simulated clock (ibm-meta-schedulers-cloud.txt §3-4).

Setup (§3, Figure 2; §4.2): every job is submitted to the enterprise manager (MS-A), whose local
scheduler runs a 300-node cluster with backfilling (LoadLeveler: EASY here). A second manager
(MS-B, the cloud domain) runs a cloud of 75, 150 or 200 virtual nodes, present only from 3,000 s
to 10,000 s of the reduced trace (§4.2.2: "we pre-fix the period of time when a cloud cluster is
present"), started at once when the window opens (provisioning is out of the paper's scope) and
scheduled with backfilling too. MS-A forwards with the four-stage matching (`ibm-matching`: find;
filters parallel, failed resource, visited schedulers, cloud-short; freenode sort; match); the
proxy reports each domain's resource data every 15 s, which is also each manager's scheduling
period. When the window closes the cloud is drained: running jobs finish there, jobs not started
fail back to MS-A and are rescheduled at the base cluster, the failed-resource filter keeping them
away from the cloud. The baselines are the 300-node cluster alone and one 450-node cluster.

Trace: the report compresses "the part of a trace that represents the workload of a whole week
to about 3 hours" (408 CTC jobs in 2.8 hours) with the heuristic of its reference [24], the one
of the Villegas dissertation §4.5.1.2 (interval, sampling, time scaling). The week is not
identified; `DEFAULT_REDUCTION` is the CTC week chosen to match what the report says of its
reduced trace (see `docs/experiments/ibm-cloud.md`).

Measured (§4.2): delay time = finish − arrival − execution time, percentiles 50/80/90/95
(Table 1); average utilization of the cloud over its window (Table 2); processors allocated (per
domain) and requested by the jobs in the system over time (Figs 7-8).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from isthmus.experiments.output import figure, fmt, markdown_table, save, write_csv
from isthmus.experiments.reduced import Reduction, cancelled_dropped, reduced_jobs
from isthmus.experiments.result import ExperimentResult, finish, run_experiment
from isthmus.experiments.runner import Point, Sweep, policy
from isthmus.metrics import style
from isthmus.workloads.conversion import RUN_CANCELLED

NAME = "ibm-cloud"
DEFAULT_TRACES = ("CTC-SP2-1996-3.1-cln.swf.gz",)
#: (label, enterprise cluster nodes, cloud nodes): Table 1's CTC rows and Table 2's 200-node cloud
CONFIGS: tuple[tuple[str, int, int], ...] = (
    ("450", 450, 0),
    ("300+200", 300, 200),
    ("300+150", 300, 150),
    ("300+75", 300, 75),
    ("300", 300, 0),
)
#: §4.2.2: the cloud is present from 3,000 s to 10,000 s of the reduced CTC trace
WINDOW = (3000.0, 10000.0)
#: a week of CTC-SP2 from day 86.5, one job of three, arrivals x 1/60 (a week in 2.8 h, as the
#: report says), runtimes x 1/18 (the largest compression leaving no job over an hour, as the
#: report says: CTC's longest job ran 18 h): 403 jobs, ten of 129 processors arriving together
DEFAULT_REDUCTION = Reduction(start_day=86.5, days=7.0, keep=1, every=3, arrival_scale=1 / 60, runtime_scale=1 / 18)
#: the report's figures (Table 1 CTC rows, seconds; Table 2 CTC)
SEED_DELAY: dict[str, tuple[float, float, float, float]] = {
    "450": (7, 200, 690, 1000),
    "300+150": (9, 220, 450, 700),
    "300+75": (10, 220, 1200, 2900),
    "300": (120, 1100, 3100, 4500),
}
SEED_CLOUD_UTIL: dict[str, float] = {"300+75": 0.56, "300+150": 0.57}
PERCENTILES = (50, 80, 90, 95)
#: seconds between two samples of the processor time series (Figs 7-8)
SERIES_STEP = 60.0
ENTERPRISE = "enterprise"
CLOUD = "cloud"


def _environments(cluster: int, cloud: int, window: tuple[float, float]) -> tuple[Any, Any | None]:
    """The enterprise domain's environment and the cloud domain's (None without a cloud), from
    the bundled `ibm-enterprise-cloud` (one environment holding both sites) split in two."""
    from isthmus.config import load_environment

    start, end = window
    env = load_environment(f"ibm-enterprise-cloud:cluster={cluster},cloud={cloud},start={start:g},end={end:g}")
    enterprise = dataclasses.replace(env, name=ENTERPRISE, sites=(env.site(ENTERPRISE),), description="")
    if cloud == 0:
        return enterprise, None
    cloud_env = dataclasses.replace(env, name=CLOUD, sites=(env.site(CLOUD),), description="")
    return enterprise, cloud_env


def evaluate_ibm(point: Point) -> dict[str, Any]:
    """Simulate one configuration of the report (a top-level function: any worker runs it) and
    return its row: delay percentiles, cloud figures, forwarding counts and the time series."""
    from isthmus.federation.run import Manager, simulate_federation
    from isthmus.federation.simulated import LatencyModel
    from isthmus.metrics.run import compute_run_metrics
    from isthmus.model.environment import PolicyChoice
    from isthmus.model.events import EventKind
    from isthmus.model.peers import PeerRole

    extra = dict(point.extra)
    reduction = Reduction.from_items(extra)
    jobs = reduced_jobs(point.trace, reduction, point.cancelled)
    cluster, cloud = int(extra["cluster"]), int(extra["cloud"])
    window = (float(extra["window_start"]), float(extra["window_end"]))
    enterprise, cloud_env = _environments(cluster, cloud, window)
    selection = PolicyChoice(point.allocation[0], dict(point.allocation[1]))
    managers = [Manager(ENTERPRISE, enterprise, selection if cloud_env else None, jobs)]
    links: list[tuple[str, str, PeerRole]] = []
    if cloud_env is not None:
        managers.append(Manager(CLOUD, cloud_env))
        links.append((ENTERPRISE, CLOUD, PeerRole.PROVIDER))
    fed = simulate_federation(
        managers,
        links=links,
        latency=LatencyModel(float(extra["latency"])),
        push_threshold=None,
        refresh=float(extra["refresh"]),
        label=str(dict(point.labels)["config"]),
    )
    merged = fed.merged
    m = compute_run_metrics(merged.log, merged.jobs, merged.env, merged.end_time)
    row: dict[str, Any] = dict(point.labels)
    s = m.summary
    row.update(
        {
            "jobs": len(jobs),
            "jobs_completed": s.get("jobs_completed"),
            "jobs_unfinished": s.get("jobs_unfinished"),
            "jobs_rejected": s.get("jobs_rejected"),
            **{f"delay_p{q}": s.get(f"delay_p{q}") for q in PERCENTILES},
            "delay_mean": float(np.nanmean(m.records.delay)) if len(m.records.delay) else None,
            "makespan": s.get("makespan"),
            "forwarded": fed.forwarded,
            "failed_back": fed.returned,
            "messages": fed.messages,
        }
    )
    ts = m.timeseries
    base = ts.allocated_by_site[f"{ENTERPRISE}/{ENTERPRISE}"]
    cloud_series = ts.allocated_by_site.get(f"{CLOUD}/{CLOUD}")
    if cloud_series is not None:
        t0, t1 = window
        busy = float(cloud_series.integral_to(t1) - cloud_series.integral_to(t0))
        row["cloud_utilization"] = busy / (cloud * (t1 - t0))
        runs = m.runs
        on_cloud = runs.site == merged.env.sites.index(merged.env.site(f"{CLOUD}/{CLOUD}"))
        row["cloud_jobs"] = int(np.count_nonzero(on_cloud & (runs.outcome == int(EventKind.END))))
        row["cloud_after_window_s"] = float(cloud_series.integral_to(merged.end_time) - cloud_series.integral_to(t1))
    else:
        row["cloud_utilization"] = None
        row["cloud_jobs"] = 0
    end = max(float(merged.end_time), window[1])
    grid = np.arange(0.0, end + SERIES_STEP, SERIES_STEP)
    row["series_time"] = grid.tolist()
    row["series_requested"] = ts.requested.value_at(grid).tolist()
    row["series_allocated_base"] = base.value_at(grid).tolist()
    row["series_allocated_cloud"] = (
        cloud_series.value_at(grid).tolist() if cloud_series is not None else [0.0] * grid.size
    )
    row["simulation_seconds"] = round(fed.wall_seconds, 3)
    row["cancelled"] = point.cancelled
    row["cancelled_dropped"] = cancelled_dropped(point.trace, point.cancelled)
    return row


def _points(
    traces: Sequence[str],
    configs: Sequence[tuple[str, int, int]],
    reduction: Reduction,
    window: tuple[float, float],
    cancelled: str,
    latency: float,
    refresh: float,
) -> list[Point]:
    from isthmus.federation.simulated import DEFAULT_LATENCY

    return [
        Point(
            trace=t,
            env="ibm-enterprise-cloud",
            # the point's policy is the managers' site-selection policy (allocation is the sites')
            allocation=policy("ibm-matching"),
            labels=(("trace", Path(t).name.split(".swf")[0]), ("config", label)),
            extra=(
                *reduction.as_items(),
                ("cluster", cluster),
                ("cloud", cloud),
                ("window_start", window[0]),
                ("window_end", window[1]),
                ("latency", DEFAULT_LATENCY if latency < 0 else latency),
                ("refresh", refresh),
            ),
            cancelled=cancelled,
            window=(reduction.start_day * 86400.0, reduction.days * 86400.0),
        )
        for t in traces
        for label, cluster, cloud in configs
    ]


SERIES_KEYS = ("series_time", "series_requested", "series_allocated_base", "series_allocated_cloud")


def ibm_cloud(
    traces: Sequence[str],
    out: Path,
    *,
    configs: Sequence[tuple[str, int, int]] = CONFIGS,
    reduction: Reduction = DEFAULT_REDUCTION,
    window: tuple[float, float] = WINDOW,
    workers: int | None = None,
    sweep: Sweep | None = None,
    cancelled: str = RUN_CANCELLED,
    latency: float = -1.0,
    refresh: float = 15.0,
    start_day: float | None = None,
) -> ExperimentResult:
    """Run the report's configurations on each trace and write `ibm-cloud.csv`, `series.csv`,
    Table 1/2 figures, Figs 7-8 and `summary.md` checking the report's statements.

    `latency` < 0 uses the federation's default one-way message delay; `start_day` moves the
    reduced week (days from the trace's first submit; default the reduction's).
    """
    if start_day is not None:
        reduction = dataclasses.replace(reduction, start_day=start_day)
    if not traces:
        raise ValueError(f"{NAME} needs a trace (the report uses CTC-SP2: {DEFAULT_TRACES[0]})")
    if not window[0] < window[1]:
        raise ValueError(f"the cloud's window must open before it closes, got {window}")
    labels = [c[0] for c in configs]
    if len(set(labels)) != len(labels):
        raise ValueError(f"configuration labels must be unique, got {labels}")
    points = _points(traces, configs, reduction, window, cancelled, latency, refresh)
    sweep = (
        dataclasses.replace(sweep, evaluate_point=evaluate_ibm)
        if sweep
        else Sweep(workers, evaluate_point=evaluate_ibm)
    )
    full = run_experiment(NAME, points, None, sweep)
    rows = [{k: v for k, v in r.items() if k not in SERIES_KEYS} for r in full]
    result = ExperimentResult(NAME, out, rows)
    result.files["series"] = write_csv(_series_rows(full), out / "series.csv")
    trace_labels = sorted({str(r["trace"]) for r in rows})
    _delay_figure(result, full, trace_labels, labels)
    _series_figures(result, full, trace_labels, window)
    body = _summary(full, trace_labels, labels, reduction, window, configs)
    return finish(result, "IBM meta-schedulers and a cloud domain (Table 1, Table 2, Figs 7-8)", body)


def _series_rows(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for r in rows:
        for t, req, base, cloud in zip(*(r[k] for k in SERIES_KEYS), strict=True):
            out.append(
                {
                    "trace": r["trace"],
                    "config": r["config"],
                    "time": t,
                    "requested": req,
                    "allocated_base": base,
                    "allocated_cloud": cloud,
                }
            )
    return out


def _find(rows: Sequence[Mapping[str, Any]], trace: str, config: str) -> Mapping[str, Any] | None:
    return next((r for r in rows if r["trace"] == trace and r["config"] == config), None)


ENVIRONMENT = "ibm-enterprise-cloud"
"""The bundled environment the figures' titles name."""


def _delay_figure(
    result: ExperimentResult, rows: Sequence[Mapping[str, Any]], traces: Sequence[str], configs: Sequence[str]
) -> None:
    result.files["table1_delay"] = save(draw_delay(rows, traces, configs), result.out_dir / "table1_delay.png")


def draw_delay(rows: Sequence[Mapping[str, Any]], traces: Sequence[str], configs: Sequence[str]) -> Figure:
    """Table 1 as grouped bars: delay percentiles per configuration on a linear axis (the report
    gives a table, not a figure), with the report's values as dots; a panel per trace."""
    fig, axes = figure(len(traces), 1, width=6.4, height=3.8)
    style.title(fig, f"Table 1: delay-time percentiles per configuration — on {ENVIRONMENT}")
    width = 0.8 / max(1, len(configs))
    for col, t in enumerate(traces):
        ax = axes[0][col]
        x = np.arange(len(PERCENTILES))
        for k, c in enumerate(configs):
            r = _find(rows, t, c)
            vals = [np.nan if r is None or r.get(f"delay_p{q}") is None else r[f"delay_p{q}"] for q in PERCENTILES]
            xs = x + (k - (len(configs) - 1) / 2) * width
            colour = style.PALETTE[k % len(style.PALETTE)]
            ax.bar(
                xs,
                vals,
                width,
                label=f"{c} nodes",
                color=colour,
                hatch=style.HATCHES[k % len(style.HATCHES)],
                edgecolor="white",
                linewidth=0.5,
            )
            seed = SEED_DELAY.get(c) if t.startswith("CTC") else None
            if seed is not None:
                ax.plot(xs, seed, "o", color=colour, markeredgecolor="black", markersize=4, linestyle="none")
        ax.set_xticks(x, [f"{q}th" for q in PERCENTILES])
        ax.set_ylim(bottom=0)
        ax.set_xlabel("percentile of the delay time")
        ax.set_ylabel("delay time [s]")
        ax.set_title(f"{t} (dots: the report)", fontsize=style.FONT_SIZE)
        ax.grid(False, axis="x")
        ax.legend(title="configuration")
    return fig


def _series_figures(
    result: ExperimentResult, rows: Sequence[Mapping[str, Any]], traces: Sequence[str], window: tuple[float, float]
) -> None:
    for key, fig in draw_series(rows, traces, window).items():
        result.files[key] = save(fig, result.out_dir / f"{key}.png")


def draw_series(
    rows: Sequence[Mapping[str, Any]], traces: Sequence[str], window: tuple[float, float]
) -> dict[str, Figure]:
    """Figs 7 (one cluster) and 8 (with a cloud) by key: processors allocated and requested over
    time, a panel per configuration and trace, the cloud's window shaded."""
    figures: dict[str, Figure] = {}
    requested, base_colour, cloud_colour = style.PALETTE[3], style.PALETTE[0], style.PALETTE[2]
    for key, title, with_cloud in (
        ("fig7_one_cluster", "Fig. 7: one cluster", False),
        ("fig8_with_cloud", "Fig. 8: 300-node cluster with a cloud", True),
    ):
        chosen = [r for r in rows if ("+" in str(r["config"])) == with_cloud or (with_cloud and r["config"] == "300")]
        configs = list(dict.fromkeys(str(r["config"]) for r in chosen))
        if not chosen:
            continue
        fig, axes = figure(len(traces), len(configs), width=6.4, height=2.6)
        style.title(fig, f"{title}, processors over time — on {ENVIRONMENT}")
        for col, t in enumerate(traces):
            for i, c in enumerate(configs):
                ax = axes[i][col]
                r = _find(chosen, t, c)
                if r is None:
                    continue
                tt = np.asarray(r["series_time"])
                ax.step(tt, r["series_requested"], where="post", label="requested", color=requested, lw=0.9)
                base = np.asarray(r["series_allocated_base"])
                cloud = np.asarray(r["series_allocated_cloud"])
                ax.step(
                    tt, base, where="post", label="allocated, base cluster", color=base_colour, lw=0.9, linestyle="--"
                )
                if "+" in c:
                    ax.step(
                        tt,
                        base + cloud,
                        where="post",
                        label="allocated, base + cloud",
                        color=cloud_colour,
                        lw=0.9,
                        linestyle="-.",
                    )
                    ax.axvspan(*window, color=cloud_colour, alpha=0.07, label="cloud available")
                ax.set_title(f"{c} nodes, {t}", fontsize=style.FONT_SIZE)
                ax.set_ylabel("processors")
                ax.set_ylim(bottom=0)
                if i == len(configs) - 1:
                    ax.set_xlabel("time [s]")
            axes[0][col].legend()
        figures[key] = fig
    return figures


def _summary(
    rows: Sequence[Mapping[str, Any]],
    traces: Sequence[str],
    configs: Sequence[str],
    reduction: Reduction,
    window: tuple[float, float],
    config_specs: Sequence[tuple[str, int, int]],
) -> list[str]:
    """The Markdown body: setup, the report's statements checked on these rows, the tables."""
    body = [
        f"Traces: {', '.join(traces)}, reduced as the report's reference [24] (Villegas §4.5.1.2): "
        f"{reduction.describe()}. Configurations: "
        + ", ".join(
            f"{label} ({cluster}-node cluster"
            + (f" + {cloud}-node cloud from {window[0]:g} s to {window[1]:g} s)" if cloud else ")")
            for label, cluster, cloud in config_specs
        )
        + ". Each domain has its own manager; all jobs arrive at the enterprise's, which forwards with the "
        "four-stage matching (ibm-matching); resource data every 15 s; EASY backfilling at both domains. "
        "One run per configuration (the trace is fixed, the simulation deterministic).",
        "## The report's statements and these results",
    ]
    for t in traces:
        body.append(f"### {t}")
        body.append("\n".join(f"- {line}" for line in checks(rows, t)))
        table = []
        for c in configs:
            r = _find(rows, t, c)
            if r is None:
                continue
            seed = SEED_DELAY.get(c) if t.startswith("CTC") else None
            table.append(
                [
                    c,
                    *(r.get(f"delay_p{q}") for q in PERCENTILES),
                    " / ".join(f"{v:g}" for v in seed) if seed else "–",
                    r.get("cloud_utilization"),
                    SEED_CLOUD_UTIL.get(c) if t.startswith("CTC") else None,
                    r.get("forwarded"),
                    r.get("failed_back"),
                    r.get("jobs_completed"),
                    r.get("jobs_rejected"),
                ]
            )
        body.append(
            markdown_table(
                [
                    "nodes",
                    "delay p50 (s)",
                    "p80",
                    "p90",
                    "p95",
                    "report p50/80/90/95",
                    "cloud util.",
                    "report",
                    "forwarded",
                    "failed back",
                    "done",
                    "rejected",
                ],
                table,
            )
        )
    return body


def _p(rows: Sequence[Mapping[str, Any]], t: str, c: str, q: int) -> float | None:
    r = _find(rows, t, c)
    v = None if r is None else r.get(f"delay_p{q}")
    return None if v is None else float(v)


def checks(rows: Sequence[Mapping[str, Any]], trace: str) -> list[str]:
    """The report's statements (§4.2.2), each with the figures of `rows` and a verdict computed
    from them; a statement whose configurations were not run says so."""
    out: list[str] = []
    base, small, mid, single = (_p(rows, trace, c, 80) for c in ("300", "300+75", "300+150", "450"))
    if base is not None and small is not None and single is not None:
        cut = 1 - small / base if base > 0 else 0.0
        near = small <= 2 * single + 60
        verdict = "holds" if cut >= 0.5 and near else ("holds in part" if cut >= 0.5 or near else "does not hold")
        out.append(
            '"compared with no-cloud case, we decrease 80 percentile delay time from 1100 seconds to 220 seconds by '
            f"adding a 75-nodes cloud, which is very close to 450-nodes cluster's performance\": **{verdict}**: "
            f"{fmt(base)} s -> {fmt(small)} s (cut {cut:.0%}; the report's cut 80%), 450 nodes {fmt(single)} s."
        )
    else:
        out.append("80th percentile with a 75-node cloud: not run (needs 300, 300+75 and 450).")
    if small is not None and mid is not None:
        verdict = "holds" if mid >= 0.8 * small else "does not hold"
        out.append(
            '"Adding a bigger size cloud such as 150 nodes does not decrease 80 percentile value": '
            f"**{verdict}**: {fmt(mid)} s with 150 nodes against {fmt(small)} s with 75."
        )
    pairs = [(q, _p(rows, trace, "300+150", q), _p(rows, trace, "450", q)) for q in PERCENTILES]
    if all(a is not None and b is not None for _, a, b in pairs):
        better = [q for q, a, b in pairs if a is not None and b is not None and a < b]
        tail = all(q in better for q in (90, 95))
        verdict = "holds" if tail else ("holds in part" if better else "does not hold")
        out.append(
            '"with 450 nodes in total, adding a 150-nodes cluster outperforms using one single 450-nodes cluster" '
            f"(the report: lower at the 90th and 95th percentiles, not at the 50th and 80th): **{verdict}**: "
            "300+150 is lower at the "
            + (", ".join(f"{q}th" for q in better) or "no")
            + " percentile(s); "
            + "; ".join(f"p{q} {fmt(a)} s against {fmt(b)} s" for q, a, b in pairs)
            + "."
        )
    else:
        out.append("300+150 against 450: not run.")
    u75 = (_find(rows, trace, "300+75") or {}).get("cloud_utilization")
    u150 = (_find(rows, trace, "300+150") or {}).get("cloud_utilization")
    if u75 is not None and u150 is not None:
        verdict = "holds" if abs(u75 - u150) <= 0.1 else "does not hold"
        out.append(
            '"For CTC trace, the bigger 150-nodes cloud has a similar utilization of the 75-nodes cloud" (0.56 and '
            f"0.57): **{verdict}**: {u75:.2f} and {u150:.2f}."
        )
    r300 = _find(rows, trace, "300")
    if r300 is not None:
        t = np.asarray(r300["series_time"]) if "series_time" in r300 else None
        if t is not None:
            req = np.asarray(r300["series_requested"])
            alloc = np.asarray(r300["series_allocated_base"])
            over = req > 300
            low = over & (alloc < 0.8 * 300)
            out.append(
                '300 nodes alone, "though the requirement is higher than the capacity (300) all the time, the system '
                'does not use its full capacity" (big jobs block smaller ones): requested above 300 processors for '
                f"{over.mean():.0%} of the run, and in {low.sum() / max(1, over.sum()):.0%} of that time fewer than "
                f"240 processors were allocated (minimum {alloc[over].min() if over.any() else 0:g})."
            )
    return out
