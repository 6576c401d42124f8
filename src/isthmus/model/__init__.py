"""Plain typed data of isthmus: jobs, sites, sets of sites, environments and events (the decisions
policies return, each beside its validation and application, are `isthmus.decisions`).

Nothing in this package does I/O or reads a clock.
"""

from isthmus.model.environment import Environment, PolicyChoice
from isthmus.model.events import EventKind
from isthmus.model.job import Job, JobKind, PriorityClass, VmRequirements
from isthmus.model.site import Site, SiteKind, SiteSet

__all__ = [
    "Environment",
    "EventKind",
    "Job",
    "JobKind",
    "PolicyChoice",
    "PriorityClass",
    "Site",
    "SiteKind",
    "SiteSet",
    "VmRequirements",
]
