"""Run the manager daemon: load the environment, open the database, serve the API with uvicorn."""

from __future__ import annotations

import asyncio
import errno
import faulthandler
import json
import os
import shutil
import socket
import sys
import urllib.parse
from pathlib import Path

import uvicorn

from isthmus.live.manager import Manager, ManagerConfig
from isthmus.model.environment import Environment
from isthmus.server.app import create_app
from isthmus.store.sqlite_files import sqlite_file, start_problems
from isthmus.store.tables import Store, normalize_url, sqlite_url
from isthmus.tls import (
    CERT_NAME,
    KEY_NAME,
    check_ca_verifies,
    check_plain_http,
    check_server_pair,
    client_context,
    is_loopback,
    is_self_signed,
    machine_names,
    make_self_signed,
)


class _Server(uvicorn.Server):
    """uvicorn server that tells the manager at once when a stop signal arrives (wakes long polls)."""

    def __init__(self, config: uvicorn.Config, manager: Manager) -> None:
        super().__init__(config)
        self.manager = manager

    def handle_exit(self, sig: int, frame: object) -> None:
        self.manager.begin_shutdown()
        super().handle_exit(sig, frame)  # type: ignore[arg-type]


def parse_listen(listen: str) -> tuple[str, int]:
    """'HOST:PORT' (or ':PORT', or 'PORT') into (host, port); host defaults to 127.0.0.1."""
    host, sep, port = listen.rpartition(":")
    if not sep:
        host, port = "", listen
    try:
        p = int(port)
    except ValueError:
        raise ValueError(f"--listen expects HOST:PORT, got {listen!r}") from None
    if not 0 < p < 65536:
        raise ValueError(f"port {p} out of range")
    return host or "127.0.0.1", p


def load_env(spec: str) -> Environment:
    """An environment from a bundled name or a file (through isthmus.config)."""
    from isthmus.config.loader import load_environment

    return load_environment(spec)


