"""Jobs: `submit` (a job or a bag of tasks), `jobs`, `show`, `cancel` and `logs`."""

from __future__ import annotations

import json
import os
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import typer

from isthmus.backends.jobfiles import expand
from isthmus.cli import bounds
from isthmus.cli.live.common import (
    CA_OPT,
    JSON_OPT,
    PRIORITIES,
    REFUSED_DIRECTIVES,
    TERMINAL,
    TOKEN_OPT,
    URL_OPT,
    api_call,
    api_client,
    api_fail,
    elapsed,
    exit_status,
    export_environment,
    fmt_dur,
    fmt_time,
    parse_time_limit,
    print_table,
    refused_option,
)
from isthmus.cli.live.slurm_fields import FIELDS, cancel_states, parse_format, render
from isthmus.live.client import SUBMIT_ATTEMPTS, ApiError


def register(app: typer.Typer) -> None:
    """Add the `submit`, `jobs`, `show`, `cancel` and `logs` commands to `app`."""

    @app.command("submit", context_settings={"allow_interspersed_args": False})
    def submit(
        command: list[str] | None = typer.Argument(
            None, help="Script file, or command and arguments (put them after --); none for a bag of tasks."
        ),
        tasks: Path | None = typer.Option(
            None, "--tasks", help="Bag of tasks: a file with one shell command line per task (# comments)."
        ),
        sweep: str | None = typer.Option(
            None, "--sweep", help="Bag of tasks: a command line template, e.g. './sim --x {x}', with --param."
        ),
        param: list[str] = typer.Option(
            [], "--param", help="Sweep parameter NAME=VALUES: x=1..1000, x=a,b,c or x=5; repeatable (product)."
        ),
        retries: int | None = typer.Option(
            None, "--retries", help="Bag of tasks: runs again of a task that exits non-zero (default 0).", min=0
        ),
        size: int | None = typer.Option(
            None, "-n", "--ntasks", "--size", help="Processors (slots) on one site (default 1).", min=1
        ),
        time_: str | None = typer.Option(
            None,
            "-t",
            "--time",
            help="Time limit, as sbatch: minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS; "
            "UNLIMITED (or 0) for none; also 90s, 5m, 2h, 1d. The job is killed when it is reached.",
        ),
        priority: str | None = typer.Option(
            None, "--priority", help="super-high, high, low or super-low (default high)."
        ),
        export: str | None = typer.Option(
            None,
            "--export",
            help="Submitter's variables sent with the job, as sbatch: ALL (default), NONE, or "
            "NAME[=value][,...] (only those; ALL,NAME=value adds to all). ISTHMUS_* are never sent.",
        ),
        output: str | None = typer.Option(
            None,
            "-o",
            "--output",
            help="File for stdout (%j job id, %x job name, %u user, %A/%a array ids, %% a %); "
            "relative to the working directory.",
        ),
        error: str | None = typer.Option(
            None, "-e", "--error", help="File for stderr (default: the --output file, else the spool)."
        ),
        env: list[str] = typer.Option([], "--env", help="KEY=VALUE, repeatable."),
        chdir: str | None = typer.Option(None, "-D", "--chdir", help="Working directory (default: current)."),
        name: str | None = typer.Option(None, "-J", "--job-name", "--name", help="Job name."),
        _partition: str | None = refused_option("-p", "--partition"),
        _dependency: str | None = refused_option("-d", "--dependency"),
        _array: str | None = refused_option("-a", "--array"),
        vm_type: str | None = typer.Option(None, "--vm-type", help="Instance type the job needs."),
        vm_image: str | None = typer.Option(None, "--vm-image", help="Image the VM must boot (name or provider id)."),
        vm_cores: int | None = typer.Option(None, "--vm-cores", help="Cores per VM, at least.", min=1),
        vm_memory: int | None = typer.Option(None, "--vm-memory", help="Memory per VM in MB, at least.", min=1),
        vm_arch: str | None = typer.Option(None, "--vm-arch", help="CPU architecture, e.g. x86_64."),
        vm_storage: float | None = typer.Option(
            None, "--vm-storage", help="Disk per VM in GB, at least.", callback=bounds.positive
        ),
        vm_network: str | None = typer.Option(None, "--vm-network", help="Network the VM joins, e.g. public."),
        url: str | None = URL_OPT,
        _ca: str | None = CA_OPT,
        token: str | None = TOKEN_OPT,
        as_json: bool = JSON_OPT,
    ) -> None:
        """Submit a job; prints its id (like sbatch).

        A script file (first line '#!', or a name ending in .sh) is copied at submission, so
        later edits do not change the job; '#ISTHMUS --size 4' or '#SBATCH --ntasks=4' lines at
        its top set options (--size, --time, --name, --output, --error, --priority, --chdir,
        --export, and the VM requirements
        --vm-type, --vm-image, --vm-arch, --vm-cores, --vm-memory, --vm-storage, --vm-network),
        and options given here override them. A job no site can ever match is refused with the
        reason (docs/clouds.md).
        """
        from isthmus.backends import jobfiles

        def bad(message: str) -> NoReturn:
            typer.echo(f"error: {message}", err=True)
            raise typer.Exit(2)

        # one key for every send of this submission: the manager stores it once however often
        # a lost connection or a 503 makes the client send it again
        once = str(uuid.uuid4())
        if tasks is not None or sweep is not None or param or retries is not None:
            rigid_only = {
                "--size": size, "--time": time_, "--priority": priority, "--output": output, "--error": error,
                "--export": export,
                "--vm-type": vm_type, "--vm-image": vm_image, "--vm-cores": vm_cores, "--vm-memory": vm_memory,
                "--vm-arch": vm_arch, "--vm-storage": vm_storage, "--vm-network": vm_network,
            }  # fmt: skip
            not_bag = [k for k, v in rigid_only.items() if v is not None]
            if command:
                bad(f"a bag of tasks takes its commands from --tasks or --sweep, not from {' '.join(command)!r}")
            if not_bag:
                bad(f"{', '.join(not_bag)}: not for a bag of tasks (each task runs on one processor, at low priority)")
            bag = _bag_spec(tasks, sweep, param, retries, env, chdir, name, bad)
            job_id = api_call(url, token, lambda c: c.submit_bag(idempotency_key=once, attempts=SUBMIT_ATTEMPTS, **bag))
            typer.echo(json.dumps({"id": job_id}) if as_json else f"Submitted bag {job_id}")
            return
        if not command:
            bad("give a command or script to run, or a bag of tasks with --tasks FILE or --sweep TEMPLATE --param ...")
        options: dict[str, Any] = {}
        script: str | None = None
        program = command[0]
        if jobfiles.is_script(program):
            try:
                script = Path(program).read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                bad(f"{program}: cannot read the script: {exc}")
            if "\x00" in script:
                bad(f"{program}: the script contains a null byte (a binary file? run it after --)")
            try:
                options = jobfiles.parse_directives(
                    script, program, jobfiles.directive_options(parse_time_limit, PRIORITIES), REFUSED_DIRECTIVES
                )
            except jobfiles.ScriptError as exc:
                bad(str(exc))
            program = os.path.abspath(program)
        given = {
            "size": size, "name": name, "output": output, "error": error, "priority": priority, "chdir": chdir,
            "export": export,
        }  # fmt: skip
        for key, value in given.items():
            if value is not None:
                options[key] = value
        if time_ is not None:
            try:
                options["time"] = parse_time_limit(time_)
            except ValueError as exc:
                bad(f"-t/--time: {exc}")
        priority_ = options.get("priority", "high")
        if priority_ not in PRIORITIES:
            bad(f"--priority: expected one of {', '.join(PRIORITIES)}, got {priority_!r}")
        workdir = os.path.abspath(options["chdir"]) if options.get("chdir") else os.getcwd()
        spec: dict[str, Any] = {
            "command": program,
            "args": command[1:],
            "size": options.get("size", 1),
            "priority": priority_,
            "cwd": workdir,
        }
        if script is not None:
            spec["script"] = script
        if options.get("name"):
            spec["name"] = options["name"]
        elif script is not None:
            spec["name"] = Path(program).name
        if options.get("time") is not None:
            spec["requested_runtime"] = options["time"]
        for key in ("output", "error"):
            if options.get(key):
                try:
                    jobfiles.check_template(options[key])
                except jobfiles.OutputTemplateError as exc:
                    bad(f"--{key}: {exc}")
                # relative to the job's working directory, as sbatch does
                spec[key] = os.path.join(workdir, os.path.expanduser(options[key]))
        spec["env"] = _environment(options.get("export", "ALL"), env, bad)
        vm = jobfiles.vm_options(options)
        given_vm = {
            "vm_type": vm_type,
            "image": vm_image,
            "cores": vm_cores,
            "memory_mb": vm_memory,
            "cpu_arch": vm_arch,
            "storage_gb": vm_storage,
            "network": vm_network,
        }
        vm.update({k: v for k, v in given_vm.items() if v is not None})
        if vm:
            spec["vm"] = vm
        job_id = api_call(url, token, lambda c: c.submit(idempotency_key=once, attempts=SUBMIT_ATTEMPTS, **spec))
        if as_json:
            typer.echo(json.dumps({"id": job_id}))
        else:
            typer.echo(f"Submitted job {job_id}")

    @app.command("jobs")
    def jobs(
        all_: bool = typer.Option(False, "-a", "--all", help="Include finished jobs (like sacct)."),
        state: list[str] = typer.Option([], "--state", "-s", help="Only jobs in these states."),
        user: str | None = typer.Option(None, "--user", "-u", help="Admin: only this user's jobs."),
        format_: str | None = typer.Option(
            None,
            "-o",
            "--format",
            help="Columns by Slurm's field names, as squeue/sacct -o: e.g. JobID,JobName%30,State,Elapsed,ExitCode "
            f"(fields: {', '.join(FIELDS)}).",
        ),
        url: str | None = URL_OPT,
        _ca: str | None = CA_OPT,
        token: str | None = TOKEN_OPT,
        as_json: bool = JSON_OPT,
    ) -> None:
        """List jobs (like squeue; with --all like sacct)."""
        columns = None
        if format_ is not None:
            try:
                columns = parse_format(format_)
            except ValueError as exc:
                raise typer.BadParameter(str(exc), param_hint="--format") from None
        rows = api_call(url, token, lambda c: c.jobs(all_=all_, states=state or None, user=user))
        if as_json:
            typer.echo(json.dumps(rows, indent=1))
            return
        if columns is not None:
            for line in render(columns, rows):
                typer.echo(line)
            return
        table = []
        for j in rows:
            table.append(
                [
                    str(j["id"]),
                    j["user"],
                    j["name"][:20],
                    j["state"].upper(),
                    str(j["size"]),
                    j["priority"],
                    j["site"] or "-",
                    fmt_dur(elapsed(j)),
                    str(j["restarts"]),
                    "-" if j["exit_code"] is None else str(j["exit_code"]),
                ]
            )
        print_table(["JOBID", "USER", "NAME", "STATE", "SIZE", "PRIO", "SITE", "TIME", "RESTARTS", "EXIT"], table)

    @app.command("show")
    def show(
        job_id: int = typer.Argument(..., min=1),
        url: str | None = URL_OPT,
        _ca: str | None = CA_OPT,
        token: str | None = TOKEN_OPT,
        as_json: bool = JSON_OPT,
    ) -> None:
        """One job in detail with its state history (like scontrol show job / sacct)."""
        j = api_call(url, token, lambda c: c.job(job_id))
        if as_json:
            typer.echo(json.dumps(j, indent=1))
            return
        spec = j["spec"]
        lines = [
            ("JobId", str(j["id"])),
            ("Name", j["name"]),
            ("User", j["user"]),
            ("State", j["state"].upper()),
            ("Command", " ".join([spec.get("command", ""), *spec.get("args", [])])),
            ("Size", str(j["size"])),
            ("Priority", j["priority"]),
            ("RequestedTime", fmt_dur(j["requested_runtime"])),
            ("Site", j["site"] or "-"),
            ("Slots", ",".join(f"{k}:{s}" for k, s in j["slots"]) or "-"),
            ("Run", str(j["run"])),
            ("Restarts", str(j["restarts"])),
            ("ExitCode", "-" if j["exit_code"] is None else str(j["exit_code"])),
            ("SubmitTime", fmt_time(j["submit_time"])),
            ("StartTime", fmt_time(j["start_time"])),
            ("EndTime", fmt_time(j["end_time"] if j["state"] in TERMINAL else None)),
            ("Runtime", fmt_dur(j["runtime"])),
            ("WorkDir", spec.get("cwd") or "-"),
        ]
        if spec.get("script") is not None:
            lines.append(("Script", f"{spec.get('command')} (copied at submission)"))
        if spec.get("output") or spec.get("error"):
            out, err = spec.get("output"), spec.get("error") or spec.get("output")
            lines.append(("StdOut", expand(out, j["id"]) if out else "- (spool)"))
            lines.append(("StdErr", expand(err, j["id"]) if err else "- (spool)"))
        fwd = j.get("forwarded")
        if fwd:
            there = f"job {fwd['remote_id']}" if fwd.get("remote_id") is not None else "not yet acknowledged"
            where = f" at {fwd['where']}" if fwd.get("where") else ""
            lines.append(("Forwarded", f"to peer {fwd['peer']} ({there}), {fwd['state']}{where}"))
        got = j.get("received")
        if got:
            lines.append(("ReceivedFrom", f"{got['sender']} (origin {got['origin']}, job {got['origin_id']} there)"))
        if j.get("reason"):
            by = ", ".join(x for x in (j.get("reason_code"), j.get("reason_policy")) if x)
            lines.append(("Reason", f"{j['reason']} [{by}]" if by else j["reason"]))
        bag = j.get("bag")
        if bag is not None:
            lines = [(k, v) for k, v in lines if k not in ("Command", "Size", "RequestedTime", "Site", "Slots", "Run")]
            rate = f"{bag['throughput']:.3g} tasks/s" if bag["throughput"] is not None else "-"
            held = ", ".join(f"{site}: {n}" for site, n in bag["held"].items()) or "none"
            nodes = ", ".join(f"{n['node']} ({n['processors']})" for n in bag["nodes"]) or "none"
            lines += [
                ("Tasks", str(bag["tasks"])),
                ("Done", str(bag["done"])),
                ("Running", str(bag["running"])),
                ("Failed", str(bag["failed"])),
                ("Queued", str(bag["queued"])),
                ("Retries", str(bag["retries"])),
                ("Throughput", rate),
                ("Held", held),
                ("Nodes", nodes),
            ]
        for k, v in lines:
            typer.echo(f"{k:>14} {v}")
        typer.echo("History:")
        for h in j.get("history") or []:
            typer.echo(
                f"  {fmt_time(h['time'])}.{int((h['time'] % 1) * 1000):03d}  run {h['run']}  "
                f"{h['state'].upper():<10} {h['detail']}"
            )

    @app.command("cancel")
    def cancel(
        job_ids: list[int] | None = typer.Argument(None, help="Job ids (with filters: only those that match).", min=1),
        user: str | None = typer.Option(None, "-u", "--user", help="Only this user's jobs (a user: their own)."),
        name: str | None = typer.Option(None, "-n", "--name", help="Only jobs of this name."),
        state: list[str] = typer.Option(
            [], "-t", "--state", help="Only jobs in this state: PENDING or RUNNING (repeatable, or comma-separated)."
        ),
        url: str | None = URL_OPT,
        _ca: str | None = CA_OPT,
        token: str | None = TOKEN_OPT,
    ) -> None:
        """Cancel jobs (like scancel): by id, or every active job matching the filters
        (combinable: ids and filters cancel the ids that match). Users cancel only their own jobs."""
        try:
            states = cancel_states(state)
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint="--state") from None
        if not job_ids and user is None and name is None and not states:
            typer.echo("error: give job ids, or filters (-u USER, -n NAME, -t STATE)", err=True)
            raise typer.Exit(2)
        failed: list[int] = []  # exit statuses; a failure at run time wins over a refusal
        with api_client(url, token) as c:
            if user is not None or name is not None or states:
                try:  # a user's listing holds only their own jobs, whatever -u names
                    rows = c.jobs(user=user, limit=100000)
                except ApiError as exc:
                    api_fail(exc, token)
                job_ids = [
                    j["id"]
                    for j in rows
                    if (user is None or j["user"] == user)
                    and (name is None or j["name"] == name)
                    and (not states or j["state"] in states)
                    and (not job_ids or j["id"] in job_ids)
                ]
                if not job_ids:
                    typer.echo("no active job matches", err=True)
            for jid in job_ids or []:
                try:
                    c.cancel(jid)
                    typer.echo(f"Cancelled job {jid}")
                except ApiError as exc:
                    typer.echo(f"error: job {jid}: {exc}", err=True)
                    failed.append(exit_status(exc))
        if failed:
            raise typer.Exit(min(failed))

    @app.command("logs")
    def logs(
        job_id: int = typer.Argument(..., min=1),
        stderr: bool = typer.Option(False, "--stderr", help="Show stderr instead of stdout."),
        run: int | None = typer.Option(None, "--run", help="Run number (default: the latest).", min=1),
        task: int | None = typer.Option(None, "--task", min=0, help="A bag of tasks: this task's output."),
        follow: bool = typer.Option(False, "-f", "--follow", help="Keep printing until the job ends."),
        url: str | None = URL_OPT,
        _ca: str | None = CA_OPT,
        token: str | None = TOKEN_OPT,
    ) -> None:
        """Print a job's output (a bag's task's with --task), while it runs or after."""
        stream = "stderr" if stderr else "stdout"
        if task is not None:
            if run is not None or follow:
                typer.echo("error: --task shows a task's last run: --run and --follow are for jobs", err=True)
                raise typer.Exit(2)
            text, _ = api_call(url, token, lambda c: c.task_output(job_id, task, stream))
            sys.stdout.write(text)
            return
        with api_client(url, token) as c:
            try:
                offset = 0
                while True:
                    text, offset = c.output(job_id, stream, run, offset)
                    if text:
                        sys.stdout.write(text)
                        sys.stdout.flush()
                    if not follow:
                        break
                    if c.job(job_id)["state"] in TERMINAL:
                        text, offset = c.output(job_id, stream, run, offset)
                        sys.stdout.write(text)
                        break
                    time.sleep(0.5)
            except ApiError as exc:
                api_fail(exc, token)


