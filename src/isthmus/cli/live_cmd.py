"""Commands of the live manager: server, agent, submit, jobs, show, cancel, logs, sites, vms, accounting,
forecast, token.

Mount with `register(app)`. Client commands find the manager through --url / ISTHMUS_URL
(default http://127.0.0.1:8750) and authenticate with --token / ISTHMUS_TOKEN /
ISTHMUS_TOKEN_FILE (or the admin token file of --state-dir / ISTHMUS_STATE_DIR).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import typer

from isthmus.live.client import ApiError, Client, default_token
from isthmus.model.states import TERMINAL_NAMES, TaskState

BAG_TASK_STATES = tuple(s.value for s in TaskState)
"""The states of a bag's task (the API's results index)."""

URL_OPT = typer.Option(None, "--url", envvar="ISTHMUS_URL", help="Manager URL (default http://127.0.0.1:8750).")
TOKEN_OPT = typer.Option(None, "--token", help="API token (default: ISTHMUS_TOKEN, ISTHMUS_TOKEN_FILE, admin.token).")
JSON_OPT = typer.Option(False, "--json", help="Print JSON instead of a table.")

_TERMINAL = TERMINAL_NAMES
PRIORITIES = ("super-high", "high", "low", "super-low")


def parse_duration(text: str) -> float:
    """Seconds from '90', '90s', '5m', '2h', '1d', 'MM:SS', 'HH:MM:SS' or 'D-HH:MM:SS'."""
    t = text.strip().lower()
    if not t:
        raise ValueError("empty duration")
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    if t[-1] in units and t[:-1].replace(".", "", 1).isdigit():
        return float(t[:-1]) * units[t[-1]]
    days = 0.0
    if "-" in t:
        d, t = t.split("-", 1)
        days = float(d)
    parts = [float(p) for p in t.split(":")]
    if len(parts) > 3:
        raise ValueError(f"bad duration {text!r}")
    secs = 0.0
    for p in parts:
        secs = secs * 60 + p
    if len(parts) == 3 or days:
        pass
    return days * 86400 + secs


def _fmt_dur(s: float | None) -> str:
    if s is None:
        return "-"
    s = max(0, round(s))
    d, rem = divmod(s, 86400)
    h, rem = divmod(rem, 3600)
    m, sec = divmod(rem, 60)
    core = f"{h:02d}:{m:02d}:{sec:02d}" if h or d else f"{m:d}:{sec:02d}"
    return f"{d}-{core}" if d else core


def _what_if_files(env_spec: str | None, add_site: Path | None) -> tuple[str | None, str | None, str | None]:
    """The what-if environment as text and format (checked here first, so that errors name the
    file and line), and the text of the sites to add; exit 2 on a bad file."""
    from isthmus.config.errors import ConfigError
    from isthmus.config.loader import FILE_SUFFIXES, dump_environment, is_file_spec, load_environment

    if env_spec is not None and add_site is not None:
        typer.echo("error: --env and --add-site: give one of them", err=True)
        raise typer.Exit(2)
    try:
        if env_spec is not None:
            env = load_environment(env_spec)
            if is_file_spec(env_spec):
                path = Path(env_spec)
                return path.read_text(encoding="utf-8"), FILE_SUFFIXES[path.suffix.lower()], None
            return dump_environment(env, "toml"), "toml", None
        if add_site is not None:
            return None, None, add_site.read_text(encoding="utf-8")
    except ConfigError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    except (OSError, UnicodeDecodeError) as exc:
        typer.echo(f"error: {add_site}: cannot read: {exc}", err=True)
        raise typer.Exit(2) from None
    return None, None, None


def _fmt_time(t: float | None) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(t)) if t else "-"


T = TypeVar("T")


def _client(url: str | None, token: str | None) -> Client:
    return Client(url, token or default_token())


def token_source(token: str | None) -> str | None:
    """Where the token a command sends comes from, in words; None when it has none."""
    if token:
        return "--token"
    if os.environ.get("ISTHMUS_TOKEN"):
        return "ISTHMUS_TOKEN"
    path = os.environ.get("ISTHMUS_TOKEN_FILE")
    if path and Path(path).is_file():
        return f"ISTHMUS_TOKEN_FILE ({path})"
    state = os.environ.get("ISTHMUS_STATE_DIR")
    if state and (Path(state) / "admin.token").is_file():
        return f"{Path(state) / 'admin.token'} (ISTHMUS_STATE_DIR)"
    return None


def _fail(exc: ApiError, token: str | None = None) -> NoReturn:
    typer.echo(f"error: {exc}", err=True)
    if exc.status == 401:
        source = token_source(token)
        if source is None:
            typer.echo(
                "hint: no token was sent: set ISTHMUS_TOKEN=<token>, or ISTHMUS_TOKEN_FILE=<file>, or "
                "ISTHMUS_STATE_DIR=<the server's --state-dir> (its admin.token), or pass --token",
                err=True,
            )
        else:
            typer.echo(
                f"hint: the token sent came from {source}; set ISTHMUS_TOKEN (or ISTHMUS_TOKEN_FILE) "
                "to a token of this manager",
                err=True,
            )
    raise typer.Exit(1)


def _call(url: str | None, token: str | None, request: Callable[[Client], T]) -> T:
    """Run one API request; an API error becomes a one-line message and exit code 1."""
    with _client(url, token) as c:
        try:
            return request(c)
        except ApiError as exc:
            _fail(exc, token)


def _parse_when(text: str, option: str) -> float:
    """Unix seconds from `text`: a number, or an ISO 8601 date or date-time (local time unless
    it names its zone)."""
    import datetime as dt

    try:
        return float(text) if text.replace(".", "", 1).isdigit() else dt.datetime.fromisoformat(text).timestamp()
    except ValueError:
        raise typer.BadParameter(
            f"{text!r}: expected Unix seconds or an ISO date/time such as 2026-11-22 or 2026-11-22T08:00",
            param_hint=option,
        ) from None


def _table(headers: list[str], rows: list[list[str]]) -> None:
    widths = [len(h) for h in headers]
    for r in rows:
        for i, c in enumerate(r):
            widths[i] = max(widths[i], len(c))
    typer.echo(
        "  ".join(
            h.rjust(w) if i == 0 else h.ljust(w) for i, (h, w) in enumerate(zip(headers, widths, strict=True))
        ).rstrip()
    )
    for r in rows:
        typer.echo(
            "  ".join(
                c.rjust(w) if i == 0 else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True))
            ).rstrip()
        )


def _elapsed(j: dict[str, Any]) -> float | None:
    if j.get("start_time") is None:
        return None
    end = j.get("end_time") if j["state"] in _TERMINAL else None
    return float((end or time.time()) - j["start_time"])


def _site_status(s: dict[str, Any]) -> str:
    """A site's STATUS cell: up or why not, its batch system and its pilots by state."""
    out = f"unavailable: {s['unavailable']}" if s.get("unavailable") else "up"
    lrm = s.get("lrm")
    if lrm:
        out += f"; {lrm['driver']} {lrm['mode']}"
        if lrm.get("keep_free"):
            out += f"; {lrm['keep_free']} kept free"
        if lrm.get("waiting_local"):
            out += f"; local jobs wait for {lrm['waiting_local']}"
    if s.get("pilots"):
        out += "; pilots " + ", ".join(f"{n} {state}" for state, n in sorted(s["pilots"].items()))
    return out


