"""Errors the live manager answers requests with."""

from __future__ import annotations


class RequestError(Exception):
    """A request the manager refuses; `status` is the HTTP status to answer with."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class PersistError(Exception):
    """The manager cannot write its database now; requests that need a write are answered 503
    and retried by their senders, and nothing in memory has moved on (see `Manager.persist`)."""
