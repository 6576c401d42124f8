"""The KOALA-C evaluation (koala-c-multicluster-multicloud.txt §V), regenerated from real traces.

Four experiments, each a sweep of simulations run by `runner.run_points` (in this process or
local processes with `workers`, or as a `runner.Sweep`: on any executor, with progress and a
points file to resume from):

- `koala-c-limits`: TAGS-chain runtime-limit sweep on the multicluster environment, 1-10
  chains, RR and RND dispatch (Fig. 3), giving the optimal limit per trace rounded to 5 minutes
  and the fraction of short jobs (Table III).
- `koala-c-sets`: TAGS-sets limit sweep on the multicluster and multicloud environment:
  slowdown and cost (Fig. 4).
- `koala-c-multicluster`: FF, RR, SJF, SJF-ideal, HSDF and TAGS-chain vs the number of chains
  (Fig. 5).
- `koala-c-multicloud`: the same policies with TAGS-sets on the multicluster and multicloud
  environment: slowdown and total cost (Fig. 6).

Traces are prepared as in §V-A: jobs larger than 32 nodes are dropped; of grid traces only the
first 50,000 jobs are kept.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from isthmus.experiments.output import figure, fmt, markdown_table, save
from isthmus.experiments.paper import KOALA_C, TAGS_SETS_COST_FACTOR, TAGS_SETS_LIMIT_MIN, TraceFacts, facts_for
from isthmus.experiments.result import ExperimentResult, finish, log_axis, run_experiment, select
from isthmus.experiments.runner import Point, Sweep, policy
from isthmus.metrics import style
from isthmus.policies import registry
from isthmus.workloads.conversion import RUN_CANCELLED

GRID_FIRST_JOBS = 50_000
MAX_NODES = 32
BASELINES = ("ff", "rr", "sjf", "sjf-ideal", "hsdf")


@dataclass(frozen=True)
class Trace:
    """A trace file and how §V-A prepares it."""

    path: str
    label: str
    facts: TraceFacts | None
    first: int | None
    cancelled: str = RUN_CANCELLED

    @classmethod
    def from_path(cls, path: str, cancelled: str = RUN_CANCELLED) -> Trace:
        """Label and preparation from the file name (grid traces: first 50,000 jobs); `cancelled`
        is the treatment of jobs cancelled before they started (SwfConversion.cancelled)."""
        facts = facts_for(path)
        base = Path(path).name
        label = facts.name if facts else base.split(".swf")[0].split(".gwf")[0]
        grid = facts.grid if facts else base.lower().endswith(".gwf") or base.lower().endswith(".gwf.gz")
        return cls(path, label, facts, GRID_FIRST_JOBS if grid else None, cancelled)

    def point(self, env: str, alloc: Any, labels: dict[str, Any], **kw: Any) -> Point:
        """A sweep point on this trace."""
        return Point(
            trace=self.path,
            env=env,
            allocation=alloc,
            max_size=MAX_NODES,
            first=self.first,
            cancelled=self.cancelled,
            labels=tuple({"trace": self.label, **labels}.items()),
            **kw,
        )


# ----------------------------------------------------------------------------------- limits


def koala_c_limits(
    traces: Sequence[str],
    out: Path,
    *,
    chains: Sequence[int] = tuple(range(1, 11)),
    limits_min: Sequence[int] = tuple(range(5, 181, 5)),
    dispatch: Sequence[str] = ("rr", "rnd"),
    table_chains: int = 4,
    workers: int | None = None,
    sweep: Sweep | None = None,
    cancelled: str = RUN_CANCELLED,
) -> ExperimentResult:
    """TAGS-chain runtime-limit sweep (Fig. 3) and the optimal limit per trace (Table III).

    The optimum is the limit with the lowest average slowdown with `table_chains` chains and RR
    dispatch (Figs. 3c/d use four chains), rounded to 5 minutes by the grid itself.
    """
    ts = [Trace.from_path(t, cancelled) for t in traces]
    points = [
        t.point(
            f"koala-c-multicluster:k={k}",
            policy("tags-chain", limits=(lim * 60.0,), dispatch=d, seed=1),
            {"chains": k, "dispatch": d, "limit_min": lim},
            provisioning=policy("none"),
            short_threshold=lim * 60.0,
        )
        for t in ts
        for d in dispatch
        for k in chains
        for lim in limits_min
    ]
    result = ExperimentResult("koala-c-limits", out, run_experiment("koala-c-limits", points, workers, sweep))
    rows = result.rows
    table = []
    per_chain = []
    for t in ts:
        best = _best(select(rows, trace=t.label, dispatch="rr", chains=table_chains))
        paper = t.facts
        table.append(
            [
                t.label,
                best["limit_min"] if best else None,
                paper.optimal_limit_min if paper else None,
                f"{best['short_fraction']:.0%}" if best and best.get("short_fraction") is not None else None,
                f"{paper.short_fraction:.0%}" if paper else None,
                best["slowdown_mean"] if best else None,
            ]
        )
        for k in chains:
            b = _best(select(rows, trace=t.label, dispatch="rr", chains=k))
            r = _best(select(rows, trace=t.label, dispatch="rnd", chains=k))
            per_chain.append([t.label, k, b and b["limit_min"], b and b["slowdown_mean"], r and r["limit_min"]])
        _plot_limits(result, t.label, chains, table_chains)
    body = [
        "TAGS-chain on the KOALA-C multicluster environment (chains of two 32-node clusters, 30 s rounds), "
        f"runtime limit of the first site swept over {limits_min[0]}-{limits_min[-1]} min in steps of "
        f"{limits_min[1] - limits_min[0] if len(limits_min) > 1 else 0} min, {min(chains)}-{max(chains)} chains, "
        f"dispatch {', '.join(d.upper() for d in dispatch)}; jobs of at most {MAX_NODES} nodes; grid traces: first "
        f"{GRID_FIRST_JOBS:,} jobs.",
        f"## Table III: optimal runtime limit of short jobs ({table_chains} chains, RR dispatch)",
        markdown_table(
            [
                "trace",
                "limit (min), isthmus",
                "limit (min), paper",
                "short jobs, isthmus",
                "short jobs, paper",
                "slowdown at the optimum",
            ],
            table,
        ),
        "## Optimal limit per number of chains",
        markdown_table(["trace", "chains", "RR optimum (min)", "RR slowdown", "RND optimum (min)"], per_chain),
    ]
    return finish(result, "KOALA-C TAGS-chain runtime limits (Fig. 3, Table III)", body)


def _best(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    ok = [r for r in rows if r.get("slowdown_mean") is not None and not r.get("jobs_unfinished")]
    return min(ok, key=lambda r: (r["slowdown_mean"], r["limit_min"])) if ok else None


def _plot_limits(result: ExperimentResult, trace: str, chains: Sequence[int], table_chains: int) -> None:
    fig = draw_limits(select(result.rows, trace=trace), trace, chains, table_chains)
    result.files[f"fig3-{trace}"] = save(fig, result.out_dir / f"fig3-{trace}.png")


def _chains(k: int) -> str:
    return f"{k} chain" if k == 1 else f"{k} chains"


def draw_limits(rows: list[dict[str, Any]], trace: str, chains: Sequence[int], table_chains: int) -> Figure:
    """Fig. 3 of one trace from its rows of the limit sweep: slowdown and wait against the runtime
    limit per number of chains (RR), per dispatch, and per job class, titled with the trace and
    the environment."""
    fig, axes = figure(2, 2)
    style.title(fig, f"TAGS-chain runtime limits (Fig. 3) — {trace} on koala-c-multicluster (k chains)")
    for k in chains:
        rr = sorted(select(rows, dispatch="rr", chains=k), key=lambda r: r["limit_min"])
        if rr:
            x = [r["limit_min"] for r in rr]
            axes[0][0].plot(x, [r["slowdown_mean"] for r in rr], label=_chains(k))
            axes[0][1].plot(x, [r["wait_mean"] for r in rr], label=_chains(k))
    log_axis(axes[0][0], "runtime limit of short jobs (min)", "average slowdown", f"{trace}: RR (a)")
    log_axis(axes[0][1], "runtime limit of short jobs (min)", "average wait (s)", f"{trace}: RR (b)")
    for d in ("rr", "rnd"):
        sel = sorted(select(rows, dispatch=d, chains=table_chains), key=lambda r: r["limit_min"])
        if sel:
            axes[1][0].plot([r["limit_min"] for r in sel], [r["slowdown_mean"] for r in sel], label=d.upper())
    log_axis(axes[1][0], "runtime limit of short jobs (min)", "average slowdown", f"{trace}: {table_chains} chains (c)")
    sel = sorted(select(rows, dispatch="rr", chains=table_chains), key=lambda r: r["limit_min"])
    if sel:
        x = [r["limit_min"] for r in sel]
        for key, label in (("short_wait_mean", "short"), ("long_wait_mean", "long"), ("wait_mean", "all")):
            axes[1][1].plot(x, [r.get(key) or math.nan for r in sel], label=label)
    log_axis(
        axes[1][1], "runtime limit of short jobs (min)", "average wait (s)", f"{trace}: {table_chains} chains, RR (d)"
    )
    for row in axes:
        for ax in row:
            ax.legend(fontsize=7)
    return fig


# ------------------------------------------------------------------------------------- sets


def koala_c_sets(
    traces: Sequence[str],
    out: Path,
    *,
    limits_min: Sequence[int] = tuple(range(10, 181, 10)),
    workers: int | None = None,
    sweep: Sweep | None = None,
    cancelled: str = RUN_CANCELLED,
) -> ExperimentResult:
    """TAGS-sets runtime-limit sweep on the multicluster and multicloud environment (Fig. 4)."""
    ts = [Trace.from_path(t, cancelled) for t in traces]
    points = [
        t.point(
            "koala-c-multicloud",
            policy("tags-sets", limits=(lim * 60.0,)),
            {"limit_min": lim},
            short_threshold=lim * 60.0,
        )
        for t in ts
        for lim in limits_min
    ]
    result = ExperimentResult("koala-c-sets", out, run_experiment("koala-c-sets", points, workers, sweep))
    fig, axes = figure(2, 1)
    style.title(fig, "TAGS-sets runtime limits (Fig. 4) — per trace on koala-c-multicloud")
    table = []
    for t in ts:
        sel = sorted(select(result.rows, trace=t.label), key=lambda r: r["limit_min"])
        x = [r["limit_min"] for r in sel]
        axes[0][0].plot(x, [r["slowdown_mean"] for r in sel], marker="o", ms=3, label=t.label)
        axes[0][1].plot(x, [r["cost_charged"] or math.nan for r in sel], marker="o", ms=3, label=t.label)
        sd = [r["slowdown_mean"] for r in sel if r["slowdown_mean"] is not None]
        cost = [r["cost_charged"] for r in sel if r["cost_charged"] is not None]
        at40 = next((r for r in sel if r["limit_min"] == TAGS_SETS_LIMIT_MIN), None)
        table.append(
            [
                t.label,
                min(sd) if sd else None,
                max(sd) if sd else None,
                min(cost) if cost else None,
                max(cost) if cost else None,
                at40 and at40["slowdown_mean"],
                at40 and at40["cost_charged"],
            ]
        )
    log_axis(axes[0][0], "runtime limit of short jobs (min)", "average slowdown", "TAGS-sets (Fig. 4a)")
    log_axis(axes[0][1], "runtime limit of short jobs (min)", "total cost ($)", "TAGS-sets (Fig. 4b)")
    for ax in axes[0]:
        ax.legend(fontsize=7)
    result.files["fig4"] = save(fig, out / "fig4.png")
    body = [
        "TAGS-sets on the KOALA-C multicluster and multicloud environment (set 1: all five sites with the "
        "swept limit; set 2: c3, private and public clouds), On-Demand provisioning, 30 s rounds.",
        "The paper (§V-B) finds that the limit has little impact on the slowdown but a large one on cost, and "
        f"uses {TAGS_SETS_LIMIT_MIN} min.",
        markdown_table(
            [
                "trace",
                "slowdown min",
                "slowdown max",
                "cost min ($)",
                "cost max ($)",
                f"slowdown at {TAGS_SETS_LIMIT_MIN} min",
                f"cost at {TAGS_SETS_LIMIT_MIN} min ($)",
            ],
            table,
        ),
    ]
    return finish(result, "KOALA-C TAGS-sets runtime limits (Fig. 4)", body)


# ------------------------------------------------------------------------------ multicluster


def koala_c_multicluster(
    traces: Sequence[str],
    out: Path,
    *,
    chains: Sequence[int] = tuple(range(1, 11)),
    workers: int | None = None,
    sweep: Sweep | None = None,
    cancelled: str = RUN_CANCELLED,
) -> ExperimentResult:
    """FF, RR, SJF, SJF-ideal, HSDF and TAGS-chain vs the number of chains (Fig. 5).

    TAGS-chain uses the trace's Table III limit from the paper (25 min when unknown), RR dispatch.
    """
    ts = [Trace.from_path(t, cancelled) for t in traces]
    points = []
    for t in ts:
        limit = (t.facts.optimal_limit_min if t.facts else 25) * 60.0
        for k in chains:
            env = f"koala-c-multicluster:k={k}"
            for p in BASELINES:
                points.append(
                    t.point(env, policy(p), {"chains": k, "clusters": 2 * k, "policy": p}, provisioning=policy("none"))
                )
            points.append(
                t.point(
                    env,
                    policy("tags-chain", limits=(limit,), dispatch="rr"),
                    {"chains": k, "clusters": 2 * k, "policy": "tags-chain"},
                    provisioning=policy("none"),
                )
            )
    result = ExperimentResult(
        "koala-c-multicluster", out, run_experiment("koala-c-multicluster", points, workers, sweep)
    )
    names = (*BASELINES, "tags-chain")
    fig, axes = figure(len(ts), 2, width=4.5, height=3.5)
    style.title(fig, "Policies by number of clusters (Fig. 5) — per trace on koala-c-multicluster (k chains)")
    body = [
        "All policies on the KOALA-C multicluster environment (k chains of two 32-node clusters, 30 s rounds); "
        "TAGS-chain with the paper's Table III limit for the trace, RR dispatch."
    ]
    for col, t in enumerate(ts):
        sel = select(result.rows, trace=t.label)
        table = []
        for p in names:
            pts = sorted(select(sel, policy=p), key=lambda r: r["clusters"])
            axes[0][col].plot(
                [r["clusters"] for r in pts], [r["slowdown_mean"] for r in pts], marker="o", ms=3, label=p
            )
            axes[1][col].plot([r["clusters"] for r in pts], [r["wait_mean"] for r in pts], marker="o", ms=3, label=p)
            table.append([p, *[r["slowdown_mean"] for r in pts]])
        log_axis(axes[0][col], "number of clusters", "average slowdown", f"{t.label} (Fig. 5)")
        log_axis(axes[1][col], "number of clusters", "average wait (s)", t.label)
        axes[0][col].legend(fontsize=7)
        body += [
            f"## {t.label}: average slowdown by number of clusters",
            markdown_table(["policy", *[str(2 * k) for k in chains]], table),
        ]
        body.append(_multicluster_claims(sel, chains))
    result.files["fig5"] = save(fig, out / "fig5.png")
    return finish(result, "KOALA-C policies on the multicluster environment (Fig. 5)", body)


def _multicluster_claims(rows: list[dict[str, Any]], chains: Sequence[int]) -> str:
    worst_rr = 0
    heur_better = 0
    tags_best_small = 0
    for k in chains:
        sd = {r["policy"]: r["slowdown_mean"] for r in rows if r["chains"] == k and r["slowdown_mean"] is not None}
        if len(sd) < 6:
            continue
        worst_rr += max(sd, key=lambda p: sd[p]) == "rr"
        heur_better += min(sd["sjf"], sd["hsdf"]) <= min(sd["ff"], sd["rr"])
        if k <= 2:
            tags_best_small += min(sd, key=lambda p: sd[p]) == "tags-chain"
    n = len(chains)
    small = len([k for k in chains if k <= 2])
    return "\n".join(
        [
            "Paper's findings (§V-C1) checked on these runs:",
            f"- RR has the highest slowdown: {worst_rr} of {n} system sizes.",
            f"- SJF or HSDF better than FF and RR: {heur_better} of {n} system sizes.",
            f"- TAGS-chain best when the system is small (2 or 4 clusters): {tags_best_small} of {small}.",
        ]
    )


# -------------------------------------------------------------------------------- multicloud


def koala_c_multicloud(
    traces: Sequence[str],
    out: Path,
    *,
    limit_min: int = TAGS_SETS_LIMIT_MIN,
    workers: int | None = None,
    sweep: Sweep | None = None,
    cancelled: str = RUN_CANCELLED,
) -> ExperimentResult:
    """FF, RR, SJF, SJF-ideal, HSDF and TAGS-sets on the multicluster and multicloud environment (Fig. 6)."""
    ts = [Trace.from_path(t, cancelled) for t in traces]
    points = []
    for t in ts:
        for p in BASELINES:
            points.append(t.point("koala-c-multicloud", policy(p), {"policy": p}, short_threshold=limit_min * 60.0))
        points.append(
            t.point(
                "koala-c-multicloud",
                policy("tags-sets", limits=(limit_min * 60.0,)),
                {"policy": "tags-sets"},
                short_threshold=limit_min * 60.0,
            )
        )
    result = ExperimentResult("koala-c-multicloud", out, run_experiment("koala-c-multicloud", points, workers, sweep))
    names = (*BASELINES, "tags-sets")
    fig, axes = figure(2, 1, width=7.0)
    width = 0.8 / len(names)
    body = [
        "FF, RR, SJF, SJF-ideal, HSDF and TAGS-sets (set 1: all five sites, limit "
        f"{limit_min} min; set 2: c3 and both clouds) on the KOALA-C multicluster and multicloud environment: "
        "three 32-node clusters, a free private cloud of 8-64 VMs, a public cloud of up to 128 VMs at "
        "$0.065 per VM-hour billed hourly; On-Demand provisioning; 30 s rounds.",
    ]
    slow_rows, cost_rows, claims = [], [], []
    for i, p in enumerate(names):
        sd = [(select(result.rows, trace=t.label, policy=p) or [{}])[0].get("slowdown_mean") for t in ts]
        cost = [(select(result.rows, trace=t.label, policy=p) or [{}])[0].get("cost_charged") for t in ts]
        xs = [j + i * width for j in range(len(ts))]
        axes[0][0].bar(xs, [v or math.nan for v in sd], width, label=p)
        axes[0][1].bar(xs, [v or math.nan for v in cost], width, label=p)
        slow_rows.append([p, *sd])
        cost_rows.append([p, *cost])
    for ax, ylabel, title in (
        (axes[0][0], "average slowdown", "(a) slowdown"),
        (axes[0][1], "total cost ($)", "(b) cost"),
    ):
        ax.set_xticks([j + 0.4 - width / 2 for j in range(len(ts))], [t.label for t in ts])
        ax.set_xlabel("trace")
        ax.set_ylabel(ylabel)
        ax.set_title(f"Fig. 6{title}")
        ax.set_ylim(bottom=0)  # bars: a linear axis from 0
        ax.legend(title="policy")
    fig.suptitle("KOALA-C multicluster and multicloud environment (koala-c-multicloud), per trace")
    result.files["fig6"] = save(fig, out / "fig6.png")
    for t in ts:
        claims.append(_multicloud_claims(t.label, select(result.rows, trace=t.label)))
    body += [
        "## Average job slowdown",
        markdown_table(["policy", *[t.label for t in ts]], slow_rows),
        "## Total cost of the public cloud ($, charged per started VM-hour)",
        markdown_table(["policy", *[t.label for t in ts]], cost_rows),
        "## The paper's findings (§V-C2) checked on these runs",
        markdown_table(
            [
                "trace",
                "RR worst",
                "FF second worst",
                "SJF, HSDF never worse than FF and RR",
                "TAGS-sets best but for SJF-ideal",
                "TAGS-sets cost / median other",
                f"paper: {TAGS_SETS_COST_FACTOR[0]}-{TAGS_SETS_COST_FACTOR[1]}x",
            ],
            claims,
        ),
    ]
    return finish(result, "KOALA-C policies on the multicluster and multicloud environment (Fig. 6)", body)


def _oracle(name: str) -> bool:
    """Whether allocation policy `name` reads the jobs' actual runtimes (SJF-ideal: a bound, not a contender)."""
    return bool(registry.info("allocation", name).cls.needs_true_runtimes)


