"""Files for running the manager as a service (docs/deploy.md): the systemd unit, shipped as package data."""

from __future__ import annotations

from importlib import resources

SYSTEMD_UNIT = "isthmus-server.service"
"""The file name of the systemd unit of `isthmus server`, in this package and in /etc/systemd/system."""


def systemd_unit() -> str:
    """The text of the shipped systemd unit of `isthmus server`."""
    return resources.files("isthmus.deploy").joinpath(SYSTEMD_UNIT).read_text(encoding="utf-8")
