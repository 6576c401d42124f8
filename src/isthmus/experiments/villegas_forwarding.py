"""`villegas-forwarding`: the forwarding (site-selection) studies of D. Villegas's dissertation
(villegas-resource-brokering-dissertation.txt), regenerated with one simulated manager per site.

- Chapter 4, §4.5.2 (Figs 4.9-4.11): the reduced CTC trace (§4.5.1.2: a week, two jobs of three,
  times compressed 60 times, sizes capped at 128 as §7.5 does) on 450 machines as one site, two
  sites of 225 and three of 150, each site run by its own meta-scheduler with a First-In
  First-Fit local scheduler (`fcbf-aggr` on physical nodes, as §7.5 replicates it); RoundRobin
  forwarding for Figs 4.9-4.10, then LowestQlen, LowestQlenCpus, HighestIdle and LowestLoad
  (Fig. 4.11). Makespan and bounded slowdown.
- Chapter 7, §7.4.3 (Figs 7.8-7.9): virtual providers with the dissertation's On-Demand
  provisioning (OD-S, VMs boot in 600 s and shut down in 60 s, §7.4.1) and FCBF-Aggressive
  allocation: one site of 450 VMs against two of 150 and 300 (a third and two thirds), with
  RoundRobin, HighestCap, BFCap, HighestIdle and BFIdle (capacity counts the VMs a site could
  still lease). Makespan and bounded slowdown.

The seed does not say where jobs enter: here the trace's jobs are submitted to the sites'
managers in turn (job k to manager k mod n, "a job submitter from any client site", §4.5.1),
and a forwarded job runs where it is sent (one hop). Each case runs on several weeks of the trace
(§7.5: "we select multiple sections of the CTC trace with similar characteristics" and report
means with 95% confidence intervals); the figures show those means and intervals.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from isthmus.experiments.output import markdown_table
from isthmus.experiments.reduced import Reduction, cancelled_dropped, reduced_jobs
from isthmus.experiments.result import ExperimentResult, finish, run_experiment
from isthmus.experiments.runner import Point, Sweep, policy
from isthmus.experiments.villegas import _bars, _find, _pm, aggregate
from isthmus.workloads.conversion import RUN_CANCELLED

NAME = "villegas-forwarding"
DEFAULT_TRACES = ("CTC-SP2-1996-3.1-cln.swf.gz",)
#: §4.5.2: 450 machines as one, two or three sites ("we can't reduce the number of machines
#: further, since the maximum number of requested processors is 128")
SITE_SPLITS: dict[int, tuple[int, ...]] = {1: (450,), 2: (225, 225), 3: (150, 150, 150)}
CH4_POLICIES = ("round-robin", "lowest-qlen", "lowest-qlen-cpus", "highest-idle", "lowest-load")
#: §7.4.3: one site of 450 VMs, or a third and two thirds of them
CH7_SPLITS: dict[str, tuple[int, ...]] = {"1 site": (450,), "2 sites": (150, 300)}
CH7_POLICIES = ("round-robin", "highest-cap", "bf-cap", "highest-idle", "bf-idle")
CAPACITY_POLICIES = ("highest-cap", "bf-cap")
IDLE_POLICIES = ("highest-idle", "bf-idle")
USAGE_POLICIES = ("lowest-qlen", "lowest-qlen-cpus", "highest-idle", "lowest-load")
#: weeks of the trace, from its first submit (week 0 is the trace's warm-up, §4.5.1.2)
WEEKS = tuple(range(1, 11))
CAP = 128
WEEK_DAYS = 7.0
LABEL = {
    "round-robin": "RoundRobin",
    "lowest-qlen": "LowestQlen",
    "lowest-qlen-cpus": "LowestQlenCpus",
    "highest-idle": "HighestIdle",
    "lowest-load": "LowestLoad",
    "highest-cap": "HighestCap",
    "bf-cap": "BFCap",
    "bf-idle": "BFIdle",
    "single": "one site",
}


def ch4_reduction(week: int) -> Reduction:
    """§4.5.1.2 on week `week`: two jobs of three, inter-arrival and runtimes / 60, sizes <= 128."""
    return Reduction(
        start_day=week * WEEK_DAYS, days=WEEK_DAYS, keep=2, every=3, arrival_scale=1 / 60, runtime_scale=1 / 60, cap=CAP
    )


def ch7_reduction(week: int) -> Reduction:
    """§7.2.3 on week `week`: "a fragment of the CTC trace representing a week", not compressed;
    sizes capped at 128 (§7.5) so that every job fits the third of the machines."""
    return Reduction(start_day=week * WEEK_DAYS, days=WEEK_DAYS, cap=CAP)


def _site_envs(part: str, sizes: Sequence[int]) -> list[Any]:
    """One environment per manager: physical clusters (chapter 4) or an On-Demand cloud of
    single-processor VMs (chapter 7, the bundled `villegas-parallel`)."""
    from isthmus.config import load_environment
    from isthmus.model.environment import Environment, PolicyChoice
    from isthmus.model.site import Site

    envs = []
    for i, n in enumerate(sizes):
        name = f"site{i + 1}"
        if part == "ch4":
            envs.append(
                Environment(
                    name,
                    (Site(name, nodes=n),),
                    allocation=PolicyChoice("fcbf-aggr"),
                    provisioning=PolicyChoice("none"),
                    round_interval=None,
                )
            )
        else:
            env = load_environment(f"villegas-parallel:vms={n}")
            site = dataclasses.replace(env.sites[0], name=name)
            envs.append(
                dataclasses.replace(env, name=name, sites=(site,), allocation=PolicyChoice("fcbf-aggr"), description="")
            )
    return envs


def evaluate_forwarding(point: Point) -> dict[str, Any]:
    """Simulate one case (a top-level function: any worker runs it) and return its row."""
    from isthmus.federation.run import Manager, simulate_federation
    from isthmus.metrics.run import compute_run_metrics
    from isthmus.model.environment import PolicyChoice

    extra = dict(point.extra)
    reduction = Reduction.from_items(extra)
    jobs = reduced_jobs(point.trace, reduction, point.cancelled)
    sizes = tuple(int(x) for x in str(extra["sizes"]).split("+"))
    envs = _site_envs(str(extra["part"]), sizes)
    selection = PolicyChoice(point.allocation[0], dict(point.allocation[1])) if len(envs) > 1 else None
    n = len(envs)
    managers = [Manager(e.name, e, selection, jobs[i::n]) for i, e in enumerate(envs)]
    refresh = float(extra["refresh"])
    fed = simulate_federation(managers, refresh=refresh if refresh > 0 else None, label=point.allocation[0])
    merged = fed.merged
    m = compute_run_metrics(merged.log, merged.jobs, merged.env, merged.end_time)
    s = m.summary
    row: dict[str, Any] = dict(point.labels)
    row.update(
        {
            "jobs": len(jobs),
            "jobs_completed": s.get("jobs_completed"),
            "jobs_unfinished": s.get("jobs_unfinished"),
            "jobs_rejected": s.get("jobs_rejected"),
            "makespan": s.get("makespan"),
            "bounded_slowdown_mean": s.get("bounded_slowdown_mean"),
            "slowdown_mean": s.get("slowdown_mean"),
            "wait_mean": s.get("wait_mean"),
            "awrt": s.get("awrt"),
            "vm_leases": s.get("vm_leases"),
            "forwarded": fed.forwarded,
            "messages": fed.messages,
            "simulation_seconds": round(fed.wall_seconds, 3),
            "cancelled": point.cancelled,
            "cancelled_dropped": cancelled_dropped(point.trace, point.cancelled),
        }
    )
    return row


def _point(trace: str, part: str, sizes: Sequence[int], selection: str, week: int, cancelled: str) -> Point:
    reduction = ch4_reduction(week) if part == "ch4" else ch7_reduction(week)
    sites = "1 site" if len(sizes) == 1 else f"{len(sizes)} sites"
    return Point(
        trace=trace,
        env=f"villegas-forwarding:{part}",
        # the point's policy is the managers' site-selection policy (allocation is the sites')
        allocation=policy(selection),
        labels=(
            ("trace", Path(trace).name.split(".swf")[0]),
            ("part", part),
            ("sites", sites),
            ("sizes", "+".join(map(str, sizes))),
            ("selection", selection if len(sizes) > 1 else "single"),
            ("week", week),
        ),
        extra=(
            *reduction.as_items(),
            ("part", part),
            ("sizes", "+".join(map(str, sizes))),
            # resource data pushed on every change; in chapter 7 the MS also refreshes it every
            # 20 s (§7.4.1: its scheduling interval); chapter 4 gives no interval (-1: none)
            ("refresh", -1.0 if part == "ch4" else 20.0),
        ),
        cancelled=cancelled,
        window=(reduction.start_day * 86400.0, reduction.days * 86400.0),
    )


def villegas_forwarding(
    traces: Sequence[str],
    out: Path,
    *,
    weeks: Sequence[int] = WEEKS,
    parts: Sequence[str] = ("ch4", "ch7"),
    workers: int | None = None,
    sweep: Sweep | None = None,
    cancelled: str = RUN_CANCELLED,
) -> ExperimentResult:
    """Run chapter 4's and chapter 7's forwarding cases on `weeks` of each trace; write the
    CSV (one row per run, `aggregate.csv` of the means), Figs 4.9-4.11 and 7.8-7.9 and
    `summary.md` checking the dissertation's statements."""
    if not traces:
        raise ValueError(f"{NAME} needs a trace (the dissertation uses {DEFAULT_TRACES[0]})")
    if not weeks or any(w < 0 for w in weeks):
        raise ValueError(f"weeks must be week numbers >= 0, got {list(weeks)}")
    unknown = set(parts) - {"ch4", "ch7"}
    if unknown or not parts:
        raise ValueError(f"parts must be among ch4, ch7, got {list(parts)}")
    points: list[Point] = []
    for t in traces:
        for w in weeks:
            if "ch4" in parts:
                points.append(_point(t, "ch4", SITE_SPLITS[1], "round-robin", w, cancelled))
                for n in (2, 3):
                    points += [_point(t, "ch4", SITE_SPLITS[n], p, w, cancelled) for p in CH4_POLICIES]
            if "ch7" in parts:
                points.append(_point(t, "ch7", CH7_SPLITS["1 site"], "round-robin", w, cancelled))
                points += [_point(t, "ch7", CH7_SPLITS["2 sites"], p, w, cancelled) for p in CH7_POLICIES]
    sweep = (
        dataclasses.replace(sweep, evaluate_point=evaluate_forwarding)
        if sweep
        else Sweep(workers, evaluate_point=evaluate_forwarding)
    )
    rows = run_experiment(NAME, points, None, sweep)
    result = ExperimentResult(NAME, out, rows)
    metrics = ("makespan", "bounded_slowdown_mean", "wait_mean", "jobs_completed", "forwarded")
    agg = aggregate(rows, ("trace", "part", "sites", "selection"), metrics)
    from isthmus.experiments.output import write_csv

    result.files["aggregate"] = write_csv(agg, out / "aggregate.csv")
    labels = sorted({str(r["trace"]) for r in rows})
    panels = [("trace", t) for t in labels]
    _plot(result, agg, panels, parts)
    body = [
        f"{', '.join(labels)}, weeks {', '.join(map(str, weeks))} from the first submit; each bar is the mean over "
        "the weeks with its 95% confidence interval. Chapter 4: each week reduced as §4.5.1.2 ("
        + ch4_reduction(weeks[0]).describe().split(", ", 1)[1]
        + "), physical sites with First-In First-Fit (event-driven), resource data pushed on every change. "
        "Chapter 7: each week uncompressed (sizes capped at 128), VM sites with OD-S and "
        "FCBF-Aggressive (boot 600 s, shutdown 60 s, 10 s rounds), resource data on every change and every 20 s. "
        "Jobs enter the sites' managers in turn; a forwarded job runs where it is sent.",
        "## The dissertation's statements and these results",
    ]
    for t in labels:
        body.append(f"### {t}")
        lines = checks(agg, t, parts)
        if "ch7" in parts:
            lines.append(paired_weeks(rows, t))
        body.append("\n".join(f"- {line}" for line in lines))
        body.append(_table(agg, t, parts))
    return finish(result, "Villegas: forwarding policies between meta-schedulers (Figs 4.9-4.11, 7.8-7.9)", body)


