"""Typed errors of site backends: what went wrong at a site, in a form the engine can act on.

Every call a backend makes to an external system (a batch system's commands, a cloud's API)
may fail; the failure is normalized at the boundary into one of these classes, as Apache
Libcloud normalizes provider errors, so that the engine and the provisioning policies can tell
"try again later" (transient, timeout) from "try another site" (capacity, quota) and from
"stop and tell the operator" (authentication, invalid request).
"""

from __future__ import annotations


class SiteError(Exception):
    """A call to a site failed. `site` names it; `retry` says whether the same call may succeed later."""

    retry = False

    def __init__(self, message: str, *, site: str = "") -> None:
        super().__init__(message)
        self.site = site
        self.message = message

    def __str__(self) -> str:
        return f"{self.site}: {self.message}" if self.site else self.message


class CapacityError(SiteError):
    """The site has no room now (insufficient capacity, no free nodes): another site may serve."""

    retry = True


class QuotaError(SiteError):
    """An account or instance limit was reached: back off, another site may serve."""

    retry = True


class AuthenticationError(SiteError):
    """Credentials were refused: stop using the site until an operator fixes them."""


class InvalidRequestError(SiteError):
    """The site refused the request itself (bad partition, unknown image): retrying will not help."""


class SiteTimeoutError(SiteError):
    """The site did not answer in time (controller down or overloaded): retry later."""

    retry = True


class TransientError(SiteError):
    """Any other failure that may go away by itself (a dropped connection): retry later."""

    retry = True