def register(app: typer.Typer) -> None:
    """Add the live commands to `app`."""

    @app.command("server")
    def server(
        env: str = typer.Option("local", "--env", help="Environment: bundled name or file."),
        db: str | None = typer.Option(None, "--db", help="Database URL (default: SQLite file in the state dir)."),
        listen: str = typer.Option("127.0.0.1:8750", "--listen", help="HOST:PORT of the API."),
        state_dir: Path = typer.Option(
            Path(os.environ.get("ISTHMUS_STATE_DIR", "isthmus-state")),  # noqa: B008
            "--state-dir",
            help="Directory for the SQLite file, job output, pilot logs and admin.token.",
        ),
        round_interval: str | None = typer.Option(
            None, "--round-interval", help="Seconds between rounds, or 'event'; default: the environment's."
        ),
        advertise_url: str | None = typer.Option(
            None,
            "--advertise-url",
            help="URL pilots on other machines (pilot jobs of a batch system) reach the API at; default "
            "http://HOST:PORT of --listen, with this machine's name for 0.0.0.0.",
        ),
        pilot_timeout: float = typer.Option(30.0, help="Pilots exit after the manager is unreachable this long."),
        heartbeat_timeout: float = typer.Option(20.0, help="A silent pilot is declared lost after this long."),
        reattach_timeout: float = typer.Option(15.0, help="After a restart, pilots must re-register within this."),
        poll_wait: float = typer.Option(10.0, help="Long-poll duration of pilots (their heartbeat period)."),
        budget: float | None = typer.Option(
            None, "--budget", min=0.0, help="Cap on the charged cost of cloud leases ($), as in `simulate --budget`."
        ),
        tag: str | None = typer.Option(None, "--tag", envvar="ISTHMUS_TAG", hidden=True),
        log_level: str = typer.Option("warning", "--log-level"),
        max_body_bytes: int = typer.Option(
            8 * 1024 * 1024, "--max-body-bytes", help="Larger request bodies get 413 (default 8 MiB)."
        ),
        max_batch_jobs: int = typer.Option(
            10_000, "--max-batch-jobs", help="Larger POST /jobs/batch requests get 413."
        ),
        on_stop: str = typer.Option(
            "detach",
            "--on-stop",
            help="What SIGTERM/SIGINT do to running jobs: detach (they go on; re-attached at the next "
            "start) or kill (requeued at the next start). 'isthmus stop --drain' finishes them first.",
        ),
        kill_at_walltime: bool = typer.Option(
            True,
            "--kill-at-walltime/--no-kill-at-walltime",
            help="Kill a run that reaches its job's requested runtime (TIMEOUT), as batch systems do; with "
            "--no-kill-at-walltime the requested runtime is only an estimate for policies, as in `simulate`.",
        ),
        preemption_time: float = typer.Option(
            10.0,
            "--preemption-time",
            help="Bags of tasks: seconds from a shrink until the processor is free at the latest (a launcher "
            "that confirms sooner frees it sooner).",
        ),
        bag_prefetch: int = typer.Option(
            1, "--bag-prefetch", help="Bags of tasks: tasks each launcher keeps ahead of the one it runs."
        ),
    ) -> None:
        """Run the manager: the engine on the wall clock, the REST API, pilots for local sites."""
        from isthmus.server.main import load_env, serve

        try:
            environment = load_env(env)
        except Exception as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None
        ri: float | str | None = "env"
        if round_interval is not None:
            ri = None if round_interval.strip().lower() in ("event", "none", "0") else float(round_interval)
        try:
            serve(
                environment,
                state_dir=state_dir,
                db_url=db,
                listen=listen,
                advertise_url=advertise_url,
                round_interval=ri,
                pilot_timeout=pilot_timeout,
                heartbeat_timeout=heartbeat_timeout,
                reattach_timeout=reattach_timeout,
                poll_wait=poll_wait,
                budget=budget,
                tag=tag,
                log_level=log_level,
                max_body_bytes=max_body_bytes,
                max_batch_jobs=max_batch_jobs,
                on_stop=on_stop,
                enforce_walltime=kill_at_walltime,
                preemption_time=preemption_time,
                bag_prefetch=bag_prefetch,
            )
        except ValueError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None

    @app.command("stop")
    def stop(
        drain: bool = typer.Option(False, "--drain", help="Start nothing new; stop once running jobs have ended."),
        kill_jobs: bool = typer.Option(False, "--kill-jobs", help="Kill running jobs (requeued at the next start)."),
        url: str | None = URL_OPT,
        token: str | None = TOKEN_OPT,
    ) -> None:
        """Stop the manager (admin). By default running jobs go on and are re-attached at the next
        start; queued jobs stay queued."""
        if drain and kill_jobs:
            raise typer.BadParameter("choose one of --drain and --kill-jobs")
        mode = "drain" if drain else "kill" if kill_jobs else "detach"
        res = _call(url, token, lambda c: c.stop(mode))
        if mode == "drain":
            tasks = f" and {res['tasks']} bag task(s)" if res.get("tasks") else ""
            typer.echo(f"draining: {res['running']} running job(s){tasks} to finish; nothing new starts")
        else:
            typer.echo(f"stopping ({mode}): {res['running']} running job(s) {'killed' if mode == 'kill' else 'go on'}")

    @app.command("agent", context_settings={"allow_extra_args": False})
    def agent(
        url: str = typer.Option(..., "--url", envvar="ISTHMUS_URL", help="Manager URL."),
        node: str = typer.Option(..., "--node", help="Node key this pilot serves (given by the manager)."),
        slots: int = typer.Option(1, "--slots"),
        timeout: float = typer.Option(30.0, "--timeout", help="Exit when the manager is unreachable this long."),
        lifetime: float | None = typer.Option(None, "--lifetime", help="Exit after this many seconds."),
        token_file: Path | None = typer.Option(
            None, "--token-file", help="Pilot token file (else ISTHMUS_PILOT_TOKEN)."
        ),
    ) -> None:
        """Run a pilot: register with the manager, run the tasks it sends, report them."""
        from isthmus.agent.pilot import main

        argv = ["--url", url, "--node", node, "--slots", str(slots), "--timeout", str(timeout)]
        if lifetime is not None:
            argv += ["--lifetime", str(lifetime)]
        if token_file is not None:
            argv += ["--token-file", str(token_file)]
        raise typer.Exit(main(argv))

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
            None, "--retries", help="Bag of tasks: runs again of a task that exits non-zero (default 0)."
        ),
        size: int | None = typer.Option(None, "-n", "--size", help="Processors (slots) on one site (default 1)."),
        time_: str | None = typer.Option(None, "-t", "--time", help="Requested runtime: 90, 5m, 10:00, 1:30:00."),
        priority: str | None = typer.Option(
            None, "-p", "--priority", help="super-high, high, low or super-low (default high)."
        ),
        output: str | None = typer.Option(
            None, "-o", "--output", help="File for stdout (%j: job id, %%: %); relative to the working directory."
        ),
        error: str | None = typer.Option(
            None, "-e", "--error", help="File for stderr (default: the --output file, else the spool)."
        ),
        env: list[str] = typer.Option([], "--env", help="KEY=VALUE, repeatable."),
        chdir: str | None = typer.Option(None, "-D", "--chdir", help="Working directory (default: current)."),
        name: str | None = typer.Option(None, "-J", "--name", help="Job name."),
        vm_type: str | None = typer.Option(None, "--vm-type", help="Instance type the job needs."),
        vm_image: str | None = typer.Option(None, "--vm-image", help="Image the VM must boot (name or provider id)."),
        vm_cores: int | None = typer.Option(None, "--vm-cores", help="Cores per VM, at least."),
        vm_memory: int | None = typer.Option(None, "--vm-memory", help="Memory per VM in MB, at least."),
        vm_arch: str | None = typer.Option(None, "--vm-arch", help="CPU architecture, e.g. x86_64."),
        vm_storage: float | None = typer.Option(None, "--vm-storage", help="Disk per VM in GB, at least."),
        vm_network: str | None = typer.Option(None, "--vm-network", help="Network the VM joins, e.g. public."),
        url: str | None = URL_OPT,
        token: str | None = TOKEN_OPT,
        as_json: bool = JSON_OPT,
    ) -> None:
        """Submit a job; prints its id (like sbatch).

        A script file (first line '#!', or a name ending in .sh) is copied at submission, so
        later edits do not change the job; '#ISTHMUS --size 4' lines at its top set options
        (--size, --time, --name, --output, --error, --priority, --chdir, and the VM requirements
        --vm-type, --vm-image, --vm-arch, --vm-cores, --vm-memory, --vm-storage, --vm-network),
        and options given here override them. A job no site can ever match is refused with the
        reason (docs/clouds.md).
        """
        from isthmus.live import jobfiles

        def bad(message: str) -> NoReturn:
            typer.echo(f"error: {message}", err=True)
            raise typer.Exit(2)

        if tasks is not None or sweep is not None or param or retries is not None:
            rigid_only = {
                "--size": size, "--time": time_, "--priority": priority, "--output": output, "--error": error,
                "--vm-type": vm_type, "--vm-image": vm_image, "--vm-cores": vm_cores, "--vm-memory": vm_memory,
                "--vm-arch": vm_arch, "--vm-storage": vm_storage, "--vm-network": vm_network,
            }  # fmt: skip
            not_bag = [k for k, v in rigid_only.items() if v is not None]
            if command:
                bad(f"a bag of tasks takes its commands from --tasks or --sweep, not from {' '.join(command)!r}")
            if not_bag:
                bad(f"{', '.join(not_bag)}: not for a bag of tasks (each task runs on one processor, at low priority)")
            bag = _bag_spec(tasks, sweep, param, retries, env, chdir, name, bad)
            job_id = _call(url, token, lambda c: c.submit_bag(**bag))
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
                    script, program, jobfiles.directive_options(parse_duration, PRIORITIES)
                )
            except jobfiles.ScriptError as exc:
                bad(str(exc))
            program = os.path.abspath(program)
        given = {"size": size, "name": name, "output": output, "error": error, "priority": priority, "chdir": chdir}
        for key, value in given.items():
            if value is not None:
                options[key] = value
        if time_ is not None:
            try:
                options["time"] = parse_duration(time_)
            except ValueError as exc:
                bad(f"--time: {exc}")
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
        if "time" in options:
            spec["requested_runtime"] = options["time"]
        for key in ("output", "error"):
            if options.get(key):
                try:
                    jobfiles.check_template(options[key])
                except jobfiles.OutputTemplateError as exc:
                    bad(f"--{key}: {exc}")
                # relative to the job's working directory, as sbatch does
                spec[key] = os.path.join(workdir, os.path.expanduser(options[key]))
        envd = {}
        for item in env:
            k, sep, v = item.partition("=")
            if not sep:
                bad(f"--env expects KEY=VALUE, got {item!r}")
            envd[k] = v
        spec["env"] = envd
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
        job_id = _call(url, token, lambda c: c.submit(**spec))
        if as_json:
            typer.echo(json.dumps({"id": job_id}))
        else:
            typer.echo(f"Submitted job {job_id}")

    @app.command("bags")
    def bags_cmd(
        all_: bool = typer.Option(False, "-a", "--all", help="Include finished bags."),
        url: str | None = URL_OPT,
        token: str | None = TOKEN_OPT,
        as_json: bool = JSON_OPT,
    ) -> None:
        """Bags of tasks with their progress (docs/bags.md)."""
        rows = _call(url, token, lambda c: c.bags(all_=all_))
        if as_json:
            typer.echo(json.dumps(rows, indent=1))
            return
        table = []
        for b in rows:
            p = b["progress"]
            rate = f"{p['throughput']:.3g}/s" if p["throughput"] is not None else "-"
            table.append(
                [
                    str(b["id"]),
                    b["user"],
                    b["name"][:20],
                    b["state"].upper(),
                    str(p["tasks"]),
                    str(p["done"]),
                    str(p["running"]),
                    str(p["failed"]),
                    str(p["queued"]),
                    rate,
                    ",".join(f"{s}:{n}" for s, n in p["held"].items()) or "-",
                ]
            )
        _table(["BAGID", "USER", "NAME", "STATE", "TASKS", "DONE", "RUN", "FAIL", "QUEUED", "RATE", "HELD"], table)

    @app.command("results")
    def results(
        bag_id: int = typer.Argument(..., help="The bag's job id."),
        state: list[str] = typer.Option([], "--state", "-s", help="Only tasks in these states (done, failed, ...)."),
        url: str | None = URL_OPT,
        token: str | None = TOKEN_OPT,
        as_json: bool = JSON_OPT,
    ) -> None:
        """A bag's results index: each task's command line, exit code and output file (§3.5.4)."""
        bad_state = [s for s in state if s not in BAG_TASK_STATES]
        if bad_state:
            typer.echo(f"error: --state {bad_state[0]!r}: expected one of {', '.join(BAG_TASK_STATES)}", err=True)
            raise typer.Exit(2)
        rows = _call(url, token, lambda c: c.results(bag_id, state or None))
        if as_json:
            typer.echo(json.dumps(rows, indent=1))
            return
        table = [
            [
                str(r["task"]),
                r["state"].upper(),
                "-" if r["exit_code"] is None else str(r["exit_code"]),
                str(r["attempts"]),
                _fmt_dur(r["runtime"]),
                r["output"],
                r["command"][:60],
            ]
            for r in rows
        ]
        _table(["TASK", "STATE", "EXIT", "RUNS", "TIME", "OUTPUT", "COMMAND"], table)

    @app.command("jobs")
    def jobs(
        all_: bool = typer.Option(False, "-a", "--all", help="Include finished jobs (like sacct)."),
        state: list[str] = typer.Option([], "--state", "-s", help="Only jobs in these states."),
        user: str | None = typer.Option(None, "--user", "-u", help="Admin: only this user's jobs."),
        url: str | None = URL_OPT,
        token: str | None = TOKEN_OPT,
        as_json: bool = JSON_OPT,
    ) -> None:
        """List jobs (like squeue; with --all like sacct)."""
        rows = _call(url, token, lambda c: c.jobs(all_=all_, states=state or None, user=user))
        if as_json:
            typer.echo(json.dumps(rows, indent=1))
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
                    _fmt_dur(_elapsed(j)),
                    str(j["restarts"]),
                    "-" if j["exit_code"] is None else str(j["exit_code"]),
                ]
            )
        _table(["JOBID", "USER", "NAME", "STATE", "SIZE", "PRIO", "SITE", "TIME", "RESTARTS", "EXIT"], table)

    @app.command("show")
    def show(
        job_id: int = typer.Argument(...),
        url: str | None = URL_OPT,
        token: str | None = TOKEN_OPT,
        as_json: bool = JSON_OPT,
    ) -> None:
        """One job in detail with its state history (like scontrol show job / sacct)."""
        j = _call(url, token, lambda c: c.job(job_id))
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
            ("RequestedTime", _fmt_dur(j["requested_runtime"])),
            ("Site", j["site"] or "-"),
            ("Slots", ",".join(f"{k}:{s}" for k, s in j["slots"]) or "-"),
            ("Run", str(j["run"])),
            ("Restarts", str(j["restarts"])),
            ("ExitCode", "-" if j["exit_code"] is None else str(j["exit_code"])),
            ("SubmitTime", _fmt_time(j["submit_time"])),
            ("StartTime", _fmt_time(j["start_time"])),
            ("EndTime", _fmt_time(j["end_time"] if j["state"] in _TERMINAL else None)),
            ("Runtime", _fmt_dur(j["runtime"])),
            ("WorkDir", spec.get("cwd") or "-"),
        ]
        if spec.get("script") is not None:
            lines.append(("Script", f"{spec.get('command')} (copied at submission)"))
        if spec.get("output") or spec.get("error"):
            lines.append(("StdOut", spec.get("output") or "- (spool)"))
            lines.append(("StdErr", spec.get("error") or spec.get("output") or "- (spool)"))
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
                f"  {_fmt_time(h['time'])}.{int((h['time'] % 1) * 1000):03d}  run {h['run']}  "
                f"{h['state'].upper():<10} {h['detail']}"
            )

    @app.command("cancel")
    def cancel(
        job_ids: list[int] = typer.Argument(...),
        url: str | None = URL_OPT,
        token: str | None = TOKEN_OPT,
    ) -> None:
        """Cancel jobs (like scancel)."""
        failed = False
        with _client(url, token) as c:
            for jid in job_ids:
                try:
                    c.cancel(jid)
                    typer.echo(f"Cancelled job {jid}")
                except ApiError as exc:
                    typer.echo(f"error: job {jid}: {exc}", err=True)
                    failed = True
        if failed:
            raise typer.Exit(1)

    @app.command("logs")
    def logs(
        job_id: int = typer.Argument(...),
        stderr: bool = typer.Option(False, "--stderr", help="Show stderr instead of stdout."),
        run: int | None = typer.Option(None, "--run", help="Run number (default: the latest)."),
        task: int | None = typer.Option(None, "--task", min=0, help="A bag of tasks: this task's output."),
        follow: bool = typer.Option(False, "-f", "--follow", help="Keep printing until the job ends."),
        url: str | None = URL_OPT,
        token: str | None = TOKEN_OPT,
    ) -> None:
        """Print a job's output (a bag's task's with --task), while it runs or after."""
        stream = "stderr" if stderr else "stdout"
        if task is not None:
            if run is not None or follow:
                typer.echo("error: --task shows a task's last run: --run and --follow are for jobs", err=True)
                raise typer.Exit(2)
            text, _ = _call(url, token, lambda c: c.task_output(job_id, task, stream))
            sys.stdout.write(text)
            return
        with _client(url, token) as c:
            try:
                offset = 0
                while True:
                    text, offset = c.output(job_id, stream, run, offset)
                    if text:
                        sys.stdout.write(text)
                        sys.stdout.flush()
                    if not follow:
                        break
                    if c.job(job_id)["state"] in _TERMINAL:
                        text, offset = c.output(job_id, stream, run, offset)
                        sys.stdout.write(text)
                        break
                    time.sleep(0.5)
            except ApiError as exc:
                _fail(exc, token)

    @app.command("sites")
    def sites(url: str | None = URL_OPT, token: str | None = TOKEN_OPT, as_json: bool = JSON_OPT) -> None:
        """Sites and their capacity now (like sinfo)."""
        rows = _call(url, token, lambda c: c.sites())
        if as_json:
            typer.echo(json.dumps(rows, indent=1))
            return
        table = []
        for s in rows:
            vms = f"{s['leased']}/{s['max_vms']} ({s['booting']} booting)" if s["kind"] == "cloud" else "-"
            table.append(
                [
                    str(s["index"]),
                    s["name"],
                    s["kind"],
                    str(s["online"]),
                    str(s["free"]),
                    str(s["running"]),
                    str(s["max_processors"]),
                    vms,
                    _site_status(s),
                ]
            )
        _table(["#", "SITE", "KIND", "ONLINE", "FREE", "JOBS", "MAXPROC", "VMS", "STATUS"], table)

    @app.command("peers")
    def peers(url: str | None = URL_OPT, token: str | None = TOKEN_OPT, as_json: bool = JSON_OPT) -> None:
        """Peer managers (docs/federation.md): role, up or down, last heard, their latest
        resource data (idle processors, capacity, queued jobs)."""
        rows = _call(url, token, lambda c: c.peers())
        if as_json:
            typer.echo(json.dumps(rows, indent=1))
            return
        table = []
        for p in rows:
            data = p.get("resources")
            if data:
                idle = sum(s["idle"] for s in data["sites"] if s["available"])
                procs = sum(s["processors"] for s in data["sites"])
                res = f"{idle}/{procs} idle, {data['queued_jobs']} queued"
            else:
                res = "-"
            heard = "-" if p["last_heard"] is None else f"{max(0.0, time.time() - p['last_heard']):.1f}s ago"
            table.append(
                [
                    p["name"],
                    p["role"],
                    "up" if p["up"] else "down",
                    heard,
                    f"{p['distance'] * 1000:.1f}ms",
                    str(p["forwarded_open"]),
                    str(p["received_active"]),
                    res,
                    p["address"] + (f" ({p['error']})" if p["error"] and not p["up"] else ""),
                ]
            )
        _table(["PEER", "ROLE", "STATE", "HEARD", "DISTANCE", "SENT", "RECEIVED", "RESOURCES", "ADDRESS"], table)

    @app.command("vms")
    def vms(
        all_: bool = typer.Option(False, "-a", "--all", help="Include released VMs."),
        url: str | None = URL_OPT,
        token: str | None = TOKEN_OPT,
        as_json: bool = JSON_OPT,
    ) -> None:
        """VM leases: instance type, the user each serves (vm-share: the user it was leased for;
        otherwise the users of the jobs running on it), lease time and charged cost."""
        rows = _call(url, token, lambda c: c.vms(all_))
        if as_json:
            typer.echo(json.dumps(rows, indent=1))
            return
        table = [
            [
                str(v["vm"]),
                v["site_name"],
                v["state"].upper() + (" (RETIRING)" if v.get("retiring") else ""),
                v.get("type_name") or "-",
                str(v["cores"]),
                v.get("user") or "-",
                _fmt_time(v["leased_at"]),
                _fmt_dur(v["lease_seconds"]),
                f"{v['charged_cost']:.4f}",
            ]
            for v in rows
        ]
        _table(["VM", "SITE", "STATE", "TYPE", "CORES", "USER", "LEASED", "LEASE", "CHARGED"], table)

    @app.command("budget")
    def budget(
        name: str | None = typer.Argument(None, help="A budget to change (admin), with LIMIT."),
        limit: float | None = typer.Argument(None, min=0.0, help="Its new limit in dollars."),
        url: str | None = URL_OPT,
        token: str | None = TOKEN_OPT,
        as_json: bool = JSON_OPT,
    ) -> None:
        """Budget caps: what each covers (sites, users), its limit, and in its current period
        spent (charged increments), committed (reserved for running jobs by finish caps) and
        left, with the VMs it refused or released; `isthmus budget NAME LIMIT` changes a limit."""
        if (name is None) != (limit is None):
            raise typer.BadParameter("give both NAME and LIMIT to change a budget, or neither to list them")
        if name is not None and limit is not None:
            _call(url, token, lambda c: c.set_budget(name, limit))
        rows = _call(url, token, lambda c: c.budgets())
        if as_json:
            typer.echo(json.dumps(rows, indent=1))
            return
        table = [
            [r["name"], ",".join(r["sites"]), ",".join(r.get("users", [])) or "all", r["current"] or "total",
             r.get("on_limit", "requeue"), f"{r['limit']:.2f}", f"{r['spent']:.4f}", f"{r.get('committed', 0.0):.4f}",
             f"{r['left']:.4f}", str(r.get("refused_leases", 0) + r.get("released_vms", 0))]
            for r in rows
        ]  # fmt: skip
        _table(
            ["BUDGET", "SITES", "USERS", "PERIOD", "ON-LIMIT", "LIMIT", "SPENT", "COMMITTED", "LEFT", "REFUSED"], table
        )

    @app.command("accounting")
    def accounting(
        by: str = typer.Option("user", "--by", help="Group by user, site or policy."),
        since: str = typer.Option("0", "--since", help="Window start: ISO date/time (local) or Unix seconds."),
        until: str | None = typer.Option(None, "--until", help="Window end (default now), as --since."),
        url: str | None = URL_OPT,
        token: str | None = TOKEN_OPT,
        as_json: bool = JSON_OPT,
        as_csv: bool = typer.Option(False, "--csv", help="Print CSV instead of a table."),
    ) -> None:
        """Jobs, processor-hours, VM-hours, charged cost, wait and slowdown per user, site or policy
        for the jobs that ended (and VMs released) in the window; users see their own jobs."""
        if by not in ("user", "site", "policy"):
            raise typer.BadParameter(f"{by!r}: expected user, site or policy", param_hint="--by")
        start = _parse_when(since, "--since")
        end = _parse_when(until, "--until") if until is not None else None
        rows = _call(url, token, lambda c: c.accounting(by, start, end))
        columns = [
            "key",
            "jobs",
            "completed",
            "processor_hours",
            "vm_hours",
            "charged_cost",
            "mean_wait",
            "mean_bounded_slowdown",
        ]
        if as_json:
            typer.echo(json.dumps(rows, indent=1))
            return
        if as_csv:
            import csv

            w = csv.DictWriter(sys.stdout, fieldnames=columns, lineterminator="\n")
            w.writeheader()
            w.writerows({k: ("" if r[k] is None else r[k]) for k in columns} for r in rows)
            return

        def num(x: float | None, fmt: str) -> str:
            return "-" if x is None else format(x, fmt)

        table = [
            [
                r["key"],
                str(r["jobs"]),
                str(r["completed"]),
                num(r["processor_hours"], ".3f"),
                num(r["vm_hours"], ".3f"),
                num(r["charged_cost"], ".4f"),
                num(r["mean_wait"], ".1f"),
                num(r["mean_bounded_slowdown"], ".2f"),
            ]
            for r in rows
        ]
        _table([by.upper(), "JOBS", "DONE", "PROC-H", "VM-H", "CHARGED", "WAIT(S)", "BSLD"], table)

    @app.command("forecast")
    def forecast(
        allocation: str | None = typer.Option(None, "--allocation", help="What if this allocation policy ran."),
        provisioning: str | None = typer.Option(None, "--provisioning", help="What if this provisioning policy ran."),
        budget: float | None = typer.Option(None, "--budget", help="What if the budget cap were this ($)."),
        no_budget: bool = typer.Option(False, "--no-budget", help="What if there were no budget cap."),
        horizon: float = typer.Option(7 * 86400.0, "--horizon", help="Seconds to simulate ahead at most."),
        env_spec: str | None = typer.Option(
            None, "--env", help="What if the manager ran this environment (file or bundled name; its policies)."
        ),
        add_site: Path | None = typer.Option(
            None, "--add-site", help="What if the sites of this TOML file ([[sites]] tables) were added."
        ),
        url: str | None = URL_OPT,
        token: str | None = TOKEN_OPT,
        as_json: bool = JSON_OPT,
    ) -> None:
        """When each queued job is expected to start and end, from a simulation of the live state
        with the live policies (like `squeue --start`); with --allocation, --provisioning,
        --budget, --no-budget, --env or --add-site, the same next to what would happen if that
        changed."""
        environment, env_format, sites_text = _what_if_files(env_spec, add_site)
        what_if = {
            "allocation": allocation,
            "provisioning": provisioning,
            "budget": budget,
            "no_budget": no_budget or None,
            "environment": environment,
            "environment_format": env_format,
            "add_sites": sites_text,
        }
        asked = any(v is not None for v in what_if.values())

        def both(c: Client) -> tuple[dict[str, Any], dict[str, Any] | None]:
            live = c.forecast(horizon=horizon)
            return live, (c.forecast(horizon=horizon, **what_if) if asked else None)

        live, other = _call(url, token, both)
        if as_json:
            typer.echo(json.dumps({"live": live, "what_if": other} if asked else live, indent=1))
            return
        alt = {j["job"]: j for j in other["jobs"]} if other else {}

        def when(t: float | None) -> str:
            return _fmt_time(t) if t is not None else "beyond horizon"

        rows = []
        for j in live["jobs"]:
            row = [str(j["job"]), j["user"], str(j["size"]), j["state"].upper(), when(j["start"]), when(j["end"])]
            if other:
                k = alt.get(j["job"], {})
                row += [when(k.get("start")), when(k.get("end"))]
            rows.append([*row, j["site"] or "-", j["runtime_basis"]])
        head = ["JOB", "USER", "SIZE", "STATE", "START", "END"]
        if other:
            head += ["START(WHAT-IF)", "END(WHAT-IF)"]
        _table([*head, "SITE", "RUNTIME FROM"], rows)
        label = f"{live['allocation']} + {live['provisioning']}"
        spend = f"${live['spend']:.4f}"
        typer.echo(f"expected spend from now: {spend} ({label}); unfinished at horizon: {live['unfinished']}")
        if other:
            what = f"{other['allocation']} + {other['provisioning']}, budget {other['budget']}"
            typer.echo(f"what if ({what}): ${other['spend']:.4f}; unfinished at horizon: {other['unfinished']}")

    token_app = typer.Typer(help="Manage API tokens (admin).", no_args_is_help=True)

    @token_app.command("create")
    def token_create(
        user: str = typer.Argument(..., help="User name (created if missing)."),
        admin: bool = typer.Option(False, "--admin", help="Make a new user an admin."),
        expires_in: str | None = typer.Option(
            None, "--expires-in", help="Refuse the token after this long (90m, 12h, 30d, D-HH:MM:SS); default never."
        ),
        url: str | None = URL_OPT,
        token: str | None = TOKEN_OPT,
        as_json: bool = JSON_OPT,
    ) -> None:
        """Create a token for USER; prints it (it is shown only once)."""
        seconds = None
        if expires_in is not None:
            try:
                seconds = parse_duration(expires_in)
            except ValueError as exc:
                raise typer.BadParameter(f"{exc}; expected e.g. 90m, 12h, 30d", param_hint="--expires-in") from None
            if seconds <= 0:
                raise typer.BadParameter("must be a positive duration", param_hint="--expires-in")
        res = _call(url, token, lambda c: c.create_token(user, admin, seconds))
        typer.echo(json.dumps(res) if as_json else res["token"])

    @token_app.command("list")
    def token_list(url: str | None = URL_OPT, token: str | None = TOKEN_OPT, as_json: bool = JSON_OPT) -> None:
        """Every user token by id (the tokens themselves are not kept), with its user and expiry."""
        rows = _call(url, token, lambda c: c.tokens())
        if as_json:
            typer.echo(json.dumps(rows))
            return

        def when(t: float | None) -> str:
            return "never" if t is None else time.strftime("%Y-%m-%d %H:%M", time.localtime(t))

        _table(
            ["ID", "USER", "CREATED", "EXPIRES"],
            [[r["id"], r["user"], when(r["created"]), when(r["expires"])] for r in rows],
        )

    @token_app.command("revoke")
    def token_revoke(
        token_id: str = typer.Argument(..., help="The token's id from 'isthmus token list' (at least 4 digits)."),
        url: str | None = URL_OPT,
        token: str | None = TOKEN_OPT,
    ) -> None:
        """Revoke a user token: it is refused from the next request on."""
        _call(url, token, lambda c: c.revoke_token(token_id))
        typer.echo(f"revoked {token_id}")

    app.add_typer(token_app, name="token")


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
    envd = {}
    for item in env:
        k, sep, v = item.partition("=")
        if not sep:
            bad(f"--env expects KEY=VALUE, got {item!r}")
        envd[k] = v
    spec["env"] = envd
    if name:
        spec["name"] = name
    return spec