def _plot(
    result: ExperimentResult, agg: Sequence[Mapping[str, Any]], panels: list[tuple[str, Any]], parts: Sequence[str]
) -> None:
    if "ch4" in parts:
        rr = [r for r in agg if r["part"] == "ch4" and r["selection"] in ("single", "round-robin")]
        for metric, ylabel, key, title in (
            ("makespan", "makespan (s)", "fig4_9_makespan", "Fig. 4.9 (RoundRobin)"),
            ("bounded_slowdown_mean", "bounded slowdown", "fig4_10_bounded_slowdown", "Fig. 4.10 (RoundRobin)"),
        ):
            _bars(
                result, rr, key=key, panels=panels, groups=("sites", ("1 site", "2 sites", "3 sites")),
                series=("part", ("ch4",)), metric=metric, ylabel=ylabel, title=title,
            )  # fmt: skip
        ch4 = [dict(r, selection=LABEL.get(r["selection"], r["selection"])) for r in agg if r["part"] == "ch4"]
        _bars(
            result, ch4, key="fig4_11_bounded_slowdown", panels=panels,
            groups=("sites", ("1 site", "2 sites", "3 sites")),
            series=("selection", ("one site", *(LABEL[p] for p in CH4_POLICIES))), metric="bounded_slowdown_mean",
            ylabel="bounded slowdown", title="Fig. 4.11",
        )  # fmt: skip
    if "ch7" in parts:
        ch7 = [dict(r, selection=LABEL.get(r["selection"], r["selection"])) for r in agg if r["part"] == "ch7"]
        series = ("selection", ("one site", *(LABEL[p] for p in CH7_POLICIES)))
        for metric, ylabel, key, title, log in (
            ("makespan", "makespan (s)", "fig7_8_makespan", "Fig. 7.8", False),
            ("bounded_slowdown_mean", "bounded slowdown", "fig7_9_bounded_slowdown", "Fig. 7.9", True),
        ):
            _bars(
                result, ch7, key=key, panels=panels, groups=("sites", ("1 site", "2 sites")), series=series,
                metric=metric, ylabel=ylabel, title=title, log=log,
            )  # fmt: skip