def serve(
    env: Environment,
    *,
    state_dir: Path,
    db_url: str | None = None,
    listen: str = "127.0.0.1:8750",
    advertise_url: str | None = None,
    round_interval: float | str | None = "env",
    pilot_timeout: float = 30.0,
    heartbeat_timeout: float = 20.0,
    reattach_timeout: float = 15.0,
    poll_wait: float = 10.0,
    budget: float | None = None,
    tag: str | None = None,
    log_level: str = "warning",
    max_body_bytes: int = ManagerConfig.max_body_bytes,
    max_batch_jobs: int = ManagerConfig.max_batch_jobs,
    on_stop: str = ManagerConfig.on_stop,
    enforce_walltime: bool = ManagerConfig.enforce_walltime,
    preemption_time: float = ManagerConfig.bag_preemption_time,
    bag_prefetch: int = ManagerConfig.bag_prefetch,
    max_lost_runs: int = ManagerConfig.max_lost_runs,
    tls_cert: Path | None = None,
    tls_key: Path | None = None,
    tls_ca: Path | None = None,
    self_signed: bool = False,
    insecure_http: bool = False,
) -> None:
    """Run the manager until SIGINT/SIGTERM or `isthmus stop` (`on_stop`: what a signal does to running jobs;
    `enforce_walltime`: whether a run reaching its job's requested runtime is killed).

    ValueError, before anything is created, when the address cannot be listened on, the state
    belongs to another environment, a batch system's commands are missing or a limit is out of
    range. Requests with a body over `max_body_bytes` or a batch of more than `max_batch_jobs`
    jobs get 413.

    TLS (`check_tls`): HTTPS with `tls_cert` and `tls_key`, or with the self-signed pair of
    STATE_DIR/tls (`self_signed`: made at the first start); pilots verify the manager against
    `tls_ca`, else the certificate itself when it is self-signed. Plain HTTP outside loopback is
    a ValueError unless `insecure_http`.
    """
    host, port = parse_listen(listen)
    if max_body_bytes < 1024:
        raise ValueError(f"--max-body-bytes must be at least 1024, got {max_body_bytes}")
    if not (0 <= preemption_time <= 3600):
        raise ValueError(f"--preemption-time must be 0 to 3600 seconds, got {preemption_time}")
    if not (0 <= bag_prefetch <= 100):
        raise ValueError(f"--bag-prefetch must be 0 to 100 tasks, got {bag_prefetch}")
    if max_batch_jobs < 1:
        raise ValueError(f"--max-batch-jobs must be at least 1, got {max_batch_jobs}")
    if max_lost_runs < 1:
        raise ValueError(f"--max-lost-runs must be at least 1, got {max_lost_runs}")
    if on_stop not in ("detach", "kill"):
        raise ValueError(f"--on-stop expects detach or kill, got {on_stop!r}")
    check_listen(host, port)
    if advertise_url is not None:
        check_advertise_url(advertise_url)
    state_dir = Path(state_dir).expanduser().resolve()  # pilots and jobs run in other directories
    if self_signed:
        if tls_cert is not None or tls_key is not None:
            raise ValueError("--self-signed makes its own pair: give either it or --tls-cert and --tls-key")
        tls_cert, tls_key = state_dir / "tls" / CERT_NAME, state_dir / "tls" / KEY_NAME
    # pilots are given the CA file's path and run in other directories
    tls_cert, tls_key, tls_ca = (
        None if p is None else Path(p).expanduser().resolve() for p in (tls_cert, tls_key, tls_ca)
    )
    pilot_ca = check_tls(host, port, advertise_url, tls_cert, tls_key, tls_ca, insecure_http, self_signed)
    check_batch_commands(env)
    check_cloud_credentials(env)
    check_run_as(env)
    shared = shared_account_warning(env)
    if shared:
        print(f"isthmus: warning: {shared}", file=sys.stderr, flush=True)
    url = db_url or sqlite_url(state_dir / "isthmus.db")
    check_store_files(url)
    os.umask(0o077)  # the database, logs and token files are the manager's alone (docs/security.md)
    check_state(env, url, state_dir, db_url is None)
    state_dir.mkdir(parents=True, exist_ok=True)
    if self_signed and tls_cert is not None and not tls_cert.exists():
        try:
            advertised = urllib.parse.urlsplit(advertise_url).hostname if advertise_url else None
            make_self_signed(tls_cert.parent, [*machine_names(), *([advertised] if advertised else [])])
        except FileExistsError as exc:  # a key without its certificate
            raise ValueError(str(exc)) from None
    if self_signed:
        print(
            f"isthmus: serving HTTPS with the self-signed certificate {tls_cert}: clients verify it with "
            f"--ca-file {tls_cert} (or ISTHMUS_CA_FILE)",
            file=sys.stderr,
            flush=True,
        )
    cfg = ManagerConfig(
        env=env,
        db_url=url,
        state_dir=state_dir,
        host=host,
        port=port,
        advertise_url=advertise_url,
        round_interval=round_interval,
        pilot_timeout=pilot_timeout,
        heartbeat_timeout=heartbeat_timeout,
        reattach_timeout=reattach_timeout,
        poll_wait=poll_wait,
        budget=budget,
        tag=tag,
        max_body_bytes=max_body_bytes,
        max_batch_jobs=max_batch_jobs,
        on_stop=on_stop,
        enforce_walltime=enforce_walltime,
        bag_preemption_time=preemption_time,
        bag_prefetch=bag_prefetch,
        max_lost_runs=max_lost_runs,
        tls_cert=tls_cert,
        tls_key=tls_key,
        pilot_ca_file=pilot_ca,
        insecure_http=insecure_http,
    )
    # a fatal signal (SIGBUS, SIGSEGV) leaves its name and every thread's stack in the log (stderr)
    if sys.stderr is not None:
        faulthandler.enable(file=sys.stderr, all_threads=True)
    manager = Manager(cfg)
    app = create_app(manager)
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        access_log=False,
        timeout_graceful_shutdown=3,
        backlog=2048,
        ssl_certfile=tls_cert,
        ssl_keyfile=tls_key,
    )
    server = _Server(config, manager)

    def exit_now() -> None:
        server.should_exit = True

    manager.request_exit = exit_now
    asyncio.run(server.serve())


