"""The IaaS provisioning and allocation studies of D. Villegas's dissertation (FIU, 2012),
chapters 6 and 7 (villegas-resource-brokering-dissertation.txt), regenerated in simulation.

- `villegas-provisioning`: the eight provisioning policies of Table 6.1 with FCFS (OD-2Q with
  its FCFS-2Q) on the Uniform, Increasing and Bursty workloads over the three Table 6.3
  testbeds: workload speedup SU, job slowdown JSD, charged and actual cost (Figs 6.2-6.4);
- `villegas-allocation`: FCFS, SJF and FCFS-NW with Startup (Fig. 6.5, §6.5.2);
- `villegas-short-long`: SR25/SR50/SR75 with OD-S+FCFS, OD-S+SJF and OD-2Q+FCFS-2Q (Fig. 6.6)
  and the VM boot-time sweep 1, 20, 300, 600, 900 s (Fig. 6.8);
- `villegas-pairs`: Startup, OD-S and OD-G with FCFS and SJF on the §6.5.4 Uniform,
  Periodic and Bursty workloads of half short, half long jobs (Fig. 6.7);
- `villegas-fcbf`: the dissertation's On-Demand (OD-S) with FCFS (reserving VMs), FCBF-Aggressive,
  FCBF-Split and FCBF-QWait on a week of the CTC trace at a third, half and all of ~450
  single-processor VMs: makespan, AWRT, bounded slowdown (Figs 7.5-7.7).

Random workloads are generated once per seed and every policy sees the same ones; each figure
is the mean over the seeds with its 95% confidence interval (Student's t), error bars in the
figures. SJF is given the jobs' runtimes (`sjf-ideal`): Table 6.2 lists it as using the job
duration, as OD-ExecTime does ("assumed to be known a priori", §6.3.1).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from isthmus.experiments.output import figure, markdown_table, save, write_csv
from isthmus.experiments.result import ExperimentResult, finish, run_experiment
from isthmus.experiments.runner import Point, Sweep, policy
from isthmus.metrics.stats import mean_ci95
from isthmus.policies import registry
from isthmus.policies.api import capability
from isthmus.workloads.conversion import RUN_CANCELLED

#: Table 6.3: testbed -> maximum VMs
TESTBEDS: dict[str, int] = {"das4": 64, "fiu": 7, "ec2": 20}
LOAD_WORKLOADS = ("uniform", "increasing", "bursty")
PROVISIONING = ("startup", "od-s", "od-g", "od-exectime", "od-execavg", "od-execkn", "od-wait", "od-2q")
ALLOCATION = ("fcfs", "sjf-ideal", "fcfs-nw")
SHORT_LONG = ("sr25", "sr50", "sr75")
SHORT_LONG_PAIRS = (("od-s", "fcfs"), ("od-s", "sjf-ideal"), ("od-2q", "fcfs-2q"))
BOOT_TIMES = (1.0, 20.0, 300.0, 600.0, 900.0)
PAIR_ARRIVALS = ("uniform", "periodic", "bursty")
FCBF_POLICIES = ("fcfs-reserve", "fcbf-aggr", "fcbf-split", "fcbf-qwait")
#: §7.2.3: the CTC SP2 "on approximately 450 machines"; §7.4.2: a third, half and all of them
FCBF_VMS = (150, 225, 450)
WEEK = 7 * 86400.0
SEEDS = tuple(range(10))
DEFAULT_FCBF_TRACE = "CTC-SP2-1996-3.1-cln.swf.gz"
#: a runtime at most this long makes a job short in the SR workloads' per-class figures (s)
SHORT_THRESHOLD = 600.0

LABEL = {
    "startup": "Startup",
    "od-s": "OD-S",
    "od-g": "OD-G",
    "od-exectime": "OD-ExecTime",
    "od-execavg": "OD-ExecAvg",
    "od-execkn": "OD-ExecKN",
    "od-wait": "OD-Wait",
    "od-2q": "OD-2Q",
    "fcfs": "FCFS",
    "sjf-ideal": "SJF",
    "fcfs-nw": "FCFS-NW",
    "fcfs-2q": "FCFS-2Q",
    "fcfs-reserve": "FCFS",
    "fcbf-aggr": "FCBF-Aggr",
    "fcbf-split": "FCBF-Split",
    "fcbf-qwait": "FCBF-QWait",
}


def _env(testbed: str, *, pools: bool = False, boot_time: float | None = None) -> str:
    params = []
    if pools:
        params.append("pools=true")
    if boot_time is not None:
        params.append(f"boot_time={boot_time:g}")
    return f"villegas-{testbed}" + (":" + ",".join(params) if params else "")


def _pools(provisioning: str) -> bool:
    """Whether a provisioning policy keeps a pool of VMs per allocation queue (OD-2Q: the
    testbed is split into a short and a long pool, served by FCFS-2Q's two queues)."""
    return capability(registry.info("provisioning", provisioning).cls, "queues_needed") != 1


def _point(workload: str, env: str, alloc: str, prov: str, labels: Mapping[str, Any], **kw: Any) -> Point:
    return Point(
        trace=workload,
        env=env,
        allocation=policy(alloc),
        provisioning=policy(prov),
        labels=tuple({**labels, "allocation": alloc, "provisioning": prov}.items()),
        **kw,
    )


def aggregate(rows: Sequence[Mapping[str, Any]], by: Sequence[str], metrics: Sequence[str]) -> list[dict[str, Any]]:
    """One row per distinct `by` labels (in first-seen order): `n` runs, and for each metric its
    mean (`<metric>`) and the half-width of its 95% confidence interval (`<metric>_ci`)."""
    groups: dict[tuple[Any, ...], list[Mapping[str, Any]]] = {}
    for r in rows:
        groups.setdefault(tuple(r.get(k) for k in by), []).append(r)
    out = []
    for key, members in groups.items():
        row: dict[str, Any] = dict(zip(by, key, strict=True))
        row["n"] = len(members)
        for m in metrics:
            row[m], row[f"{m}_ci"] = mean_ci95([x.get(m) for x in members])
        out.append(row)
    return out


def _find(agg: Sequence[Mapping[str, Any]], **where: Any) -> Mapping[str, Any] | None:
    return next((r for r in agg if all(r.get(k) == v for k, v in where.items())), None)


def _pm(row: Mapping[str, Any] | None, metric: str, digits: int = 3) -> str:
    """'mean ± ci' for a table cell."""
    if row is None or row.get(metric) is None:
        return "–"
    mean, ci = row[metric], row.get(f"{metric}_ci")
    text = f"{mean:,.{digits}g}" if abs(mean) < 1000 else f"{mean:,.0f}"
    if ci is None:
        return text
    if ci <= 1e-9 * max(1.0, abs(mean)):  # the same value in every run, up to rounding
        return text + " ± 0"
    return text + (f" ± {ci:,.{digits}g}" if abs(ci) < 1000 else f" ± {ci:,.0f}")


def _bars(
    result: ExperimentResult,
    agg: Sequence[Mapping[str, Any]],
    *,
    key: str,
    panels: Sequence[tuple[str, Any]],
    groups: tuple[str, Sequence[Any]],
    series: tuple[str, Sequence[Any]],
    metric: str,
    ylabel: str,
    title: str,
    log: bool = False,
) -> None:
    """Grouped bars with 95% error bars, one panel per (label, value) of `panels`."""
    gkey, gvals = groups
    skey, svals = series
    fig, axes = figure(len(panels), 1, width=4.8, height=3.4)
    width = 0.8 / max(1, len(svals))
    for col, (pkey, pval) in enumerate(panels):
        ax = axes[0][col]
        for k, s in enumerate(svals):
            means, errs = [], []
            for g in gvals:
                r = _find(agg, **{pkey: pval, gkey: g, skey: s})
                means.append(np.nan if r is None or r.get(metric) is None else r[metric])
                errs.append(0.0 if r is None or r.get(f"{metric}_ci") is None else r[f"{metric}_ci"])
            x = np.arange(len(gvals)) + (k - (len(svals) - 1) / 2) * width
            ax.bar(x, means, width, yerr=errs, capsize=2, label=LABEL.get(str(s), str(s)))
        ax.set_xticks(np.arange(len(gvals)), [LABEL.get(str(g), str(g)) for g in gvals], fontsize=8)
        ax.set_ylabel(ylabel)
        ax.set_title(f"{title}: {pval}", fontsize=9)
        if log and np.nanmax([r.get(metric) or 0 for r in agg] or [0]) > 0:
            ax.set_yscale("log")
        ax.grid(True, axis="y", alpha=0.3)
    axes[0][0].legend(fontsize=6, ncols=2)
    result.files[key] = save(fig, result.out_dir / f"{key}.png")


def _check_no_traces(name: str, traces: Sequence[str]) -> None:
    if traces:
        raise ValueError(f"{name} runs the dissertation's synthetic workloads; it takes no trace")


def _seeds_text(seeds: Sequence[int]) -> str:
    return f"{len(seeds)} seed(s) ({', '.join(map(str, seeds[:5]))}{', ...' if len(seeds) > 5 else ''})"


# ------------------------------------------------------------------------------- provisioning


def villegas_provisioning(
    traces: Sequence[str],
    out: Path,
    *,
    seeds: Sequence[int] = SEEDS,
    testbeds: Sequence[str] = tuple(TESTBEDS),
    workloads: Sequence[str] = LOAD_WORKLOADS,
    provisioning: Sequence[str] = PROVISIONING,
    workers: int | None = None,
    sweep: Sweep | None = None,
) -> ExperimentResult:
    """The provisioning policies with FCFS on the hour-long §6.4.3 workloads (Figs 6.2-6.4).

    Each workload's load refers to its testbed's maximum VMs (`procs` = Table 6.3's Max VMs).
    OD-2Q runs with FCFS-2Q on the testbed split into two pools (`pools=true`).
    """
    name = "villegas-provisioning"
    _check_no_traces(name, traces)
    points = [
        _point(
            f"{w}:procs={TESTBEDS[tb]},seed={s}",
            _env(tb, pools=_pools(prov)),
            "fcfs-2q" if _pools(prov) else "fcfs",
            prov,
            {"testbed": tb, "workload": w, "seed": s},
        )
        for tb in testbeds
        for w in workloads
        for prov in provisioning
        for s in seeds
    ]
    result = ExperimentResult(name, out, run_experiment(name, points, workers, sweep))
    metrics = ("speedup", "slowdown_mean", "cost_charged", "cost_actual", "makespan", "vm_leases")
    agg = aggregate(result.rows, ("testbed", "workload", "provisioning"), metrics)
    for metric, ylabel, key, title in (
        ("speedup", "workload speedup SU", "fig6_2_speedup", "Fig. 6.2"),
        ("slowdown_mean", "job slowdown JSD", "fig6_3_slowdown", "Fig. 6.3"),
        ("cost_charged", "charged cost Cc ($)", "fig6_4_cost", "Fig. 6.4"),
    ):
        _bars(
            result,
            agg,
            key=key,
            panels=[("testbed", tb) for tb in testbeds],
            groups=("workload", workloads),
            series=("provisioning", provisioning),
            metric=metric,
            ylabel=ylabel,
            title=title,
        )
    table = [
        [
            tb,
            w,
            LABEL[p],
            _pm(r, "speedup"),
            _pm(r, "slowdown_mean"),
            _pm(r, "cost_charged"),
            _pm(r, "cost_actual"),
        ]
        for tb in testbeds
        for w in workloads
        for p in provisioning
        for r in [_find(agg, testbed=tb, workload=w, provisioning=p)]
    ]
    body = [
        f"Every provisioning policy of Table 6.1 with FCFS (OD-2Q with FCFS-2Q on two pools) on the hour-long "
        f"{', '.join(workloads)} workloads (§6.4.3; load relative to the testbed's maximum VMs) over the "
        f"{', '.join(testbeds)} testbeds (Table 6.3: single-core VMs, boot 600 s, shutdown 60 s, 20 s rounds, "
        f"$0.065 per started VM-hour), {_seeds_text(seeds)}; mean ± 95% confidence interval.",
        "## Seed findings and these results",
        _provisioning_findings(agg, testbeds, workloads, provisioning),
        "## All figures",
        markdown_table(["testbed", "workload", "provisioning", "SU", "JSD", "Cc ($)", "Ca ($)"], table),
    ]
    result.files["means"] = write_csv(agg, result.out_dir / f"{name}.means.csv")
    return finish(result, "Villegas §6.5.1: provisioning policies (Figs 6.2-6.4)", body, traces=False)


def _share(cases: Sequence[bool]) -> str:
    return f"{sum(cases)} of {len(cases)}"


def _provisioning_findings(
    agg: Sequence[Mapping[str, Any]], testbeds: Sequence[str], workloads: Sequence[str], provs: Sequence[str]
) -> str:
    """The §6.5.1 statements and findings 1, 2 and 4 of §6.6, checked case by case."""
    cases = [(tb, w) for tb in testbeds for w in workloads]

    def get(p: str, metric: str, tb: str, w: str) -> float | None:
        r = _find(agg, testbed=tb, workload=w, provisioning=p)
        return None if r is None else r.get(metric)

    lines = []
    if "startup" in provs:
        best_su = [
            get("startup", "speedup", tb, w) == max((get(p, "speedup", tb, w) or 0) for p in provs) for tb, w in cases
        ]
        lines.append(
            f'- "Startup always achieves the best performance" (§6.5.1): Startup has the highest SU in '
            f"{_share(best_su)} testbed-workload cases."
        )
        dyn = [p for p in provs if p != "startup"]
        ratios = []
        for tb, w in cases:
            su = get("startup", "cost_charged", tb, w)
            others = [c for p in dyn if (c := get(p, "cost_charged", tb, w))]
            if su and others:
                ratios.append(su / min(others))
        if ratios:
            lines.append(
                f'- Finding 4, static provisioning "deliver[s] stable performance, but incur[s] up to 5 times higher '
                f"cost\": Startup's charged cost is {min(ratios):.1f}-{max(ratios):.1f} times the cheapest dynamic "
                "policy's here."
            )
    if "od-g" in provs and "od-s" in provs:
        worse = [
            (get("od-g", "slowdown_mean", tb, w) or 0) > (get("od-s", "slowdown_mean", tb, w) or 0) for tb, w in cases
        ]
        lines.append(
            f"- Finding 2, OD-G is worse than single-VM on-demand: OD-G's JSD exceeds OD-S's in {_share(worse)} cases."
        )
    if "od-s" in provs:
        exec_family = [p for p in ("od-exectime", "od-execavg", "od-execkn") if p in provs]
        dearest = [
            get("od-s", "cost_charged", tb, w)
            == max((get(p, "cost_charged", tb, w) or 0) for p in provs if p != "startup")
            for tb, w in cases
        ]
        lines.append(
            f'- "OD-S incurs the highest cost" (among the dynamic policies, §6.5.1): in {_share(dearest)} cases.'
        )
        if exec_family:
            cheaper = [
                all(
                    (get(p, "cost_charged", tb, w) or 0) <= (get("od-s", "cost_charged", tb, w) or 0)
                    for p in exec_family
                )
                for tb, w in cases
            ]
            lines.append(
                f"- Finding 1, OD-ExecTime and its variants are a good performance-cost trade-off: all of "
                f"{', '.join(LABEL[p] for p in exec_family)} cost at most what OD-S costs in {_share(cheaper)} cases "
                "(their JSD is in the table below)."
            )
    if "od-wait" in provs:
        thresholds = [p for p in ("od-exectime", "od-execavg", "od-execkn", "od-wait") if p in provs]
        wait_best = [
            get("od-wait", "slowdown_mean", tb, w)
            == min((get(p, "slowdown_mean", tb, w) or np.inf) for p in thresholds)
            for tb, w in cases
        ]
        lines.append(
            f'- "From the threshold-based policies, QueueWait usually performs better" (§6.5.1): OD-Wait has the '
            f"lowest JSD among them in {_share(wait_best)} cases."
        )
    return "\n".join(lines)


# --------------------------------------------------------------------------------- allocation


def villegas_allocation(
    traces: Sequence[str],
    out: Path,
    *,
    seeds: Sequence[int] = SEEDS,
    testbeds: Sequence[str] = tuple(TESTBEDS),
    workloads: Sequence[str] = LOAD_WORKLOADS,
    allocation: Sequence[str] = ALLOCATION,
    workers: int | None = None,
    sweep: Sweep | None = None,
) -> ExperimentResult:
    """FCFS, SJF and FCFS-NW with Startup (static resources) on the three testbeds (Fig. 6.5)."""
    name = "villegas-allocation"
    _check_no_traces(name, traces)
    points = [
        _point(f"{w}:procs={TESTBEDS[tb]},seed={s}", _env(tb), a, "startup", {"testbed": tb, "workload": w, "seed": s})
        for tb in testbeds
        for w in workloads
        for a in allocation
        for s in seeds
    ]
    result = ExperimentResult(name, out, run_experiment(name, points, workers, sweep))
    metrics = ("slowdown_mean", "cost_charged", "makespan", "wait_mean")
    agg = aggregate(result.rows, ("testbed", "workload", "allocation"), metrics)
    _bars(
        result,
        agg,
        key="fig6_5_slowdown",
        panels=[("testbed", tb) for tb in testbeds],
        groups=("workload", workloads),
        series=("allocation", allocation),
        metric="slowdown_mean",
        ylabel="job slowdown JSD",
        title="Fig. 6.5",
        log=True,
    )
    cases = [(tb, w) for tb in testbeds for w in workloads]

    def jsd(a: str, tb: str, w: str) -> float:
        r = _find(agg, testbed=tb, workload=w, allocation=a)
        return np.inf if r is None or r.get("slowdown_mean") is None else float(r["slowdown_mean"])

    lines = []
    if "fcfs-nw" in allocation:
        nw_worst = [jsd("fcfs-nw", tb, w) == max(jsd(a, tb, w) for a in allocation) for tb, w in cases]
        lines.append(
            f'- "FCFS-NW [...] creates resource competition, and thus has worse results in all experiments": '
            f"FCFS-NW has the highest JSD in {_share(nw_worst)} cases."
        )
    if "sjf-ideal" in allocation and "fcfs" in allocation:
        sjf_le = [jsd("sjf-ideal", tb, w) <= jsd("fcfs", tb, w) + 1e-9 for tb, w in cases]
        lines.append(
            f"- \"SJF gives a lower slowdown\" than FCFS: SJF's JSD is at most FCFS's in {_share(sjf_le)} cases."
        )
    table = [
        [tb, w, *[_pm(_find(agg, testbed=tb, workload=w, allocation=a), "slowdown_mean") for a in allocation]]
        for tb, w in cases
    ]
    body = [
        f"Startup provisioning (every VM leased at the start) with {', '.join(LABEL[a] for a in allocation)} on the "
        f"{', '.join(testbeds)} testbeds and the {', '.join(workloads)} workloads, {_seeds_text(seeds)}; "
        "mean JSD ± 95% confidence interval. FCFS-NW's shared VMs slow their runs down as time-shared processors "
        '(docs/simulation.md, "Shared processors").',
        "## Seed findings and these results",
        "\n".join(lines),
        "## Job slowdown",
        markdown_table(["testbed", "workload", *[LABEL[a] for a in allocation]], table),
    ]
    return finish(result, "Villegas §6.5.2: allocation policies on static resources (Fig. 6.5)", body, traces=False)


# ------------------------------------------------------------------------------- short / long


def villegas_short_long(
    traces: Sequence[str],
    out: Path,
    *,
    seeds: Sequence[int] = SEEDS,
    boot_times: Sequence[float] = BOOT_TIMES,
    mixes: Sequence[str] = SHORT_LONG,
    testbed: str = "das4",
    workers: int | None = None,
    sweep: Sweep | None = None,
) -> ExperimentResult:
    """SR25/SR50/SR75 with OD-S+FCFS, OD-S+SJF and OD-2Q+FCFS-2Q (Fig. 6.6), over VM boot
    times (Fig. 6.8; 600 s is the dissertation's observed value and Fig. 6.6's)."""
    name = "villegas-short-long"
    _check_no_traces(name, traces)
    points = [
        _point(
            f"{mix}:seed={s}",
            _env(testbed, pools=_pools(prov), boot_time=bt),
            alloc,
            prov,
            {"mix": mix, "pair": f"{LABEL[prov]}+{LABEL[alloc]}", "boot_time": bt, "seed": s},
            short_threshold=SHORT_THRESHOLD,
        )
        for bt in boot_times
        for mix in mixes
        for prov, alloc in SHORT_LONG_PAIRS
        for s in seeds
    ]
    result = ExperimentResult(name, out, run_experiment(name, points, workers, sweep))
    metrics = ("slowdown_mean", "cost_charged", "short_slowdown_mean", "long_slowdown_mean")
    agg = aggregate(result.rows, ("boot_time", "mix", "pair"), metrics)
    pairs = [f"{LABEL[p]}+{LABEL[a]}" for p, a in SHORT_LONG_PAIRS]
    for metric, label, key in (
        ("slowdown_mean", "job slowdown", "fig6_6_8_slowdown"),
        ("cost_charged", "charged cost ($)", "fig6_6_8_cost"),
    ):
        _bars(
            result,
            agg,
            key=key,
            panels=[("boot_time", bt) for bt in boot_times],
            groups=("mix", mixes),
            series=("pair", pairs),
            metric=metric,
            ylabel=label,
            title="boot time (s)",
            log=metric == "slowdown_mean",
        )
    table = [
        [
            f"{bt:g}",
            mix,
            pair,
            _pm(r, "slowdown_mean"),
            _pm(r, "short_slowdown_mean"),
            _pm(r, "long_slowdown_mean"),
            _pm(r, "cost_charged"),
        ]
        for bt in boot_times
        for mix in mixes
        for pair in pairs
        for r in [_find(agg, boot_time=bt, mix=mix, pair=pair)]
    ]
    twoq, sjf = pairs[2], pairs[1]

    def sd(bt: float, mix: str, pair: str) -> float:
        r = _find(agg, boot_time=bt, mix=mix, pair=pair)
        return np.inf if r is None or r.get("slowdown_mean") is None else float(r["slowdown_mean"])

    lines = []
    for bt in boot_times:
        best = [sd(bt, m, twoq) == min(sd(bt, m, p) for p in pairs) for m in mixes]
        lines.append(f"- boot {bt:g} s: {twoq} has the lowest slowdown for {_share(best)} mixes")
    high, low = max(boot_times), min(boot_times)
    spread = {
        bt: max(max(sd(bt, m, p) for p in pairs) / min(sd(bt, m, p) for p in pairs) for m in mixes)
        for bt in (low, high)
    }
    body = [
        f"SR25/SR50/SR75 (§6.5.3: 1,000 jobs, that share of short jobs of 10 s on average, the rest 1 h, periodic "
        f"arrivals) on {testbed} ({TESTBEDS[testbed]} VMs; OD-2Q's pools split them in half), VM boot times "
        f"{', '.join(f'{b:g}' for b in boot_times)} s, {_seeds_text(seeds)}; short jobs here are those of at most "
        f"{SHORT_THRESHOLD:g} s.",
        "## Seed findings and these results",
        '- Finding 3: "the combined OD-2Q-FCFS-2Q policy [...] is a good slowdown-cost trade-off for workloads '
        'with a significant ratio of short to long jobs"; §6.5.5: with a 900 s boot SJF does better for SR25 and '
        "SR50, and with instantaneous boots the two-queue pair loses its benefit.",
        "\n".join(lines),
        f"- the widest slowdown ratio between pairs is {spread[high]:.2g}× at {high:g} s boots and "
        f'{spread[low]:.2g}× at {low:g} s (§6.5.5: "differences between policies have the highest impact when '
        'booting time is high").',
        f'- {sjf} against the long jobs: see the long-job slowdown column (§6.5.3: SJF "results in much higher '
        'slowdown when the number of short jobs dominates the workload, producing starvation for long ones").',
        "## Slowdown (all, short, long jobs) and cost",
        markdown_table(["boot (s)", "mix", "pair", "JSD", "JSD short", "JSD long", "Cc ($)"], table),
    ]
    return finish(
        result, "Villegas §6.5.3, §6.5.5: short and long jobs, VM boot time (Figs 6.6, 6.8)", body, traces=False
    )


# -------------------------------------------------------------------------------------- pairs


def villegas_pairs(
    traces: Sequence[str],
    out: Path,
    *,
    seeds: Sequence[int] = SEEDS,
    arrivals: Sequence[str] = PAIR_ARRIVALS,
    testbed: str = "das4",
    workers: int | None = None,
    sweep: Sweep | None = None,
) -> ExperimentResult:
    """Startup, OD-S and OD-G with FCFS and SJF on the §6.5.4 workloads (Fig. 6.7)."""
    name = "villegas-pairs"
    _check_no_traces(name, traces)
    provs, allocs = ("startup", "od-s", "od-g"), ("fcfs", "sjf-ideal")
    points = [
        _point(
            f"sr50:arrivals={arr},seed={s}",
            _env(testbed),
            a,
            p,
            {"arrivals": arr, "pair": f"{LABEL[p]}+{LABEL[a]}", "seed": s},
        )
        for arr in arrivals
        for p in provs
        for a in allocs
        for s in seeds
    ]
    result = ExperimentResult(name, out, run_experiment(name, points, workers, sweep))
    agg = aggregate(result.rows, ("arrivals", "pair"), ("slowdown_mean", "cost_charged", "makespan"))
    pairs = [f"{LABEL[p]}+{LABEL[a]}" for p in provs for a in allocs]
    panel = [("experiment", "§6.5.4")]
    for r in agg:
        r["experiment"] = "§6.5.4"
    _bars(
        result,
        agg,
        key="fig6_7_cost",
        panels=panel,
        groups=("arrivals", arrivals),
        series=("pair", pairs),
        metric="cost_charged",
        ylabel="charged cost ($)",
        title="Fig. 6.7 (top)",
    )
    _bars(
        result,
        agg,
        key="fig6_7_slowdown",
        panels=panel,
        groups=("arrivals", arrivals),
        series=("pair", pairs),
        metric="slowdown_mean",
        ylabel="job slowdown",
        title="Fig. 6.7 (bottom)",
        log=True,
    )

    def val(arr: str, pair: str, m: str) -> float:
        r = _find(agg, arrivals=arr, pair=pair)
        return np.inf if r is None or r.get(m) is None else float(r[m])

    sjf_better = [
        val(arr, f"{LABEL[p]}+SJF", "slowdown_mean") <= val(arr, f"{LABEL[p]}+FCFS", "slowdown_mean")
        for arr in arrivals
        for p in provs
    ]
    startup_lower = [
        min(val(arr, f"Startup+{LABEL[a]}", "slowdown_mean") for a in allocs)
        <= min(val(arr, f"{LABEL[p]}+{LABEL[a]}", "slowdown_mean") for p in provs[1:] for a in allocs)
        for arr in arrivals
    ]
    odg_higher = [
        val(arr, f"OD-G+{LABEL[a]}", "slowdown_mean") >= val(arr, f"OD-S+{LABEL[a]}", "slowdown_mean")
        for arr in arrivals
        for a in allocs
    ]
    table = [
        [arr, pair, _pm(r, "slowdown_mean"), _pm(r, "cost_charged"), _pm(r, "makespan")]
        for arr in arrivals
        for pair in pairs
        for r in [_find(agg, arrivals=arr, pair=pair)]
    ]
    body = [
        f"Six pairs (Startup, OD-S, OD-G × FCFS, SJF) on the §6.5.4 workloads: 1,000 jobs, half of 10 s and half of "
        f"1 h on average, arrivals {', '.join(arrivals)} (uniform: 10 s apart; periodic: 60 s down to 5 s and back, "
        f"four times; bursty: five blocks of 200 jobs 30 s and 2 s apart), on {testbed} ({TESTBEDS[testbed]} VMs), "
        f"{_seeds_text(seeds)}.",
        "## Seed findings and these results",
        f"- \"the SJF allocation policy reduces the overall overhead for jobs\": SJF's slowdown is at most FCFS's "
        f"in {_share(sjf_better)} provisioning-workload cases.",
        f'- "Startup results in lower slowdown in comparison to dynamic provisioning policies": in '
        f"{_share(startup_lower)} workloads.",
        f'- "the OD-G policy results in slightly higher slowdown" than OD-S: in {_share(odg_higher)} cases.',
        '- "on-demand provisioning policies are much more sensitive to variations [of cost] in comparison to '
        'Startup": see the cost column.',
        markdown_table(["arrivals", "pair", "JSD", "Cc ($)", "makespan (s)"], table),
    ]
    return finish(result, "Villegas §6.5.4: provisioning-allocation pairs (Fig. 6.7)", body, traces=False)


# --------------------------------------------------------------------------------------- FCBF


def villegas_fcbf(
    traces: Sequence[str],
    out: Path,
    *,
    vms: Sequence[int] = FCBF_VMS,
    week: int = 1,
    workers: int | None = None,
    sweep: Sweep | None = None,
    cancelled: str = RUN_CANCELLED,
) -> ExperimentResult:
    """FCFS (with VM reservation) and the FCBF family with the dissertation's On-Demand on a
    week of the trace at several site sizes (Figs 7.5-7.7).

    `week` picks the week of the trace (0 = the first; the dissertation's fragment is not
    identified); jobs larger than the site can never run and are counted as rejected.
    """
    name = "villegas-fcbf"
    if not traces:
        raise ValueError(f"{name} needs a trace (the dissertation uses {DEFAULT_FCBF_TRACE})")
    if week < 0:
        raise ValueError(f"week must be >= 0, got {week}")
    points = [
        Point(
            trace=t,
            env=f"villegas-parallel:vms={n}",
            allocation=policy(a),
            provisioning=policy("od-s"),
            labels=(("trace", Path(t).name.split(".swf")[0]), ("vms", n), ("allocation", a)),
            cancelled=cancelled,
            window=(week * WEEK, WEEK),
        )
        for t in traces
        for n in vms
        for a in FCBF_POLICIES
    ]
    result = ExperimentResult(name, out, run_experiment(name, points, workers, sweep))
    rows = result.rows
    labels = sorted({r["trace"] for r in rows})
    figs = (
        ("makespan", "makespan (s)", "fig7_5_makespan", "Fig. 7.5"),
        ("awrt", "AWRT (s)", "fig7_6_awrt", "Fig. 7.6"),
        ("bounded_slowdown_mean", "bounded slowdown", "fig7_7_bounded_slowdown", "Fig. 7.7"),
    )
    for metric, ylabel, key, title in figs:
        _bars(
            result,
            rows,
            key=key,
            panels=[("trace", t) for t in labels],
            groups=("vms", vms),
            series=("allocation", FCBF_POLICIES),
            metric=metric,
            ylabel=ylabel,
            title=title,
            log=metric != "makespan",
        )

    def get(t: str, n: int, a: str, m: str) -> float:
        r = _find(rows, trace=t, vms=n, allocation=a)
        return np.inf if r is None or r.get(m) is None else float(r[m])

    cases = [(t, n) for t in labels for n in vms]
    aggr_lowest = [
        get(t, n, "fcbf-aggr", "bounded_slowdown_mean")
        == min(get(t, n, a, "bounded_slowdown_mean") for a in FCBF_POLICIES)
        for t, n in cases
    ]
    ratio = [
        get(t, n, "fcfs-reserve", "bounded_slowdown_mean") / get(t, n, "fcbf-aggr", "bounded_slowdown_mean")
        for t, n in cases
    ]
    qwait_close = [
        abs(get(t, n, "fcbf-qwait", "awrt") - get(t, n, "fcfs-reserve", "awrt"))
        <= 0.1 * get(t, n, "fcfs-reserve", "awrt")
        for t, n in cases
    ]
    table = [
        [
            t,
            n,
            LABEL[a],
            r and r.get("jobs_completed"),
            r and r.get("jobs_rejected"),
            r and r.get("makespan"),
            r and r.get("awrt"),
            r and r.get("bounded_slowdown_mean"),
            r and r.get("slowdown_mean"),
        ]
        for t in labels
        for n in vms
        for a in FCBF_POLICIES
        for r in [_find(rows, trace=t, vms=n, allocation=a)]
    ]
    body = [
        f"Week {week} (days {7 * week}-{7 * week + 7} from the first submit) of "
        f"{', '.join(labels)} on one site of {', '.join(map(str, vms))} single-processor VMs (§7.4.1: boot 600 s, "
        "shutdown 60 s, 10 s rounds), the dissertation's On-Demand (OD-S) with FCFS (which reserves idle VMs for the "
        "head job, §7.3.1), FCBF-Aggressive, FCBF-Split (half the free VMs set aside for the head) and FCBF-QWait "
        "(300 s). One run per point: the trace is fixed.",
        "## Seed findings and these results",
        "\n".join(
            [
                '- Fig. 7.5: "the workload\'s makespan is mostly determined by the number of resources at the site".',
                f'- Fig. 7.7: "aggressive FCBF highly reduces the average job slowdown", "up to five times less": '
                f"FCBF-Aggr has the lowest bounded slowdown in {_share(aggr_lowest)} site sizes; FCFS / FCBF-Aggr "
                f"bounded slowdown ratio {min(ratio):.2g}-{max(ratio):.2g}.",
                '- Fig. 7.6: "FCBF-QW achieves the same AWRT as FCFS": within 10% in '
                f"{_share(qwait_close)} site sizes.",
            ]
        ),
        markdown_table(
            [
                "trace",
                "VMs",
                "allocation",
                "jobs done",
                "too large (rejected)",
                "makespan (s)",
                "AWRT (s)",
                "bounded slowdown",
                "slowdown",
            ],
            table,
        ),
    ]
    return finish(result, "Villegas §7.4.2: FCFS and FCBF on parallel jobs (Figs 7.5-7.7)", body)


EXPERIMENTS: dict[str, Callable[..., ExperimentResult]] = {
    "villegas-provisioning": villegas_provisioning,
    "villegas-allocation": villegas_allocation,
    "villegas-short-long": villegas_short_long,
    "villegas-pairs": villegas_pairs,
    "villegas-fcbf": villegas_fcbf,
}
#: experiments that read traces, and the traces they read by default
DEFAULT_TRACES: dict[str, tuple[str, ...]] = {"villegas-fcbf": (DEFAULT_FCBF_TRACE,)}