def _get(agg: Sequence[Mapping[str, Any]], trace: str, part: str, sites: str, selection: str, metric: str) -> float:
    r = _find(agg, trace=trace, part=part, sites=sites, selection=selection)
    return np.nan if r is None or r.get(metric) is None else float(r[metric])


def checks(agg: Sequence[Mapping[str, Any]], trace: str, parts: Sequence[str]) -> list[str]:
    """The dissertation's statements on forwarding, each with the means of `agg` and a verdict
    computed from them."""
    out: list[str] = []
    bsd, mk = "bounded_slowdown_mean", "makespan"
    if "ch4" in parts:
        spans = [
            _get(agg, trace, "ch4", s, p, mk)
            for s, p in (("1 site", "single"), ("2 sites", "round-robin"), ("3 sites", "round-robin"))
        ]
        spread = np.nanmax(spans) / np.nanmin(spans) - 1
        out.append(
            '§4.5.2, Fig. 4.9: "the makespan of the trace remains almost the same for the different configurations" '
            f"(RoundRobin): **{'holds' if spread <= 0.05 else 'does not hold'}**: makespans "
            + ", ".join(f"{v:,.0f} s" for v in spans)
            + f" (spread {spread:.1%})."
        )
        slows = [
            _get(agg, trace, "ch4", s, p, bsd)
            for s, p in (("1 site", "single"), ("2 sites", "round-robin"), ("3 sites", "round-robin"))
        ]
        higher = slows[1] > slows[0] and slows[2] > slows[0]
        out.append(
            'Fig. 4.10: "a closer look to the results shows a higher slowdown when MSs are used": '
            f"**{'holds' if higher else 'does not hold'}**: bounded slowdown "
            + ", ".join(f"{v:.3g}" for v in slows)
            + " with 1, 2 and 3 sites."
        )
        for sites in ("2 sites", "3 sites"):
            rr = _get(agg, trace, "ch4", sites, "round-robin", bsd)
            usage = {p: _get(agg, trace, "ch4", sites, p, bsd) for p in USAGE_POLICIES}
            beat = [p for p, v in usage.items() if v < rr]
            beat_verdict = "holds" if len(beat) == len(usage) else ("holds in part" if beat else "does not hold")
            best = min(usage, key=lambda p: usage[p])
            single = slows[0]
            out.append(
                f'Fig. 4.11, {sites}: "policies that account for site usage give much better slowdown metrics" than '
                f"RoundRobin: **{beat_verdict}**"
                f": {len(beat)} of {len(usage)} beat RoundRobin ({rr:.3g}): "
                + ", ".join(f"{LABEL[p]} {v:.3g}" for p, v in usage.items())
                + f'. "Policies that take the total number of CPUs in the queue give the best results": the best is '
                f"{LABEL[best]} (**{'holds' if best in ('lowest-qlen-cpus', 'lowest-load') else 'does not hold'}**)"
                f', {usage[best] / single:.2g} times the single site\'s ("approximately two times").'
            )
    if "ch7" in parts:
        single_mk = _get(agg, trace, "ch7", "1 site", "single", mk)
        mks = {p: _get(agg, trace, "ch7", "2 sites", p, mk) for p in CH7_POLICIES}
        near = [p for p, v in mks.items() if v <= 1.05 * single_mk]
        worst = sorted(mks, key=lambda p: -mks[p])[:2]
        others_near = all(p in near for p in mks if p not in worst)
        worst_as_seed = set(worst) == {"round-robin", "highest-idle"}
        mk_verdict = (
            "holds" if worst_as_seed and others_near else ("holds in part" if worst_as_seed else "does not hold")
        )
        out.append(
            '§7.4.3, Fig. 7.8: "besides the RoundRobin and HighestIdle policies, the overall makespan is similar '
            '[...] when resources are concentrated in one site or distributed": '
            f"**{mk_verdict}**"
            f": one site {single_mk:,.0f} s; "
            + ", ".join(f"{LABEL[p]} {v:,.0f} s" for p, v in mks.items())
            + f"; the two longest: {', '.join(LABEL[p] for p in worst)}; within 5% of one site: "
            + (", ".join(LABEL[p] for p in near) or "none")
            + "."
        )
        sl = {p: _get(agg, trace, "ch7", "2 sites", p, bsd) for p in CH7_POLICIES}
        cap = [sl[p] for p in CAPACITY_POLICIES]
        idle = [sl[p] for p in IDLE_POLICIES]
        pairs = [sl["highest-cap"] < sl["highest-idle"], sl["bf-cap"] < sl["bf-idle"]]
        verdict = "holds" if all(pairs) else ("holds in part" if any(pairs) else "does not hold")
        out.append(
            'Fig. 7.9 and §7.6: "considering the *potential* capabilities provides better site-selection decisions '
            'than just looking at the available resources" (capacity-based against idle-based forwarding): '
            f"**{verdict}**: "
            f"HighestCap {sl['highest-cap']:.3g} against HighestIdle {sl['highest-idle']:.3g}, "
            f"BFCap {sl['bf-cap']:.3g} against BFIdle {sl['bf-idle']:.3g} (bounded slowdown; "
            f"best capacity {min(cap):.3g}, best idle "
            f"{min(idle):.3g}); RoundRobin {sl['round-robin']:.3g}, one site "
            f"{_get(agg, trace, 'ch7', '1 site', 'single', bsd):.3g}."
        )
    return out


