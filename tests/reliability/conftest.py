"""The reliability tests reuse the diff, replica and worker test helpers (diffkit, helpers_replica, workkit)."""

from __future__ import annotations

import sys
from pathlib import Path

_TESTS = Path(__file__).resolve().parents[1]
for _folder in ("diff", "replica", "workers"):
    if str(_TESTS / _folder) not in sys.path:
        sys.path.insert(0, str(_TESTS / _folder))
