"""Plumbing shared by live sites behind an external system (a batch system, a cloud provider)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from isthmus.backends.api import BatchSystem, SiteWorker
from isthmus.backends.errors import SiteError

log = logging.getLogger("isthmus.backends")


class WorkerThread:
    """A site's worker thread for its blocking calls, made on first use on the running loop
    (mixed into the site backend, before it)."""

    name: str
    _worker: SiteWorker | None = None

    @property
    def worker(self) -> SiteWorker:
        """The site's worker thread."""
        if self._worker is None:
            self._worker = SiteWorker(self.name, asyncio.get_running_loop())
        return self._worker

    def close(self) -> None:
        """Stop the worker thread."""
        if self._worker is not None:
            self._worker.close()


def cancel_quietly(system: BatchSystem | None, ids: Sequence[str], site: str) -> None:
    """Cancel `ids` in `system` at a stop (blocking); a refusal is logged, not raised."""
    if ids and system is not None:
        try:
            system.cancel(list(ids))
        except SiteError as exc:
            log.warning("site %s: could not cancel %s: %s", site, list(ids), exc)
