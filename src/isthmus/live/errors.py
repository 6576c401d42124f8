"""Errors the live manager answers requests with."""

from __future__ import annotations


class RequestError(Exception):
    """A request the manager refuses; `status` is the HTTP status to answer with."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
