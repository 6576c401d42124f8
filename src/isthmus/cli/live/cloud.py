"""`isthmus cloud cleanup`: terminate the instances this manager leased that its database does
not know (isthmus.live.cloud_cleanup)."""

from __future__ import annotations

import json
import os
from dataclasses import asdict
from pathlib import Path

import typer

from isthmus.cli.live.common import JSON_OPT, print_table


def register(app: typer.Typer) -> None:
    """Add the `cloud` group to `app`."""

    cloud_app = typer.Typer(
        help="The cloud providers' side of this manager (run on its machine).", no_args_is_help=True
    )

    @cloud_app.command("cleanup")
    def cleanup_cmd(
        env: str = typer.Option("local", "--env", help="Environment of the manager: bundled name or file."),
        state_dir: Path = typer.Option(
            Path(os.environ.get("ISTHMUS_STATE_DIR", "isthmus-state")),  # noqa: B008
            "--state-dir",
            help="The manager's state directory (its SQLite file).",
        ),
        db: str | None = typer.Option(None, "--db", help="Database URL (default: SQLite file in the state dir)."),
        dry_run: bool = typer.Option(False, "--dry-run", help="List the instances; terminate nothing."),
        manager_id: str | None = typer.Option(
            None,
            "--all-of-this-manager",
            metavar="MANAGER_ID",
            help="After a lost database: take every instance tagged with this manager id, known or not "
            "(the id is the isthmus-manager tag of its instances).",
        ),
        as_json: bool = JSON_OPT,
    ) -> None:
        """List every instance tagged with this manager's id (from its database) that no VM of the
        database claims, and terminate it. Run it with the manager stopped: a lease under way is
        not in the database yet."""
        from isthmus.backends.registry import cloud_provider
        from isthmus.live.cloud_cleanup import cleanup, known_vms
        from isthmus.server.main import load_env
        from isthmus.store.tables import Store, sqlite_url

        try:
            environment = load_env(env)
        except Exception as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None
        known = None
        if manager_id is None:
            url = db or sqlite_url(state_dir / "isthmus.db")
            if db is None and not (state_dir / "isthmus.db").exists():
                typer.echo(f"error: no database in {state_dir} (after a lost one: --all-of-this-manager ID)", err=True)
                raise typer.Exit(2)
            store = Store(url)
            try:
                manager_id = store.get_meta("manager_id")
                known = known_vms(store)
            finally:
                store.close()
            if not manager_id:
                typer.echo("error: the database names no manager id (never started?)", err=True)
                raise typer.Exit(2)
        try:
            strays = cleanup(environment, manager_id, known, cloud_provider, dry_run=dry_run)
        except Exception as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(1) from None
        if as_json:
            typer.echo(json.dumps([asdict(s) for s in strays], indent=2))
        elif strays:
            print_table(
                ["INSTANCE", "SITE", "VM", "STATE", "OUTCOME"],
                [[s.provider_id, s.site, s.key or "-", s.state, s.outcome] for s in strays],
            )
        else:
            typer.echo(f"no unknown instance of manager {manager_id}")
        if any(s.outcome.startswith("error") for s in strays):
            raise typer.Exit(1)

    app.add_typer(cloud_app, name="cloud")
