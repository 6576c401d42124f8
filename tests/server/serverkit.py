"""What the router tests share: the API of a real manager, in this process, over FastAPI's TestClient.

The manager runs (its database, engine, clock and peer links) but starts no process: its one
site is a cloud whose VMs take a day to boot, so jobs stay queued and no pilot is ever spawned;
its peer's address refuses connections, so the peer routes exist but no peer answers.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from fastapi.testclient import TestClient

from isthmus.config.loader import load_environment
from isthmus.live.manager import Manager, ManagerConfig
from isthmus.server.auth import hash_token, new_token

PEER_SECRET = "router-test-peer-secret"

ENV = """
name = "routers"
round_interval = "event"
[[sites]]
name = "cloud"
kind = "cloud"
max_vms = 2
cores_per_node = 2
boot_time = 86400
[policies]
allocation = "ff"
provisioning = "on-demand"
selection = "lowest-qlen"
fairshare = "sep"
[[peers]]
name = "P"
address = "http://127.0.0.1:9"
token_env = "ISTHMUS_ROUTER_TEST_PEER"
"""

MAX_BATCH = 3


@dataclass
class Api:
    """A running manager's API and the tokens to call it with."""

    client: TestClient
    manager: Manager
    admin_token: str

    def headers(self, token: str) -> dict[str, str]:
        """The Authorization header of `token`."""
        return {"Authorization": f"Bearer {token}"}

    @property
    def admin(self) -> dict[str, str]:
        """The admin's Authorization header."""
        return self.headers(self.admin_token)

    def user(self, name: str) -> dict[str, str]:
        """The Authorization header of a new token of user `name` (made through POST /tokens)."""
        answer = self.client.post("/tokens", json={"user": name}, headers=self.admin)
        assert answer.status_code == 201, answer.text
        return self.headers(answer.json()["token"])

    def pilot(self, node: str) -> dict[str, str]:
        """The Authorization header of a pilot token of node `node` (stored as the hub stores them)."""
        token = new_token()
        with self.manager.store.begin() as conn:
            self.manager.store.add_token(conn, hash_token(token), user=None, kind="pilot", node=node)
        return self.headers(token)


def manager_for(env_text: str, tmp_path: Path, **config: object) -> Manager:
    """A manager (not started) of the environment `env_text` with its state under `tmp_path`."""
    env_file = tmp_path / "env.toml"
    env_file.write_text(env_text)
    env = load_environment(str(env_file))
    return Manager(
        ManagerConfig(
            env=env,
            db_url=f"sqlite:///{tmp_path / 'isthmus.db'}",
            state_dir=tmp_path / "state",
            **config,  # type: ignore[arg-type]
        )
    )
