"""Recorded responses of cloud APIs, replayed under Libcloud's drivers (as Libcloud's own tests
replay theirs): every HTTP request a driver makes is answered from a route table of fixture
files (tests/backends/fixtures/<driver>/) and kept, so a test asserts what was sent. The
`recorded` fixture (conftest.py) puts a table in place of every Libcloud connection. The
fixtures follow each API's reference documents and Libcloud's own test fixtures of that API."""

from __future__ import annotations

import json
import re
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests
from requests.structures import CaseInsensitiveDict

FIXTURES = Path(__file__).parent / "fixtures"


@dataclass
class Sent:
    """One request a driver made."""

    method: str
    host: str
    path: str
    query: dict[str, list[str]]
    body: str

    def json(self) -> Any:
        """The request body as JSON."""
        return json.loads(self.body)

    def param(self, name: str) -> str | None:
        """One value of an EC2-style form parameter (in the query or the urlencoded body)."""
        values = self.query.get(name) or urllib.parse.parse_qs(self.body).get(name)
        return values[0] if values else None


@dataclass
class Route:
    method: str
    path: re.Pattern[str]
    status: int
    body: str
    headers: dict[str, str]
    times: int | None  # answers left (None: every time)
    action: str  # an EC2-style Action parameter it answers ("": any)


@dataclass
class Recorded:
    """The route table of one test and the requests it answered."""

    driver: str
    routes: list[Route] = field(default_factory=list)
    sent: list[Sent] = field(default_factory=list)

    def on(
        self,
        method: str,
        path: str,
        fixture: str = "",
        *,
        status: int = 200,
        body: str = "",
        headers: dict[str, str] | None = None,
        times: int | None = None,
        action: str = "",
    ) -> None:
        """Answer `method` on a path matching `path` (a regular expression, whole path; with
        `action`, only requests of that Action parameter) with the fixture file `fixture` of this
        driver (or `body`), `times` times (default: always); a route given later wins."""
        text = (FIXTURES / self.driver / fixture).read_text() if fixture else body
        kind = "application/xml" if fixture.endswith(".xml") else "application/json"
        route = Route(method, re.compile(path), status, text, {"content-type": kind, **(headers or {})}, times, action)
        self.routes.insert(0, route)

    def answer(self, method: str, url: str, body: Any) -> requests.Response:
        """The recorded answer to one request (AssertionError for a request nothing answers)."""
        u = urllib.parse.urlsplit(url)
        text = body.decode() if isinstance(body, bytes) else (body or "")
        if not isinstance(text, str):  # a form as a dict
            text = urllib.parse.urlencode(text)
        sent = Sent(method.upper(), u.hostname or "", u.path, urllib.parse.parse_qs(u.query), text)
        self.sent.append(sent)
        for route in self.routes:
            if route.action and sent.param("Action") != route.action:
                continue
            if route.method == method.upper() and route.path.fullmatch(u.path) and route.times != 0:
                if route.times is not None:
                    route.times -= 1
                response = requests.Response()
                response.status_code = route.status
                response._content = route.body.encode()
                response.headers = CaseInsensitiveDict(route.headers)
                response.reason = requests.status_codes._codes.get(route.status, ("",))[0].upper()  # type: ignore[attr-defined]
                response.url = url
                response.encoding = "utf-8"
                return response
        raise AssertionError(f"no recorded answer to {method} {url}")

    def requests(self, method: str, path: str, action: str = "") -> list[Sent]:
        """The requests sent with `method` to a path matching `path` (and of `action`)."""
        return [
            s
            for s in self.sent
            if s.method == method and re.fullmatch(path, s.path) and (not action or s.param("Action") == action)
        ]
