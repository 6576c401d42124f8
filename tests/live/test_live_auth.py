"""Authentication and authorization of every endpoint: no token, bad token, another user, admin, pilot."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys

import httpx
from livekit import LiveServer, wait_for, wait_state

from isthmus.store.tables import Store
from isthmus.store.tokens import hash_token, new_token

USER_ENDPOINTS = [
    ("POST", "/jobs", {"command": "true"}),
    ("GET", "/jobs", None),
    ("GET", "/jobs/{job}", None),
    ("POST", "/jobs/{job}/cancel", None),
    ("GET", "/jobs/{job}/output", None),
    ("GET", "/sites", None),
    ("GET", "/vms", None),
    ("GET", "/whoami", None),
]
ADMIN_ENDPOINTS = [
    ("POST", "/tokens", {"user": "mallory"}),
    ("GET", "/users", None),
    ("GET", "/events", None),
]
PILOT_ENDPOINTS = [
    ("POST", "/pilot/register", {"pid": 1, "slots": 1}),
    ("GET", "/pilot/poll?pilot_id=x&wait=0", None),
    ("POST", "/pilot/report", {"pilot_id": "x", "reports": []}),
]
ALL = USER_ENDPOINTS + ADMIN_ENDPOINTS + PILOT_ENDPOINTS


def call(url: str, token: str | None, method: str, path: str, body: object, job: int) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    return httpx.request(method, url + path.format(job=job), json=body, headers=headers, timeout=10)


def _pilot_token(live: LiveServer) -> str:
    """A pilot token for node 0/n1, added to the database the way the manager adds one (the
    tokens of the running pilots are out of reach: they reach the pilots on stdin)."""
    token = new_token()
    store = Store(live.db_url)
    try:
        with store.begin() as conn:
            store.add_token(conn, hash_token(token), user=None, kind="pilot", node="0/n1")
    finally:
        store.close()
    return token


def test_admin_token_file_is_private(live: LiveServer) -> None:
    path = live.state_dir / "admin.token"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert live.client().request("GET", "/whoami") == {"user": "admin", "admin": True}


def test_every_endpoint_no_token_bad_token_other_user_admin_pilot(live: LiveServer) -> None:
    admin = live.client()
    alice_tok = admin.create_token("alice")["token"]
    bob_tok = admin.create_token("bob")["token"]
    alice, bob = live.client(alice_tok), live.client(bob_tok)
    job = alice.submit(command="sleep", args=["30"])
    wait_state(alice, job, ("running",))
    url = live.url

    # no token, malformed header, unknown token: 401 everywhere (but /health)
    for method, path, body in ALL:
        assert call(url, None, method, path, body, job).status_code == 401, path
        assert call(url, "not-a-valid-token", method, path, body, job).status_code == 401, path
        r = httpx.request(method, url + path.format(job=job), json=body, headers={"Authorization": "Basic abc"})
        assert r.status_code == 401, path
    assert httpx.get(url + "/health").status_code == 200

    # another user: cannot see, read output of or cancel alice's job
    for method, path, body in USER_ENDPOINTS:
        r = call(url, bob_tok, method, path, body, job)
        if "{job}" in path:
            assert r.status_code == 404 and r.json()["detail"] == f"no job {job}", path  # not 403: ids reveal nothing
        else:
            assert r.status_code in (200, 201), (path, r.text)
    assert [j["user"] for j in bob.jobs(all_=True)] == ["bob"]  # bob's own job from POST /jobs above
    assert all(j["user"] == "alice" for j in alice.jobs(all_=True))
    # users are not admins, nor pilots
    for token in (alice_tok, bob_tok):
        for method, path, body in ADMIN_ENDPOINTS:
            r = call(url, token, method, path, body, job)
            assert r.status_code == 403 and "admin" in r.json()["detail"], path
        for method, path, body in PILOT_ENDPOINTS:
            assert call(url, token, method, path, body, job).status_code == 403, path
    assert call(url, admin.http.headers["Authorization"].split()[1], *PILOT_ENDPOINTS[0], job).status_code == 403

    # the owner sees it; the admin sees everything and may cancel anyone's job
    assert alice.job(job)["user"] == "alice"
    assert {j["user"] for j in admin.jobs(all_=True)} == {"alice", "bob"}
    assert {j["user"] for j in admin.jobs(all_=True, user="alice")} == {"alice"}
    for method, path, body in ADMIN_ENDPOINTS:
        assert call(url, live.admin_token, method, path, body, job).status_code in (200, 201), path
    assert call(url, live.admin_token, "GET", "/jobs/{job}/output", None, job).status_code == 200
    assert call(url, live.admin_token, "POST", "/jobs/{job}/cancel", None, job).status_code == 200
    assert wait_state(alice, job, ("cancelled",))["state"] == "cancelled"
    # alice may cancel her own
    job2 = alice.submit(command="sleep", args=["30"])
    assert call(url, alice_tok, "POST", "/jobs/{job}/cancel", None, job2).status_code == 200
    assert call(url, live.admin_token, "GET", "/jobs/{job}", None, 99999).status_code == 404

    # a pilot's own token reaches only the pilot endpoints
    pilot_tok = _pilot_token(live)
    for method, path, body in USER_ENDPOINTS + ADMIN_ENDPOINTS:
        r = call(url, pilot_tok, method, path, body, job)
        assert r.status_code == 403 and "pilot" in r.json()["detail"], path
    r = call(url, pilot_tok, "GET", "/pilot/poll?pilot_id=bogus&wait=0", None, job)
    assert r.status_code == 409  # a real pilot token, but not its registration


def _cli(live: LiveServer, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ISTHMUS_URL": live.url, "ISTHMUS_TOKEN": live.admin_token}
    return subprocess.run(  # noqa: PLW1510
        [sys.executable, "-m", "isthmus.cli.live_entry", *args], env=env, capture_output=True, text=True, timeout=60
    )


def test_tokens_are_listed_by_id_revoked_at_once_and_expire(live: LiveServer) -> None:
    made = json.loads(_cli(live, "token", "create", "carol", "--json").stdout)
    carol = live.client(made["token"])
    assert carol.request("GET", "/whoami")["user"] == "carol"  # now in the API's token cache
    listed = json.loads(_cli(live, "token", "list", "--json").stdout)
    assert {"id": made["id"], "user": "carol", "expires": None} == {
        k: v for k, v in listed[-1].items() if k != "created"
    }
    assert all(made["token"] not in json.dumps(t) for t in listed)  # ids, never the tokens
    r = _cli(live, "token", "revoke", made["id"][:8])
    assert r.returncode == 0, r.stderr
    denied = httpx.get(live.url + "/whoami", headers={"Authorization": f"Bearer {made['token']}"})
    assert denied.status_code == 401  # at once, although it was cached
    again = _cli(live, "token", "revoke", made["id"])
    assert again.returncode != 0 and "no user token has id" in again.stderr

    short = json.loads(_cli(live, "token", "create", "dave", "--expires-in", "2s", "--json").stdout)
    assert short["expires"] is not None
    assert live.client(short["token"]).request("GET", "/whoami")["user"] == "dave"
    wait_for(
        lambda: (
            httpx.get(live.url + "/whoami", headers={"Authorization": f"Bearer {short['token']}"}).status_code == 401
        ),
        timeout=10,
        what="the token to expire",
    )
    expired = httpx.get(live.url + "/whoami", headers={"Authorization": f"Bearer {short['token']}"})
    assert "token expired at" in expired.json()["detail"]
    bad = _cli(live, "token", "create", "erin", "--expires-in", "soon")
    assert bad.returncode != 0 and "--expires-in" in bad.stderr
