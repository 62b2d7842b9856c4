"""The reliability tests reuse the diff, replica, worker and ingest test helpers (diffkit,
helpers_replica, workkit, ggufkit)."""

from __future__ import annotations

import sys
from pathlib import Path

_TESTS = Path(__file__).resolve().parents[1]
for _folder in ("diff", "replica", "workers", "ingest"):
    if str(_TESTS / _folder) not in sys.path:
        sys.path.insert(0, str(_TESTS / _folder))
