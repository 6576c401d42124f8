"""A small HTTP client of the manager's API, used by the CLI, tests and benchmarks."""

from __future__ import annotations

import contextlib
import os
import ssl
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

from isthmus.model.events import EventLog
from isthmus.tls import client_context

DEFAULT_URL = "http://127.0.0.1:8750"

IDEMPOTENCY_HEADER = "Idempotency-Key"
"""The header under which a submission names itself, so that a retry is not stored twice."""

SUBMIT_ATTEMPTS = 6
"""How many times `isthmus submit` sends its request (with one key) before giving up."""


class ApiError(Exception):
    """The manager answered with an error; `status` is the HTTP status, the message its detail."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def default_token(state_dir: str | None = None) -> str | None:
    """ISTHMUS_TOKEN, else the token file ISTHMUS_TOKEN_FILE, else STATE_DIR/admin.token if readable."""
    tok = os.environ.get("ISTHMUS_TOKEN")
    if tok:
        return tok.strip()
    path = os.environ.get("ISTHMUS_TOKEN_FILE")
    candidates = [Path(path)] if path else []
    sd = state_dir or os.environ.get("ISTHMUS_STATE_DIR")
    if sd:
        candidates.append(Path(sd) / "admin.token")
    for p in candidates:
        try:
            return p.read_text().strip()
        except OSError:
            continue
    return None


class Client:
    """Calls the API with a bearer token; raises ApiError with the server's message on errors.

    An https manager is verified against `ca_file` (default ISTHMUS_CA_FILE), else against the
    trusted CAs; ValueError when the CA file cannot be read.
    """

    def __init__(
        self,
        url: str | None = None,
        token: str | None = None,
        timeout: float = 30.0,
        ca_file: str | os.PathLike[str] | None = None,
    ) -> None:
        self.url = url or os.environ.get("ISTHMUS_URL", DEFAULT_URL)
        self.token = token
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        ca = ca_file if ca_file is not None else os.environ.get("ISTHMUS_CA_FILE") or None
        verify: ssl.SSLContext | bool = client_context(ca) if ca is not None else True
        self.http = httpx.Client(base_url=self.url, headers=headers, timeout=timeout, verify=verify)

    def _unreachable(self, exc: httpx.TransportError) -> ApiError:
        """The error of a request that got no answer (status 0), with what to do about an
        unverified certificate."""
        text = f"cannot reach the manager at {self.url}: {exc}"
        if "CERTIFICATE_VERIFY_FAILED" in text:
            text += " (give the CA file of the manager's certificate with --ca-file or ISTHMUS_CA_FILE)"
        return ApiError(0, text)

    def close(self) -> None:
        """Close the connection pool."""
        self.http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _check(self, r: httpx.Response) -> httpx.Response:
        if r.status_code >= 400:
            try:
                detail = r.json().get("detail", r.text)
            except ValueError:
                detail = r.text
            if isinstance(detail, list):  # pydantic errors
                detail = "; ".join(
                    f"{'.'.join(str(x) for x in d.get('loc', [])[1:]) or 'body'}: {d.get('msg')}" for d in detail
                )
            raise ApiError(r.status_code, f"{r.status_code}: {detail}")
        return r

    def request(self, method: str, path: str, **kw: Any) -> Any:
        """Any call; JSON answer decoded."""
        try:
            r = self.http.request(method, path, **kw)
        except httpx.TransportError as exc:
            raise self._unreachable(exc) from None
        self._check(r)
        ctype = r.headers.get("content-type", "")
        return r.json() if ctype.startswith("application/json") else r.text

    def post_once(
        self, path: str, body: Any, key: str | None = None, *, attempts: int = 1, backoff: float = 0.5
    ) -> Any:
        """POST a submission `body` to `path` under Idempotency-Key `key` (a fresh UUID when None
        and `attempts` > 1; none for a single send without a key); the JSON answer. Up to
        `attempts` sends with the same key: after a lost connection (or an answer lost to a
        timeout) and after a 503, waiting `backoff` seconds doubled each time (at least the
        answer's Retry-After). The manager stores the submission exactly once and answers a
        retry with the first answer's ids."""
        if key is None and attempts > 1:
            key = str(uuid.uuid4())
        headers = {IDEMPOTENCY_HEADER: key} if key is not None else {}
        delay = backoff
        for attempt in range(1, attempts + 1):
            last = attempt == attempts
            try:
                r = self.http.post(path, json=body, headers=headers)
            except httpx.TransportError as exc:
                if last:
                    raise self._unreachable(exc) from None
            else:
                if r.status_code != 503 or last:
                    return self._check(r).json()
                with contextlib.suppress(ValueError):
                    delay = max(delay, float(r.headers.get("Retry-After", 0)))
            time.sleep(delay)
            delay = min(delay * 2, 30.0)
        raise AssertionError("unreachable")  # the last attempt returned or raised

    def submit(self, *, idempotency_key: str | None = None, attempts: int = 1, **spec: Any) -> int:
        """Submit a job; its id (`post_once`: under `idempotency_key`, sent up to `attempts` times)."""
        return int(self.post_once("/jobs", spec, idempotency_key, attempts=attempts)["id"])

    def submit_many(
        self, specs: list[dict[str, Any]], *, idempotency_key: str | None = None, attempts: int = 1
    ) -> list[int]:
        """Submit several jobs in one request (all or none); their ids, in order (`post_once`)."""
        return [int(r["id"]) for r in self.post_once("/jobs/batch", specs, idempotency_key, attempts=attempts)]

    def jobs(
        self,
        *,
        all_: bool = False,
        states: list[str] | None = None,
        user: str | None = None,
        limit: int | None = None,
    ) -> list[dict[str, Any]]:
        """Jobs visible to this token (the newest `limit`, default the server's 1000)."""
        params: dict[str, Any] = {"all": all_}
        if limit is not None:
            params["limit"] = limit
        if states:
            params["state"] = states
        if user:
            params["user"] = user
        return list(self.request("GET", "/jobs", params=params))

    def job(self, job_id: int) -> dict[str, Any]:
        """One job with its history."""
        return dict(self.request("GET", f"/jobs/{job_id}"))

    def cancel(self, job_id: int) -> dict[str, Any]:
        """Cancel a job."""
        return dict(self.request("POST", f"/jobs/{job_id}/cancel"))

    def output(self, job_id: int, stream: str = "stdout", run: int | None = None, offset: int = 0) -> tuple[str, int]:
        """(text from `offset`, next offset) of a run's output."""
        params: dict[str, Any] = {"stream": stream, "offset": offset}
        if run is not None:
            params["run"] = run
        try:
            r = self.http.get(f"/jobs/{job_id}/output", params=params)
        except httpx.TransportError as exc:
            raise self._unreachable(exc) from None
        self._check(r)
        return r.text, int(r.headers.get("X-Offset", offset))

    def submit_bag(self, *, idempotency_key: str | None = None, attempts: int = 1, **spec: Any) -> int:
        """Submit a bag of tasks (`tasks` or `sweep`, see docs/bags.md); its job id (`post_once`)."""
        return int(self.post_once("/bags", spec, idempotency_key, attempts=attempts)["id"])

    def bags(self, all_: bool = False) -> list[dict[str, Any]]:
        """Bags of tasks visible to this token, with their progress."""
        return list(self.request("GET", "/bags", params={"all": all_}))

    def results(self, bag_id: int, states: list[str] | None = None) -> list[dict[str, Any]]:
        """The results index of a bag: every task's command line, output file, exit code, state."""
        params: dict[str, Any] = {"state": states} if states else {}
        return list(self.request("GET", f"/bags/{bag_id}/results", params=params))

    def task_output(self, bag_id: int, task: int, stream: str = "stdout", offset: int = 0) -> tuple[str, int]:
        """(text from `offset`, next offset) of a bag task's output."""
        try:
            r = self.http.get(f"/bags/{bag_id}/tasks/{task}/output", params={"stream": stream, "offset": offset})
        except httpx.TransportError as exc:
            raise self._unreachable(exc) from None
        self._check(r)
        return r.text, int(r.headers.get("X-Offset", offset))

    def sites(self) -> list[dict[str, Any]]:
        """Sites and their capacity."""
        return list(self.request("GET", "/sites"))

    def peers(self) -> list[dict[str, Any]]:
        """Peer managers: role, up or down, last heard, latest resource data."""
        return list(self.request("GET", "/peers"))

    def vms(self, all_: bool = False) -> list[dict[str, Any]]:
        """VM leases."""
        return list(self.request("GET", "/vms", params={"all": all_}))

    def accounting(self, by: str = "user", since: float = 0.0, until: float | None = None) -> list[dict[str, Any]]:
        """Accounting rows grouped `by` user, site or policy over [since, until) (Unix seconds)."""
        params: dict[str, Any] = {"by": by, "since": since}
        if until is not None:
            params["until"] = until
        return list(self.request("GET", "/accounting", params=params))

    def budgets(self) -> list[dict[str, Any]]:
        """Every budget cap with its limit, spent and left in its current period."""
        return list(self.request("GET", "/budgets"))

    def set_budget(self, name: str, limit: float) -> dict[str, Any]:
        """Change budget `name`'s limit (admin)."""
        return dict(self.request("PUT", f"/budgets/{name}", json={"limit": limit}))

    def forecast(self, **what_if: Any) -> dict[str, Any]:
        """A forecast of the queue: the live configuration, or `allocation`, `provisioning`,
        `budget`, `no_budget` and `horizon` as given (see POST /forecast)."""
        return dict(self.request("POST", "/forecast", json={k: v for k, v in what_if.items() if v is not None}))

    def create_token(self, user: str, admin: bool = False, expires_in: float | None = None) -> dict[str, Any]:
        """A new token for `user`, refused after `expires_in` seconds if given (admin only)."""
        body: dict[str, Any] = {"user": user, "admin": admin}
        if expires_in is not None:
            body["expires_in"] = expires_in
        return dict(self.request("POST", "/tokens", json=body))

    def stop(self, mode: str = "detach", release: bool = False) -> dict[str, Any]:
        """Stop the manager: "detach", "kill" or "drain", and with `release` terminate every VM
        it leased (admin only; see `isthmus stop`)."""
        return dict(self.request("POST", "/admin/stop", json={"mode": mode, "release": release}))

    def tokens(self) -> list[dict[str, Any]]:
        """Every user token by id, with its user and times (admin only)."""
        return list(self.request("GET", "/tokens"))

    def revoke_token(self, token_id: str) -> None:
        """Revoke the user token whose id starts with `token_id` (admin only)."""
        self.request("DELETE", f"/tokens/{token_id}")

    def pilots(self) -> list[dict[str, Any]]:
        """Every pilot the manager recorded (admin only)."""
        return list(self.request("GET", "/pilots"))

    def events(self, since: int = 0) -> list[list[float]]:
        """The persisted engine event log from row `since` (admin only): [time, kind, job, site, vm, value]."""
        return list(self.request("GET", "/events", params={"since": since}))

    def event_log(self, since: int = 0) -> EventLog:
        """The persisted engine event log from row `since` as an `EventLog` (admin only; the columns
        GET /events gives: time, kind, job, site, vm, value), for the metrics of `isthmus.metrics`."""
        log = EventLog()
        for t, kind, job, site, vm, value in self.events(since):
            log.append(float(t), int(kind), int(job), int(site), int(vm), float(value))
        return log
