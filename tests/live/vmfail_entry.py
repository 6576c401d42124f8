"""The live manager's entry, with the pilot of the first leased VM exiting before it registers:
a VM that never boots (tests/live/test_live_vm_failure.py)."""

import subprocess
import sys

from isthmus.cli.live_entry import app
from isthmus.live import pilots

_real_spawn = pilots.spawn_pilot
_failed: list[str] = []


def _spawn(**kw):  # type: ignore[no-untyped-def]
    if "/vm" in kw["node"] and not _failed:
        _failed.append(kw["node"])
        return subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"], start_new_session=True)
    return _real_spawn(**kw)


pilots.spawn_pilot = _spawn

if __name__ == "__main__":
    app()
