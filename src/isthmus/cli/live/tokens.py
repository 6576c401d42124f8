"""`isthmus token create|list|revoke`: API tokens (admin)."""

from __future__ import annotations

import json
import time

import typer

from isthmus.cli.live.common import CA_OPT, JSON_OPT, TOKEN_OPT, URL_OPT, api_call, parse_duration, print_table


def register(app: typer.Typer) -> None:
    """Add the `token` group to `app`."""

    token_app = typer.Typer(help="Manage API tokens (admin).", no_args_is_help=True)

    @token_app.command("create")
    def token_create(
        user: str = typer.Argument(..., help="User name (created if missing)."),
        admin: bool = typer.Option(False, "--admin", help="Make a new user an admin."),
        expires_in: str | None = typer.Option(
            None,
            "--expires-in",
            help="Refuse the token after this long, in submit -t's grammar (a bare number is minutes): "
            "90, 12h, 30d, D-HH:MM:SS; default never.",
        ),
        url: str | None = URL_OPT,
        _ca: str | None = CA_OPT,
        token: str | None = TOKEN_OPT,
        as_json: bool = JSON_OPT,
    ) -> None:
        """Create a token for USER; prints it (it is shown only once)."""
        seconds = None
        if expires_in is not None:
            try:
                seconds = parse_duration(expires_in)
            except ValueError as exc:
                raise typer.BadParameter(str(exc), param_hint="--expires-in") from None
        res = api_call(url, token, lambda c: c.create_token(user, admin, seconds))
        typer.echo(json.dumps(res) if as_json else res["token"])

    @token_app.command("list")
    def token_list(
        url: str | None = URL_OPT, _ca: str | None = CA_OPT, token: str | None = TOKEN_OPT, as_json: bool = JSON_OPT
    ) -> None:
        """Every user token by id (the tokens themselves are not kept), with its user and expiry."""
        rows = api_call(url, token, lambda c: c.tokens())
        if as_json:
            typer.echo(json.dumps(rows))
            return

        def when(t: float | None) -> str:
            return "never" if t is None else time.strftime("%Y-%m-%d %H:%M", time.localtime(t))

        print_table(
            ["ID", "USER", "CREATED", "EXPIRES"],
            [[r["id"], r["user"], when(r["created"]), when(r["expires"])] for r in rows],
        )

    @token_app.command("revoke")
    def token_revoke(
        token_id: str = typer.Argument(..., help="The token's id from 'isthmus token list' (at least 4 digits)."),
        url: str | None = URL_OPT,
        _ca: str | None = CA_OPT,
        token: str | None = TOKEN_OPT,
    ) -> None:
        """Revoke a user token: it is refused from the next request on."""
        api_call(url, token, lambda c: c.revoke_token(token_id))
        typer.echo(f"revoked {token_id}")

    app.add_typer(token_app, name="token")