def check_tls(
    host: str,
    port: int,
    advertise_url: str | None,
    cert: Path | None,
    key: Path | None,
    ca: Path | None,
    insecure_http: bool,
    self_signed: bool = False,
) -> Path | None:
    """The CA file pilots are given (None: the system's trusted CAs); ValueError with a one-line
    reason when the TLS settings are incomplete or unreadable, or when the API would be reached
    over plain HTTP outside loopback without `insecure_http`. A self-signed pair not made yet
    (`self_signed`) is not read: it is its own CA file."""
    if (cert is None) != (key is None):
        raise ValueError("--tls-cert and --tls-key go together: give both, or --self-signed")
    if cert is None:
        if ca is not None:
            raise ValueError("--tls-ca names the CA of --tls-cert: give --tls-cert and --tls-key too")
        if not insecure_http and not is_loopback(host):
            raise ValueError(
                f"refusing to serve plain HTTP on {host}:{port} (outside loopback): tokens would cross the "
                "network in clear; give --tls-cert and --tls-key (or --self-signed), or --insecure-http"
            )
    if advertise_url is not None:
        check_plain_http(advertise_url, insecure_http, "--advertise-url", "--insecure-http")
    if ca is not None:
        client_context(ca)  # readable, and PEM
    if cert is None or key is None:
        return None
    if self_signed and not cert.exists():
        return cert
    check_server_pair(cert, key)
    if ca is not None:
        check_ca_verifies(cert, key, ca)  # else every pilot would fail to register
        return ca
    return cert if is_self_signed(cert) else None


