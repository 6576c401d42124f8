"""Several live managers on loopback connected as peers (docs/federation.md): each its own
environment file, sites, SQLite database, state directory and free port; every pair shares a
secret written to a file (mode 600) or, for one pair, given through an environment variable."""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from livekit import LiveServer, wait_for

from isthmus.live.manager import free_port
from isthmus.tls import make_self_signed

PEER_ENV = """
name = "{name}"
round_interval = "event"
[[sites]]
name = "c1"
nodes = {nodes}
cores_per_node = {cores}
[policies]
allocation = "ff"
provisioning = "on-demand"
{selection}
[federation]
max_hops = {max_hops}
heartbeat = {heartbeat}
missed_heartbeats = 3
timeout = 2
"""

PEER_ENTRY = """
[[peers]]
name = "{name}"
address = "{scheme}://127.0.0.1:{port}"
role = "{role}"
{credential}
{ca_file}
"""


def pair_secret_var(a: str, b: str) -> str:
    """The environment variable the secret of pair (a, b) is given in, when given so."""
    return "ISTHMUS_TEST_PEER_" + "_".join(sorted((a, b)))


class Federation:
    """Managers `names` (the first has `nodes` × `cores`, the others `peer_nodes`), fully
    connected with role "both", each with `selection` as its forwarding policy. With `tls`
    every manager serves HTTPS: the first with the self-signed pair it makes at its start, the
    others with a pair made here; each peer entry names the peer's certificate as its CA file."""

    def __init__(
        self,
        tmp: Path,
        tag: str,
        names: Sequence[str] = ("A", "B", "C"),
        *,
        selection: str = "lowest-qlen",
        nodes: Sequence[int] = (1, 2, 2),
        cores: int = 1,
        heartbeat: float = 0.5,
        env_secret_pairs: Sequence[tuple[str, str]] = (),
        roles: dict[tuple[str, str], str] | None = None,
        max_hops: int = 1,
        tls: bool = False,
    ) -> None:
        self.tmp = tmp
        self.names = list(names)
        self.ports = {n: free_port() for n in names}
        self.secrets: dict[tuple[str, str], str] = {}
        self.env_vars: dict[str, str] = {}
        self.servers: dict[str, LiveServer] = {}
        roles = roles or {}
        #: each manager's certificate when `tls` (the first one's exists once it started)
        self.certs: dict[str, tuple[Path, Path]] = {}
        for j, n in enumerate(names if tls else ()):
            made = tmp / n / "state" / "tls"
            self.certs[n] = (made / "cert.pem", made / "key.pem") if j == 0 else make_self_signed(tmp / n / "tls")
        for i, a in enumerate(names):
            for b in names[i + 1 :]:
                key = tuple(sorted((a, b)))
                secret = secrets.token_urlsafe(24)
                self.secrets[key] = secret  # type: ignore[index]
                path = tmp / f"secret-{key[0]}-{key[1]}"
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                with os.fdopen(fd, "w") as f:
                    f.write(secret + "\n")
        for i, name in enumerate(names):
            entries = []
            for other in names:
                if other == name:
                    continue
                key = tuple(sorted((name, other)))
                if key in [tuple(sorted(p)) for p in env_secret_pairs]:
                    var = pair_secret_var(name, other)
                    self.env_vars[var] = self.secrets[key]  # type: ignore[index]
                    credential = f'token_env = "{var}"'
                else:
                    credential = f'token_file = "{tmp / f"secret-{key[0]}-{key[1]}"}"'
                entries.append(
                    PEER_ENTRY.format(
                        name=other,
                        scheme="https" if tls else "http",
                        port=self.ports[other],
                        role=roles.get((name, other), "both"),
                        credential=credential,
                        ca_file=f'ca_file = "{self.certs[other][0]}"' if tls else "",
                    )
                )
            text = PEER_ENV.format(
                name=name,
                nodes=nodes[i],
                cores=cores,
                selection=f'selection = "{selection}"' if selection else "",
                heartbeat=heartbeat,
                max_hops=max_hops,
            ) + "".join(entries)
            env_file = tmp / f"{name}.toml"
            env_file.write_text(text)
            state = tmp / name / "state"
            state.mkdir(parents=True, exist_ok=True)
            # pilots outlive a killed manager long enough for its restart (a lost pilot's job
            # is restarted by its site: a recorded restart, not the federation running it twice)
            db_url = f"sqlite:///{tmp / name / 'isthmus.db'}"
            mode: str | tuple[Path, Path] | None = None
            if tls:
                mode = "self-signed" if i == 0 else self.certs[name]
            server = LiveServer(env_file, state, db_url, tag, pilot_timeout=60.0, reattach_timeout=15.0, tls=mode)
            server.port = self.ports[name]
            server.url = f"{'https' if tls else 'http'}://127.0.0.1:{server.port}"
            self.servers[name] = server

    def start(self) -> Federation:
        """Start every manager and wait until each sees every peer up with resource data."""
        os.environ.update(self.env_vars)
        for s in self.servers.values():
            s.start()
        for name in self.names:
            self.wait_connected(name)
        return self

    def wait_connected(self, name: str, timeout: float = 30.0) -> list[dict[str, Any]]:
        """Wait until `name` sees all its peers up with their resource data."""
        s = self.servers[name]

        def ready() -> list[dict[str, Any]] | None:
            with s.client() as c:
                rows = c.peers()
            ok = all(p["up"] and (p["resources"] is not None or p["role"] == "consumer") for p in rows)
            return rows if ok and len(rows) == len(self.names) - 1 else None

        return wait_for(ready, timeout, 0.1, f"{name} connected to its peers")  # type: ignore[no-any-return]

    def stop(self) -> None:
        """Stop every manager still running."""
        for s in self.servers.values():
            s.stop()
        for var in self.env_vars:
            os.environ.pop(var, None)

    def __getitem__(self, name: str) -> LiveServer:
        return self.servers[name]


@contextmanager
def federation(tmp: Path, tag: str, **kwargs: Any) -> Iterator[Federation]:
    """A started `Federation`, stopped at the end."""
    fed = Federation(tmp, tag, **kwargs)
    try:
        yield fed.start()
    finally:
        fed.stop()