def _environment(export: str, env: list[str], bad: Callable[[str], NoReturn]) -> dict[str, str]:
    """The variables a job is sent with: the submitter's that `--export` names (sbatch's
    meaning, `export_environment`), then the `--env KEY=VALUE` options, which win; `bad` (exit
    2) names what is wrong."""
    try:
        out = export_environment(export, os.environ)
    except ValueError as exc:
        bad(f"--export: {exc}")
    out.update(_env_option(env, bad))
    return out


def _env_option(env: list[str], bad: Callable[[str], NoReturn]) -> dict[str, str]:
    """The variables of the `--env KEY=VALUE` options; `bad` (exit 2) names one without `=`."""
    out = {}
    for item in env:
        k, sep, v = item.partition("=")
        if not sep:
            bad(f"--env expects KEY=VALUE, got {item!r}")
        out[k] = v
    return out


def _bag_spec(
    tasks: Path | None,
    sweep: str | None,
    params: list[str],
    retries: int | None,
    env: list[str],
    chdir: str | None,
    name: str | None,
    bad: Callable[[str], NoReturn],
) -> dict[str, Any]:
    """The POST /bags body of `isthmus submit --tasks/--sweep`; `bad` (exit 2) names what is wrong."""
    from isthmus.live.bagspec import BagSpecError, expand_sweep, parse_task_file

    if (tasks is None) == (sweep is None):
        bad("a bag of tasks needs either --tasks FILE or --sweep TEMPLATE (with --param), not both")
    if tasks is not None and params:
        bad("--param goes with --sweep, not with --tasks")
    if retries is not None and not 0 <= retries <= 100:
        bad(f"--retries: expected 0 to 100, got {retries}")
    spec: dict[str, Any] = {"retries": retries or 0, "cwd": os.path.abspath(chdir) if chdir else os.getcwd()}
    try:
        if tasks is not None:
            try:
                text = tasks.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                bad(f"{tasks}: cannot read the task file: {exc}")
            spec["tasks"] = parse_task_file(text, str(tasks))
        else:
            assert sweep is not None
            expand_sweep(sweep, params)  # the errors here, before anything is sent
            spec["sweep"] = {"template": sweep, "params": params}
    except BagSpecError as exc:
        bad(str(exc))
    spec["env"] = _env_option(env, bad)
    if name:
        spec["name"] = name
    return spec
