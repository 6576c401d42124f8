"""What became of a decision: a status code, a reason in words and the deciding policy.

Every decision the engine validates yields a `Status` (the Kubernetes scheduler framework's
pattern: a decision is a value with a code, reasons and the name of the plugin that made it).
Refusals are recorded in the event log (kind DECISION, value = code), so "why is my job
pending" and a run's refusal counts are answered from the log alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum


class StatusCode(IntEnum):
    """Outcome of validating one decision."""

    ACCEPTED = 0
    NO_CAPACITY = 1  # not enough free processors (or VMs) on the site
    OVER_BUDGET = 2  # the budget cap cannot pay it
    OUTSIDE_WINDOW = 3  # the site is outside its availability window
    RESERVED = 4  # the resources are reserved for another job
    OVER_LIMIT = 5  # a site's maximum (VMs) or minimum would be passed
    NOT_ALLOWED = 6  # the site is not among those the job's queue may use
    WRONG_STATE = 7  # the job or VM is not in a state the decision applies to
    UNKNOWN_TARGET = 8  # the job, site or VM does not exist
    INVALID = 9  # the decision is malformed (a negative count, ...)
    HELD = 10  # a policy explains why it did not start a job this round
    NOT_MALLEABLE = 11  # a grow or shrink names a job that is not a bag of tasks

    @property
    def label(self) -> str:
        """The lower-case name shown to users, e.g. 'no capacity'."""
        return self.name.lower().replace("_", " ")


@dataclass(frozen=True, slots=True)
class Status:
    """The engine's answer to one decision."""

    code: StatusCode
    reason: str = ""
    policy: str = ""

    @property
    def accepted(self) -> bool:
        """True when the decision was applied."""
        return self.code is StatusCode.ACCEPTED


ACCEPTED = Status(StatusCode.ACCEPTED)
"""The status of an accepted decision that needs no reason."""


class Refused(Exception):  # noqa: N818 - a refusal is an outcome, not an error of the program
    """Raised by a decision kind's validation to refuse it with a code and a reason."""

    def __init__(self, code: StatusCode, reason: str) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason
