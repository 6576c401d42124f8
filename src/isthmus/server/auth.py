"""Who is making an API request. Tokens are made and hashed by `isthmus.store.tokens`.

`Auth` holds the FastAPI dependencies every router declares its callers with: `user` (any user
token), `admin` (the admin's) and `pilot` (a pilot's token, for the /pilot endpoints).
"""

import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated

from fastapi import Depends, Header, HTTPException

from isthmus.store.tokens import hash_token, new_token

if TYPE_CHECKING:
    from isthmus.live.manager import Manager

__all__ = ["Auth", "Principal", "hash_token", "new_token"]


@dataclass(frozen=True, slots=True)
class Principal:
    """Who made a request: a user (possibly admin) or the pilot of one node."""

    kind: str  # "user" | "pilot"
    user: str | None = None
    admin: bool = False
    node: str | None = None


Dependency = Callable[..., Awaitable[Principal]]


class Auth:
    """The bearer-token checks of `manager`'s API, as FastAPI dependencies.

    A missing, malformed, unknown or expired token answers 401; a pilot token on a user's
    endpoint, or a user token on a pilot's, 403; a user token on an admin endpoint, 403.
    Tokens found are cached: user tokens 5 s at most (never past their expiry), pilot tokens
    until the manager deletes any pilot token (a pilot replaced or retired), so that the
    pilots' polls and reports do not read the database for their token each time.
    """

    def __init__(self, manager: "Manager") -> None:
        self.manager = manager
        # hash -> (principal, expiry, pilot-token generation)
        self._cache: dict[str, tuple[Principal, float, int]] = {}
        self.hint = (
            "the isthmus CLI sends ISTHMUS_TOKEN, or the token in the file ISTHMUS_TOKEN_FILE names "
            f"(the admin token is in {manager.state_dir.absolute() / 'admin.token'}; "
            "'isthmus token create USER' makes user tokens)"
        )
        # The dependencies are `async def`: FastAPI runs plain `def` dependencies in a thread
        # pool, a round trip to another thread for every request (a third of a submission's cost).

        async def user_of(p: Annotated[Principal, Depends(self.principal)]) -> Principal:
            if p.kind != "user":
                raise HTTPException(403, "pilot tokens may only use the /pilot endpoints")
            return p

        async def admin_of(p: Annotated[Principal, Depends(user_of)]) -> Principal:
            if not p.admin:
                raise HTTPException(403, "this needs the admin token")
            return p

        async def pilot_of(p: Annotated[Principal, Depends(self.principal)]) -> Principal:
            if p.kind != "pilot" or p.node is None:
                raise HTTPException(403, "only pilots may use the /pilot endpoints")
            return p

        #: a user's token (the admin's included)
        self.user: Dependency = user_of
        #: the admin's token
        self.admin: Dependency = admin_of
        #: a pilot's token (its node is the principal's `node`)
        self.pilot: Dependency = pilot_of

    def forget(self) -> None:
        """Drop every cached token (a revoked token is refused at once, not after the cache's 5 s)."""
        self._cache.clear()

    async def principal(self, authorization: Annotated[str | None, Header()] = None) -> Principal:
        """Who the `Authorization: Bearer <token>` header names; 401 when nobody."""
        manager = self.manager
        if not authorization:
            raise HTTPException(
                401,
                f"missing token: send 'Authorization: Bearer <token>'; {self.hint}",
                headers={"WWW-Authenticate": "Bearer"},
            )
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise HTTPException(
                401, "malformed Authorization header: expected 'Bearer <token>'", headers={"WWW-Authenticate": "Bearer"}
            )
        h = hash_token(token.strip())
        hit = self._cache.get(h)
        if hit is not None and hit[1] > time.monotonic() and hit[2] == manager.token_generation:
            return hit[0]
        found = manager.store.lookup_token(h)
        if found is None:
            self._cache.pop(h, None)
            raise HTTPException(
                401,
                f"invalid token: this manager did not issue it; {self.hint}",
                headers={"WWW-Authenticate": "Bearer"},
            )
        user, kind, node, admin, expires = found
        if expires is not None and expires <= time.time():
            raise HTTPException(
                401,
                f"token expired at {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(expires))}; "
                "ask the admin for a new one ('isthmus token create USER')",
                headers={"WWW-Authenticate": "Bearer"},
            )
        p = Principal(kind=kind, user=user, admin=admin, node=node)
        if len(self._cache) > 10000:
            self._cache.clear()
        if kind == "user":
            # cached 5 s at most, and never past the token's expiry
            ttl = 5.0 if expires is None else min(5.0, expires - time.time())
            self._cache[h] = (p, time.monotonic() + ttl, manager.token_generation)
        else:
            self._cache[h] = (p, math.inf, manager.token_generation)
        return p
