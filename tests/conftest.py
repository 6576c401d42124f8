"""Shared by every test folder: `helpers` (jobs, environments and schedule readers for
simulation tests) is importable from tests/."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
