"""API tokens: random secrets handed out once, stored only as SHA-256 hashes."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass


def new_token() -> str:
    """A fresh random token (URL-safe, 256 bits)."""
    return "ist_" + secrets.token_urlsafe(32)


def hash_token(token: str) -> str:
    """The stored form of a token (tokens are random, so a fast hash is enough)."""
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class Principal:
    """Who made a request: a user (possibly admin) or the pilot of one node."""

    kind: str  # "user" | "pilot"
    user: str | None = None
    admin: bool = False
    node: str | None = None
