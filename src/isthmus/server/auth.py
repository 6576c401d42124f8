"""Who is making an API request. Tokens are made and hashed by `isthmus.store.tokens`."""

from __future__ import annotations

from dataclasses import dataclass

from isthmus.store.tokens import hash_token, new_token

__all__ = ["Principal", "hash_token", "new_token"]


@dataclass(frozen=True, slots=True)
class Principal:
    """Who made a request: a user (possibly admin) or the pilot of one node."""

    kind: str  # "user" | "pilot"
    user: str | None = None
    admin: bool = False
    node: str | None = None
