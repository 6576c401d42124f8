"""Plain typed data of isthmus: jobs, sites, sets of sites, environments, decisions and events.

Nothing in this package does I/O or reads a clock.
"""

from isthmus.model.decisions import Decision, HoldJob, KillJob, LeaseVms, ReleaseVms, ReserveVms, StartJob, WakeUp
from isthmus.model.environment import Environment, PolicyChoice
from isthmus.model.events import EventKind
from isthmus.model.job import Job, JobKind, PriorityClass, VmRequirements
from isthmus.model.site import Site, SiteKind, SiteSet

__all__ = [
    "Decision",
    "Environment",
    "EventKind",
    "HoldJob",
    "Job",
    "JobKind",
    "KillJob",
    "LeaseVms",
    "PolicyChoice",
    "PriorityClass",
    "ReleaseVms",
    "ReserveVms",
    "Site",
    "SiteKind",
    "SiteSet",
    "StartJob",
    "VmRequirements",
    "WakeUp",
]