def check_listen(host: str, port: int) -> None:
    """ValueError naming the address when nothing can listen on it (taken, or not this host's)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does
        try:
            sock.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise ValueError(
                    f"cannot listen on {host}:{port}: the address is already in use "
                    "(another isthmus server?); choose another with --listen HOST:PORT"
                ) from None
            raise ValueError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None


def environment_fingerprint(env: Environment) -> list[str]:
    """What a state must agree on with the environment: the site names in order (jobs and
    pilots in the database refer to sites by index)."""
    return [s.name for s in env.sites]


def check_advertise_url(url: str) -> None:
    """ValueError unless `url` is an http(s) URL with a host (what remote pilots are given)."""
    parsed = urllib.parse.urlsplit(url)
    if parsed.scheme not in ("http", "https") or not parsed.hostname or parsed.query or parsed.fragment:
        raise ValueError(f"--advertise-url expects http://HOST[:PORT][/PATH], got {url!r}")


def check_cloud_credentials(env: Environment) -> None:
    """ValueError naming the site and what is missing when a cloud site's credentials cannot be
    read (never their values)."""
    from isthmus.backends.libcloud_provider import credentials

    for site in env.sites:
        if site.provider is not None:
            try:
                credentials(site.provider)
            except ValueError as exc:
                raise ValueError(f"site {site.name}: {exc}") from None


def own_user_sites(env: Environment) -> list[str]:
    """The sites whose pilots or jobs start as the manager's own Unix user (local clusters and
    clouds, batch-system sites): all but those of a cloud provider, whose VMs start the pilots."""
    return [s.name for s in env.sites if s.provider is None]


def shared_account_warning(env: Environment) -> str | None:
    """What a manager without a ``[users]`` table must be told at start when some site runs jobs
    as its own Unix user (local sites, batch-system sites): those jobs can read and change its
    state. None with ``[users]``, or when every site is a cloud (its VMs' pilots are not here)."""
    if env.users is not None:
        return None
    own = own_user_sites(env)
    if not own:
        return None
    return (
        f"no [users] table: jobs of site {own[0]}{' and others' if len(own) > 1 else ''} run as this manager's "
        "Unix user and can read its database and tokens; map users to accounts for other users' jobs "
        "(docs/security.md, 'Running jobs as their users')"
    )


def check_run_as(env: Environment) -> None:
    """ValueError naming the field when the environment's ``[users]`` table names an account this
    machine lacks, root or the manager's own user; or when a site would run jobs as the manager's
    user anyway: a direct-mode site of a batch system that cannot submit as another user (all
    but Slurm), or, while the manager is not root, a site whose pilots or jobs run as the
    manager's user (local clusters and clouds, batch sites), which could not switch to the
    accounts."""
    from isthmus.agent.accounts import check_users, own_name

    users = env.users
    if users is None:
        return
    check_users(users.run_as, users.accounts)
    direct = [s for s in env.sites if s.lrm is not None and s.lrm.mode == "direct"]
    for site in direct:
        assert site.lrm is not None
        if site.lrm.driver != "slurm":  # only sbatch submits as another user (--uid, root only)
            raise ValueError(
                f"environment file: users: site {site.name} runs each job as a {site.lrm.driver} job of the "
                'manager\'s user (lrm.mode = "direct"), which cannot be another account: use mode = "pilot" '
                "(docs/security.md)"
            )
    # local sites and batch-system pilots run as the manager's user; so does sbatch without root
    own = own_user_sites(env)
    if own and os.geteuid() != 0:
        raise ValueError(
            f"environment file: users: the pilots or jobs of site {own[0]} run as the manager's user ({own_name()}), "
            "which cannot switch to the accounts of [users]: start the manager as root "
            "(docs/security.md, 'Running jobs as their users')"
        )


def check_batch_commands(env: Environment) -> None:
    """ValueError naming the site, the missing commands and the package to install, when a site
    behind a batch system cannot reach it from this machine."""
    from isthmus.backends import registry

    for site in env.sites:
        if site.lrm is None:
            continue
        driver = registry.get("batch", site.lrm.driver)
        commands = driver.commands
        hint = f"Debian: apt-get install {driver.package}" if driver.package else "see the driver's documentation"
        if getattr(site.lrm.driver_options, "ssh", None):  # its commands run on the login host
            commands, hint = ("ssh",), "Debian: apt-get install openssh-client"
        missing = [c for c in commands if shutil.which(c) is None]
        if missing:
            raise ValueError(
                f"site {site.name} uses {site.lrm.driver}, but {', '.join(missing)} "
                f"{'is' if len(missing) == 1 else 'are'} not on PATH: install its client commands "
                f"({hint})"
            )


def check_store_files(db_url: str) -> None:
    """ValueError naming every reason an SQLite store's files are unsafe to run on (another user
    could write them, or they are immutable or append-only: isthmus.store.sqlite_files)."""
    database = sqlite_file(normalize_url(db_url))
    if database is None:
        return
    problems = start_problems(database)
    if problems:
        raise ValueError("the SQLite store is not safe to run on: " + "; ".join(problems))


def check_state(env: Environment, db_url: str, state_dir: Path, sqlite_in_state: bool) -> None:
    """ValueError when the database was made for another environment (name or sites differ).

    The manager records the environment's name and sites at every start (`meta` table); a
    state directory or database without them is new and accepted.
    """
    if sqlite_in_state and not (state_dir / "isthmus.db").is_file():
        return
    store = Store(db_url)
    try:
        store.create()
        name = store.get_meta("environment")
        sites = store.get_meta("sites")
    finally:
        store.close()
    where = str(state_dir) if sqlite_in_state else "the database"
    if name is not None and name != env.name:
        raise ValueError(
            f"{where} belongs to environment {name!r}, not {env.name!r}: use that environment, "
            "or another --state-dir (or --db) for this one"
        )
    if sites is not None and json.loads(sites) != environment_fingerprint(env):
        raise ValueError(
            f"{where} was made for environment {env.name!r} with sites {', '.join(json.loads(sites))}; "
            f"this one has sites {', '.join(environment_fingerprint(env))}: jobs and pilots stored there "
            "refer to the old sites, so use another --state-dir (or --db)"
        )
