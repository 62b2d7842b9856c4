"""Fixtures for the replica tests: a replica root, the `acme/llama` repo, a running Replica."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers_replica import make_llama

from tracker.replica import Replica


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "replica"
    path.mkdir()
    return path


@pytest.fixture
def llama(root: Path) -> dict[str, Any]:
    return make_llama(root)


@pytest.fixture
def hub(root: Path) -> Iterator[Replica]:
    with Replica(root) as replica:
        yield replica


@pytest.fixture
def cache_dir(tmp_path: Path) -> Path:
    return tmp_path / "hf-cache"
