"""`isthmus server` (run the manager) and `isthmus stop` (stop it)."""

from __future__ import annotations

import os
from pathlib import Path

import typer

from isthmus.cli import bounds
from isthmus.cli.live.common import CA_OPT, TOKEN_OPT, URL_OPT, api_call


def register(app: typer.Typer) -> None:
    """Add the `server` and `stop` commands to `app`."""

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
            None,
            "--round-interval",
            help="Seconds between rounds, or 'event'; default: the environment's.",
            callback=bounds.round_interval,
        ),
        advertise_url: str | None = typer.Option(
            None,
            "--advertise-url",
            help="URL pilots on other machines (pilot jobs of a batch system) reach the API at; default "
            "http://HOST:PORT of --listen, with this machine's name for 0.0.0.0.",
        ),
        pilot_timeout: float = typer.Option(
            30.0, help="Pilots exit after the manager is unreachable this long.", callback=bounds.positive
        ),
        heartbeat_timeout: float = typer.Option(
            20.0, help="A silent pilot is declared lost after this long.", callback=bounds.positive
        ),
        reattach_timeout: float = typer.Option(
            15.0, help="After a restart, pilots must re-register within this.", callback=bounds.positive
        ),
        poll_wait: float = typer.Option(
            10.0, help="Long-poll duration of pilots (their heartbeat period).", callback=bounds.positive
        ),
        budget: float | None = typer.Option(
            None, "--budget", min=0.0, help="Cap on the charged cost of cloud leases ($), as in `simulate --budget`."
        ),
        tag: str | None = typer.Option(None, "--tag", envvar="ISTHMUS_TAG", hidden=True),
        log_level: str = typer.Option("warning", "--log-level"),
        max_body_bytes: int = typer.Option(
            8 * 1024 * 1024, "--max-body-bytes", help="Larger request bodies get 413 (default 8 MiB).", min=1024
        ),
        max_batch_jobs: int = typer.Option(
            10_000, "--max-batch-jobs", help="Larger POST /jobs/batch requests get 413.", min=1
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
            min=0,
            max=3600,
        ),
        bag_prefetch: int = typer.Option(
            1,
            "--bag-prefetch",
            help="Bags of tasks: tasks each launcher keeps ahead of the one it runs.",
            min=0,
            max=100,
        ),
        max_lost_runs: int = typer.Option(
            3,
            "--max-lost-runs",
            help="A job whose runs are lost this many times (their pilot died under them) fails with the "
            "reason instead of being requeued again.",
            min=1,
        ),
        tls_cert: Path | None = typer.Option(
            None,
            "--tls-cert",
            envvar="ISTHMUS_TLS_CERT",
            help="Serve HTTPS with this certificate (PEM; with --tls-key).",
        ),
        tls_key: Path | None = typer.Option(
            None, "--tls-key", envvar="ISTHMUS_TLS_KEY", help="The private key of --tls-cert (PEM)."
        ),
        tls_ca: Path | None = typer.Option(
            None,
            "--tls-ca",
            envvar="ISTHMUS_TLS_CA",
            help="CA file pilots verify the manager against; default: the certificate itself when it is "
            "self-signed, else the system's trusted CAs.",
        ),
        self_signed: bool = typer.Option(
            False,
            "--self-signed",
            help="Serve HTTPS with a self-signed certificate for this machine (made in STATE_DIR/tls at the "
            "first start, reused after); clients need its cert.pem as --ca-file.",
        ),
        insecure_http: bool = typer.Option(
            False,
            "--insecure-http",
            help="Allow plain HTTP outside loopback (--listen or --advertise-url): tokens cross the network in clear.",
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
                max_lost_runs=max_lost_runs,
                tls_cert=tls_cert,
                tls_key=tls_key,
                tls_ca=tls_ca,
                self_signed=self_signed,
                insecure_http=insecure_http,
            )
        except ValueError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None

    @app.command("stop")
    def stop(
        drain: bool = typer.Option(False, "--drain", help="Start nothing new; stop once running jobs have ended."),
        kill_jobs: bool = typer.Option(False, "--kill-jobs", help="Kill running jobs (requeued at the next start)."),
        release: bool = typer.Option(
            False,
            "--release",
            help="Terminate every VM this manager leased once its running jobs have ended (--drain) or were "
            "killed (otherwise: running jobs on VMs cannot go on), and wait until the provider confirms.",
        ),
        url: str | None = URL_OPT,
        _ca: str | None = CA_OPT,
        token: str | None = TOKEN_OPT,
    ) -> None:
        """Stop the manager (admin). By default running jobs go on and are re-attached at the next
        start; queued jobs stay queued. What is left running: by default the pilots of running
        jobs, each until its runs end (then it waits --pilot-timeout for a manager) or an hour
        without a manager, so that the next start finds the jobs; idle pilots exit at once. With
        --kill-jobs, and at the end of --drain, every pilot exits. A manager killed outright
        (SIGKILL, a crash) tells no pilot: each exits after --pilot-timeout without it, killing
        its runs. With --release (or a cloud site's release_on_stop) nothing leased outlives the
        stop: every VM is terminated once its runs have ended (--drain) or been killed."""
        if drain and kill_jobs:
            raise typer.BadParameter("choose one of --drain and --kill-jobs")
        mode = "drain" if drain else "kill" if kill_jobs else "detach"
        res = api_call(url, token, lambda c: c.stop(mode, release=release))
        if mode == "drain":
            tasks = f" and {res['tasks']} bag task(s)" if res.get("tasks") else ""
            typer.echo(f"draining: {res['running']} running job(s){tasks} to finish; nothing new starts")
        else:
            done = res["mode"]  # a releasing stop kills runs it would have detached
            typer.echo(f"stopping ({done}): {res['running']} running job(s) {'killed' if done == 'kill' else 'go on'}")
        if release:
            typer.echo("every VM this manager leased is terminated at the end of the stop")
