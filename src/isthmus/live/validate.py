"""Simulation against live: one reduced workload run both ways with the same policies.

KOALA-C checks its simulator against the real system with a reduced trace (KOALA-C Fig. 7,
dissertation §6.6); this module does the same for isthmus. A workload is cut to its first N
jobs, its submit times and runtimes are multiplied by a time scale F (F = 0.01: a 10-minute job
sleeps 6 s), runtimes below a floor are raised to it, and jobs larger than the largest site are
dropped. The result is

* **simulated** with :func:`isthmus.sim.runner.simulate` (same environment, policies and round
  interval), and
* **run live**: a real manager (``python -m isthmus.cli.live_entry server``) on a fresh state directory
  and free port, each job submitted through the REST API at its scaled submit time as
  ``sleep RUNTIME``, run by real pilots; when every job has ended and every VM is gone, the
  manager's persisted engine event log is fetched from ``/events``.

Both event logs go through the same :func:`isthmus.metrics.run.compute_run_metrics`, so the
figures differ only by what the live system adds: dispatch latency (decision → pilot → process
start), process start-up, the report of the end reaching the manager, VM pilots registering
after their boot delay, and submissions a few milliseconds late. A run that ends a few tens of
milliseconds later than simulated can miss a scheduling round and wait one more round interval;
that is why very short jobs differ most in slowdown and why the floor keeps runtimes >= 2 s.

Live times are relative to an instant ``t0`` aligned to the round interval, so live rounds fall
at the same offsets as simulated ones; the workload starts half a round after ``t0`` on both
sides so that the first arrival does not race the first round.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from isthmus.live.client import Client
from isthmus.live.launch import live_manager
from isthmus.metrics.run import RunMetrics, compute_run_metrics, write_run
from isthmus.model.environment import Environment, PolicyChoice
from isthmus.model.events import EventKind, EventLog
from isthmus.model.job import Job
from isthmus.model.states import TERMINAL_NAMES, PilotState
from isthmus.policies import registry
from isthmus.workloads import Workload, reduce_workload

DEFAULT_SCALE = 0.01
"""Default time scale: submit times and runtimes × 0.01 (a 10-minute job sleeps 6 s)."""

DEFAULT_MIN_RUNTIME = 2.5
"""Runtime floor (s) after scaling: shorter runs are dominated by dispatch and process start. Not a
multiple of the round interval, so floored runs do not all end exactly on a round (see the module doc)."""

COMPARED = ("wait_mean", "slowdown_mean", "bounded_slowdown_mean", "makespan", "utilization", "cost_charged")
"""Summary figures compared side by side (docs/metrics.md)."""

TERMINAL = TERMINAL_NAMES
MAX_LIST = 100000  # the API's largest page of jobs

Progress = Callable[[str], None]


# --------------------------------------------------------------------------------- the case


@dataclass(frozen=True)
class ValidationCase:
    """The workload both sides run: scaled, floored jobs (sorted by submit time) on `env`.

    `dropped`: ids of jobs larger than the largest site (removed); `floored`/`capped`: how many
    runtimes were raised to `min_runtime` / lowered to `max_runtime`; `lead_in`: seconds added
    to every submit time (half a round interval).
    """

    env: Environment
    jobs: tuple[Job, ...]
    workload: str
    scale: float
    min_runtime: float
    max_runtime: float | None
    lead_in: float
    dropped: tuple[int, ...] = ()
    floored: int = 0
    capped: int = 0

    @property
    def span(self) -> float:
        """Seconds from t0 to the last submission."""
        return self.jobs[-1].submit if self.jobs else 0.0

    def describe(self) -> dict[str, Any]:
        """A JSON-able description of the case."""
        return {
            "environment": self.env.name,
            "workload": self.workload,
            "jobs": len(self.jobs),
            "scale": self.scale,
            "min_runtime": self.min_runtime,
            "max_runtime": self.max_runtime,
            "lead_in": self.lead_in,
            "round_interval": self.env.round_interval,
            "dropped_too_large": list(self.dropped),
            "runtimes_floored": self.floored,
            "runtimes_capped": self.capped,
            "submit_span": self.span,
            "total_runtime": sum(j.runtime for j in self.jobs),
        }


def prepare_case(
    env: Environment,
    workload: Workload,
    *,
    scale: float = DEFAULT_SCALE,
    jobs: int | None = None,
    min_runtime: float = DEFAULT_MIN_RUNTIME,
    max_runtime: float | None = None,
    name: str | None = None,
) -> ValidationCase:
    """Reduce `workload` for a validation run on `env`.

    Keeps the first `jobs` jobs, scales submit times (from the first submission) and runtimes by
    `scale` (`isthmus.workloads.reduce_workload`), drops jobs larger than the largest site,
    rounds runtimes to 10 ms and clamps them to [`min_runtime`, `max_runtime`]; requested
    runtimes are scaled and floored the same way. ValueError when nothing is left.
    """
    if not (math.isfinite(scale) and scale > 0):
        raise ValueError(f"scale must be a positive number, got {scale}")
    if min_runtime < 0:
        raise ValueError(f"min_runtime must be >= 0, got {min_runtime}")
    if max_runtime is not None and max_runtime < max(min_runtime, 0.01):
        raise ValueError(f"max_runtime ({max_runtime}) must be at least min_runtime ({min_runtime})")
    w = workload.head(jobs) if jobs is not None else workload
    if not w.jobs:
        raise ValueError(f"workload {workload.name!r} has no jobs")
    reduced, _report = reduce_workload(w, arrival_scale=scale, runtime_scale=scale)
    interval = env.round_interval
    lead_in = 0.5 * interval if interval else 0.5
    largest = env.max_processors
    kept: list[Job] = []
    dropped: list[int] = []
    floored = capped = 0
    for job in reduced.jobs:
        if job.size > largest or job.size <= 0:
            dropped.append(job.id)
            continue
        runtime = round(job.runtime, 2)
        if runtime < min_runtime:
            runtime = min_runtime
            floored += 1
        if max_runtime is not None and runtime > max_runtime:
            runtime = max_runtime
            capped += 1
        req = job.requested_runtime
        if req is not None:
            req = round(max(req, min_runtime), 2)
        kept.append(
            dataclasses.replace(job, submit=round(job.submit + lead_in, 3), runtime=runtime, requested_runtime=req)
        )
    if not kept:
        raise ValueError(f"no job of {workload.name!r} fits the largest site of {env.name!r} ({largest} processors)")
    return ValidationCase(
        env=env,
        jobs=tuple(kept),
        workload=name or workload.source or workload.name,
        scale=scale,
        min_runtime=min_runtime,
        max_runtime=max_runtime,
        lead_in=lead_in,
        dropped=tuple(dropped),
        floored=floored,
        capped=capped,
    )


def scale_environment(env: Environment, scale: float) -> Environment:
    """`env` with its times multiplied by `scale`, for a time-scaled validation of an environment
    made for real time (the dissertation's 600 s boots): the round interval, every site's boot,
    shutdown and idle-release times, billing increment and availability window. The price per
    hour is divided by `scale`, so a billing increment costs what it did and charged costs stay
    comparable with the unscaled run. Policy parameters in seconds are not changed."""
    if not (math.isfinite(scale) and scale > 0):
        raise ValueError(f"scale must be a positive number, got {scale}")

    def t(x: float | None) -> float | None:
        return None if x is None else x * scale

    sites = tuple(
        dataclasses.replace(
            s,
            boot_time=s.boot_time * scale,
            shutdown_time=s.shutdown_time * scale,
            idle_release_time=s.idle_release_time * scale,
            billing_increment=s.billing_increment * scale,
            price_per_hour=s.price_per_hour / scale,
            available_from=t(s.available_from),
            available_until=t(s.available_until),
        )
        for s in env.sites
    )
    return dataclasses.replace(env, sites=sites, round_interval=t(env.round_interval))


def _with_policies(env: Environment, allocation: PolicyChoice, provisioning: PolicyChoice | None) -> Environment:
    return dataclasses.replace(
        env, allocation=allocation, provisioning=provisioning if provisioning is not None else env.provisioning
    )


# ------------------------------------------------------------------------------ simulation


@dataclass
class SimRun:
    """The simulated side of one policy: its metrics and event log."""

    metrics: RunMetrics
    log: EventLog


def simulate_case(case: ValidationCase, allocation: PolicyChoice, provisioning: PolicyChoice | None = None) -> SimRun:
    """The simulated side: `simulate()` on the case's jobs, metrics from its event log."""
    from isthmus.sim.runner import simulate

    env = _with_policies(case.env, allocation, provisioning)
    result = simulate(env, list(case.jobs), env.allocation, env.provisioning)
    return SimRun(compute_run_metrics(result.log, result.jobs, env, result.end_time), result.log)


def write_events(log: EventLog, path: Path) -> Path:
    """Write an event log as CSV (time, kind name, job, site, vm, value) for inspection."""
    lines = ["time,kind,job,site,vm,value"]
    lines += [f"{e.time:.6f},{e.kind.name},{e.job},{e.site},{e.vm},{e.value:g}" for e in log]
    path.write_text("\n".join(lines) + "\n")
    return path


# ------------------------------------------------------------------------------------ live


@dataclass
class LiveRun:
    """The live side of one policy: metrics from the manager's event log, and what it cost.

    `log`: the event log with times relative to t0 and workload job ids; `run_overhead_mean`:
    mean over completed runs of (END − START) − runtime, i.e. dispatch + process start + end
    report; `submit_lag_mean`: mean lateness of the SUBMIT events against the scaled submit
    times; `wall_seconds`: the whole live run including start-up and shut-down.
    """

    metrics: RunMetrics
    log: EventLog
    wall_seconds: float
    run_overhead_mean: float | None
    run_overhead_max: float | None
    submit_lag_mean: float | None
    notes: list[str] = field(default_factory=list)


def _wait_for(pred: Callable[[], bool], timeout: float, what: str, interval: float = 0.1) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(interval)


def run_live(
    case: ValidationCase,
    allocation: PolicyChoice,
    provisioning: PolicyChoice | None = None,
    *,
    work_dir: Path,
    timeout: float | None = None,
    progress: Progress | None = None,
    tag: str | None = None,
    vms_kept: int = 0,
) -> LiveRun:
    """The live side: submit the case's jobs as `sleep RUNTIME` (with their VM requirements) to a
    real manager and read its event log.

    The manager does not kill runs at their requested runtime, as the simulator does not. A job
    without a requested runtime is submitted with its runtime as one unless the allocation
    policy uses a predictor: the simulated engine knows that runtime (policies that need runtimes
    "known a priori", such as OD-ExecTime, read it), and this is how a live manager learns it.

    `vms_kept`: VMs the simulated run still held at its end (a policy that never releases them,
    such as Startup); the live run ends once every job has ended and no more VMs than that are
    left, as the simulated one does.

    Waits until every cluster pilot has registered, then picks t0 (a multiple of the round
    interval, at least one second ahead) and submits each job at t0 + its submit time with a
    token of its user (one token per workload user, so per-user predictions match). Waits until
    every job is terminal and every VM but `vms_kept` is gone (or `timeout` seconds after t0, default 60 s + the
    longest runtime + 3 × (submission span + total runtime / largest site)) and computes the metrics from the
    persisted event log.
    """
    say = progress or (lambda _m: None)
    env = _with_policies(case.env, allocation, provisioning)
    wall0 = time.monotonic()
    notes: list[str] = []
    if timeout is None:
        longest = max((j.runtime for j in case.jobs), default=0.0)
        timeout = 60.0 + longest + 3.0 * (case.span + sum(j.runtime for j in case.jobs) / max(1, env.max_processors))
    # Without a predictor the simulated engine estimates a job without a requested runtime by its
    # actual runtime (policies such as OD-ExecTime read it); the live manager can only be told it,
    # as the requested runtime, which it then must not enforce (the simulated run does not).
    predicts = registry.create("allocation", env.allocation.name, env.allocation.params).uses_prediction
    with live_manager(env, work_dir, tag=tag, extra_args=["--no-kill-at-walltime"]) as admin:
        # pilots: the local ones and those of batch systems in pilot mode; a site in direct mode
        # is ready once its capacity is discovered
        n_pilots = sum(s.nodes for s in env.sites if not s.is_cloud and (s.lrm is None or s.lrm.mode == "pilot"))
        _wait_for(
            lambda: sum(p["state"] == PilotState.REGISTERED for p in admin.pilots()) >= n_pilots,
            60,
            f"{n_pilots} cluster pilots to register",
        )
        direct = {s.name: s.nodes * s.cores_per_node for s in env.sites if s.lrm is not None and s.lrm.mode == "direct"}
        _wait_for(
            lambda: all(d["online"] >= direct[d["name"]] for d in admin.sites() if d["name"] in direct),
            60,
            "the capacity of sites in direct mode",
        )
        users: dict[str, Client] = {}
        workload_user: dict[str, str] = {}  # the token's user -> the workload's
        for job in case.jobs:
            if job.user not in users:
                workload_user[f"u{len(users)}"] = job.user
                tok = admin.create_token(f"u{len(users)}")["token"]
                users[job.user] = Client(admin.url, tok)
        try:
            interval = env.round_interval or 1.0
            t0 = math.ceil((time.time() + 1.0) / interval) * interval
            say(f"live: {len(case.jobs)} jobs over {case.span:.1f} s from t0")
            ids: dict[int, int] = {}
            for job in case.jobs:
                delay = t0 + job.submit - time.time()
                if delay > 0:
                    time.sleep(delay)
                spec: dict[str, Any] = {
                    "command": "sleep",
                    "args": [f"{job.runtime:.2f}"],
                    "size": job.size,
                    "name": f"validate-{job.id}",
                }
                if job.vm is not None:  # VM requirements (Cloud Scheduler, Appendix I), as the API takes them
                    spec["vm"] = {k: v for k, v in dataclasses.asdict(job.vm).items() if v is not None}
                requested = job.requested_runtime if job.requested_runtime is not None or predicts else job.runtime
                if requested is not None:
                    spec["requested_runtime"] = requested
                ids[users[job.user].submit(**spec)] = job.id
        finally:
            for c in users.values():
                c.close()
        say("live: all submitted; waiting for the jobs to end and the VMs to go")

        def deadline_left() -> float:
            assert timeout is not None
            return timeout - (time.time() - t0)

        def all_done() -> bool:
            rows = admin.jobs(all_=True, states=list(TERMINAL), limit=MAX_LIST)
            return sum(r["id"] in ids for r in rows) >= len(ids)

        try:
            _wait_for(all_done, max(1.0, deadline_left()), "every job to end", 0.5)
        except TimeoutError as exc:
            notes.append(str(exc))
        try:
            _wait_for(
                lambda: len(admin.vms()) <= vms_kept,
                max(1.0, deadline_left()),
                "every VM to be released" if not vms_kept else f"all but {vms_kept} VMs to be released",
                0.5,
            )
        except TimeoutError as exc:
            notes.append(str(exc))
        horizon_wall = time.time()
        rows = admin.events()
        # the user each VM serves (vm-share), named in the log's VM_USER events as the simulation names it
        owners = {(int(v["site"]), int(v["vm"])): v.get("owner") for v in admin.vms(True)}
        reasons = {
            r["id"]: r["reason"] for r in admin.jobs(all_=True, limit=MAX_LIST) if r["id"] in ids and r.get("reason")
        }
    log = EventLog()
    for t, kind, live_job, site, vm, value in rows:
        jid = ids.get(int(live_job), -1) if live_job >= 0 else -1
        if live_job >= 0 and jid < 0:
            continue  # not one of ours
        i = log.append(float(t) - t0, int(kind), jid, int(site), int(vm), float(value))
        if int(kind) == EventKind.VM_USER:
            owner = owners.get((int(site), int(vm))) or ""
            log.notes[i] = workload_user.get(owner, owner)
    for live_id, reason in reasons.items():
        log.reasons[ids[live_id]] = reason
    jobs = {j.id: j for j in case.jobs}
    all_gone = not any("VM" in n for n in notes)
    horizon = (log.columns()["time"][-1] if len(log) else 0.0) if all_gone else horizon_wall - t0
    metrics = compute_run_metrics(log, jobs, env, horizon)
    overheads, lags = _overheads(log, jobs)
    return LiveRun(
        metrics=metrics,
        log=log,
        wall_seconds=time.monotonic() - wall0,
        run_overhead_mean=sum(overheads) / len(overheads) if overheads else None,
        run_overhead_max=max(overheads) if overheads else None,
        submit_lag_mean=sum(lags) / len(lags) if lags else None,
        notes=notes,
    )


def _overheads(log: EventLog, jobs: dict[int, Job]) -> tuple[list[float], list[float]]:
    """(END − START − runtime of completed runs, SUBMIT time − scaled submit time), per job."""
    started: dict[int, float] = {}
    overheads: list[float] = []
    lags: list[float] = []
    for e in log:
        job = jobs.get(e.job)
        if job is None:
            continue
        if e.kind is EventKind.SUBMIT:
            lags.append(e.time - job.submit)
        elif e.kind is EventKind.START:
            started[e.job] = e.time
        elif e.kind is EventKind.END and e.job in started:
            overheads.append(e.time - started[e.job] - job.runtime)
    return overheads, lags


# ------------------------------------------------------------------------- repeated simulation


def repeat_summaries(
    cases: Sequence[ValidationCase], allocation: PolicyChoice, provisioning: PolicyChoice | None = None
) -> dict[str, dict[str, Any]]:
    """Simulate each case (the same model drawn with other seeds, dissertation §6.6: "Each
    workload is executed 30 times") and give, per compared figure, the runs' mean, the
    half-width of its 95% confidence interval, minimum, maximum and count."""
    from isthmus.metrics.stats import mean_ci95

    values: dict[str, list[float]] = {k: [] for k in COMPARED}
    for case in cases:
        summary = simulate_case(case, allocation, provisioning).metrics.summary
        for k in COMPARED:
            v = summary.get(k)
            if isinstance(v, int | float) and math.isfinite(v):
                values[k].append(float(v))
    out: dict[str, dict[str, Any]] = {}
    for k, xs in values.items():
        mean, ci = mean_ci95(xs)
        out[k] = {"mean": mean, "ci95": ci, "min": min(xs, default=None), "max": max(xs, default=None), "n": len(xs)}
    return out


# ------------------------------------------------------------------------------ comparison


def compare_summaries(
    sim: dict[str, Any],
    live: dict[str, Any],
    keys: Sequence[str] = COMPARED,
    repeated: dict[str, dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """One row per figure: simulated, live, absolute (live − sim) and relative ((live − sim) / sim)
    difference; with `repeated` (`repeat_summaries`), also the repeated simulations' figures and
    whether the live figure lies inside their 95% confidence interval and inside their range."""
    rows = []
    for k in keys:
        s, v = sim.get(k), live.get(k)
        absd = rel = None
        if isinstance(s, int | float) and isinstance(v, int | float) and math.isfinite(s) and math.isfinite(v):
            absd = v - s
            rel = absd / abs(s) if s else (0.0 if v == 0 else None)
        row: dict[str, Any] = {"metric": k, "simulated": s, "live": v, "abs_diff": absd, "rel_diff": rel}
        rep = (repeated or {}).get(k)
        if rep is not None:
            row["repeated"] = rep
            ok = isinstance(v, int | float) and math.isfinite(v) and rep["mean"] is not None
            ci = rep["ci95"] or 0.0
            row["live_in_ci95"] = bool(ok and abs(v - rep["mean"]) <= ci + 1e-12)
            row["live_in_range"] = bool(ok and rep["min"] - 1e-12 <= v <= rep["max"] + 1e-12)
        rows.append(row)
    return rows


@dataclass
class PolicyValidation:
    """Both sides of one policy and their comparison."""

    policy: str
    simulated: SimRun
    live: LiveRun
    rows: list[dict[str, Any]]

    def to_dict(self) -> dict[str, Any]:
        """JSON-able: the comparison rows, both sides' job counts and the live overheads."""
        s, v = self.simulated.metrics.summary, self.live.metrics.summary
        return {
            "policy": self.policy,
            "comparison": self.rows,
            "simulated": {k: s.get(k) for k in ("jobs_total", "jobs_completed", "jobs_unfinished", "jobs_rejected")},
            "live": {
                **{k: v.get(k) for k in ("jobs_total", "jobs_completed", "jobs_unfinished", "jobs_rejected")},
                "run_overhead_mean": self.live.run_overhead_mean,
                "run_overhead_max": self.live.run_overhead_max,
                "submit_lag_mean": self.live.submit_lag_mean,
                "wall_seconds": self.live.wall_seconds,
                "notes": self.live.notes,
            },
        }


@dataclass
class ValidationReport:
    """Every policy of one validation run."""

    case: ValidationCase
    provisioning: str
    policies: list[PolicyValidation]

    def to_dict(self) -> dict[str, Any]:
        """JSON-able report (written as validation.json)."""
        return {
            "case": self.case.describe(),
            "provisioning": self.provisioning,
            "policies": [p.to_dict() for p in self.policies],
        }


def validate(
    case: ValidationCase,
    policies: Sequence[PolicyChoice],
    provisioning: PolicyChoice | None = None,
    *,
    out: Path | None = None,
    work_dir: Path | None = None,
    timeout: float | None = None,
    progress: Progress | None = None,
    tag: str | None = None,
    repeats: Sequence[ValidationCase] = (),
) -> ValidationReport:
    """Simulate and run live every policy of `policies` on `case`; write the files into `out` if given.

    With `repeats` (the same workload model drawn with other seeds), each policy is also
    simulated on every one of them, and the comparison places the live figures among those
    runs (mean, 95% confidence interval, range; dissertation §6.6, Figs 6.9-6.11).

    Files: ``validation.json`` and, per policy, ``LABEL.sim.*`` / ``LABEL.live.*`` per-job
    records and summaries (`write_run`) and event logs (``.events.csv``, live times from t0).
    Live state (database, job output, pilot logs) goes into `work_dir` (default: a temporary
    directory removed afterwards). `tag` is set as
    ISTHMUS_TAG in the managers, their pilots and jobs (default: a fresh one per manager).
    """
    from isthmus.model.environment import policy_label

    say = progress or (lambda _m: None)
    prov = provisioning if provisioning is not None else case.env.provisioning
    results: list[PolicyValidation] = []
    with contextlib.ExitStack() as stack:
        base = work_dir or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="isthmus-validate-")))
        for choice in policies:
            label = policy_label(choice)
            if registry.info("allocation", choice.name).cls.needs_true_runtimes:
                raise ValueError(f"{choice.name} knows actual runtimes: it exists in simulation only")
            say(f"{label}: simulating")
            sim = simulate_case(case, choice, prov)
            say(f"{label}: running live")
            safe = "".join(ch if ch.isalnum() or ch in "-_.=" else "_" for ch in label)
            kinds = [e.kind for e in sim.log]
            kept = kinds.count(EventKind.VM_LEASE) - kinds.count(EventKind.VM_RELEASE)
            live = run_live(
                case, choice, prov, work_dir=base / safe, timeout=timeout, progress=progress, tag=tag, vms_kept=kept
            )
            repeated = None
            if repeats:
                say(f"{label}: simulating {len(repeats)} draws of the workload")
                repeated = repeat_summaries(repeats, choice, prov)
            rows = compare_summaries(sim.metrics.summary, live.metrics.summary, repeated=repeated)
            results.append(PolicyValidation(label, sim, live, rows))
            if out is not None:
                out.mkdir(parents=True, exist_ok=True)
                for side, metrics, log in (("sim", sim.metrics, sim.log), ("live", live.metrics, live.log)):
                    write_run(metrics, out, f"{safe}.{side}")
                    write_events(log, out / f"{safe}.{side}.events.csv")
    report = ValidationReport(case, policy_label(prov), results)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "validation.json").write_text(json.dumps(report.to_dict(), indent=2, default=str) + "\n")
    return report


__all__ = [
    "COMPARED",
    "DEFAULT_MIN_RUNTIME",
    "DEFAULT_SCALE",
    "LiveRun",
    "PolicyValidation",
    "SimRun",
    "ValidationCase",
    "ValidationReport",
    "compare_summaries",
    "live_manager",
    "prepare_case",
    "repeat_summaries",
    "run_live",
    "scale_environment",
    "simulate_case",
    "validate",
    "write_events",
]
