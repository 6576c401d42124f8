"""API tokens: random secrets handed out once, stored only as SHA-256 hashes."""

from __future__ import annotations

import hashlib
import secrets


def new_token() -> str:
    """A fresh random token (URL-safe, 256 bits)."""
    return "ist_" + secrets.token_urlsafe(32)


def hash_token(token: str) -> str:
    """The stored form of a token (tokens are random, so a fast hash is enough)."""
    return hashlib.sha256(token.encode()).hexdigest()