def paired_weeks(rows: Sequence[Mapping[str, Any]], trace: str) -> str:
    """Capacity- against idle-based forwarding week by week (the same week's jobs for both):
    in how many weeks each capacity policy has the lower bounded slowdown."""
    value: dict[tuple[Any, str], float] = {
        (r["week"], str(r["selection"])): float(r["bounded_slowdown_mean"])
        for r in rows
        if r["trace"] == trace and r["part"] == "ch7" and r.get("bounded_slowdown_mean") is not None
    }
    weeks = sorted({w for w, _ in value})
    out = []
    for cap, idle in (("highest-cap", "highest-idle"), ("bf-cap", "bf-idle")):
        both = [w for w in weeks if (w, cap) in value and (w, idle) in value]
        lower = sum(value[(w, cap)] < value[(w, idle)] for w in both)
        out.append(f"{LABEL[cap]} below {LABEL[idle]} in {lower} of {len(both)} weeks")
    return "Week by week (the same jobs for every policy): " + ", ".join(out) + "."


def _table(agg: Sequence[Mapping[str, Any]], trace: str, parts: Sequence[str]) -> str:
    rows = [r for r in agg if r["trace"] == trace and r["part"] in parts]
    return markdown_table(
        ["part", "sites", "forwarding", "runs", "makespan (s)", "bounded slowdown", "mean wait (s)", "forwarded"],
        [
            [
                "ch. 4 (reduced)" if r["part"] == "ch4" else "ch. 7 (VMs)",
                r["sites"],
                LABEL.get(r["selection"], r["selection"]),
                r["n"],
                _pm(r, "makespan"),
                _pm(r, "bounded_slowdown_mean"),
                _pm(r, "wait_mean"),
                _pm(r, "forwarded"),
            ]
            for r in rows
        ],
    )