def _multicloud_claims(label: str, rows: list[dict[str, Any]]) -> list[Any]:
    sd = {r["policy"]: r["slowdown_mean"] for r in rows if r.get("slowdown_mean") is not None}
    cost = {r["policy"]: r["cost_charged"] or 0.0 for r in rows}
    if len(sd) < 6:
        return [label, "–", "–", "–", "–", "–", ""]
    order = sorted(sd, key=lambda p: sd[p], reverse=True)
    others = sorted(cost[p] for p in cost if p != "tags-sets")
    median = others[len(others) // 2] if others else 0.0
    factor = cost["tags-sets"] / median if median else None
    yes = {True: "yes", False: "no"}
    return [
        label,
        yes[order[0] == "rr"],
        yes[order[1] == "ff"],
        yes[max(sd["sjf"], sd["hsdf"]) <= min(sd["ff"], sd["rr"])],
        yes[next(p for p in sorted(sd, key=lambda p: sd[p]) if not _oracle(p)) == "tags-sets"],
        fmt(factor) + "x" if factor is not None else "–",
        "",
    ]


EXPERIMENTS: dict[str, Callable[..., ExperimentResult]] = {
    "koala-c-limits": koala_c_limits,
    "koala-c-sets": koala_c_sets,
    "koala-c-multicluster": koala_c_multicluster,
    "koala-c-multicloud": koala_c_multicloud,
}

DEFAULT_TRACES = (
    "CTC-SP2-1996-3.1-cln.swf.gz",
    "KTH-SP2-1996-2.1-cln.swf.gz",
    "SDSC-SP2-1998-4.2-cln.swf.gz",
    "LCG.swf.gz",
)
__all__ = ["DEFAULT_TRACES", "EXPERIMENTS", "KOALA_C", "ExperimentResult"]
