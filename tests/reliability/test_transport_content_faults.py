"""Issue 26, item 1: a fault of the transport that looks like content is never stored as content.

The installed `tracker poll --once` reads a demo repo (ibm-granite/granite-3.1-1b-a400m-instruct,
its real files and history; the whole demo is `make soak`'s `python -m bench.run contentfaults`)
through the fault proxy answering every 3rd file download
(and, for the pending case, every one) with: a `Content-Length` of 100 MB on the true body, an
80 MB body, a gzip body that decodes to 100 MB (the file cap is 64 MB; the tree says each file is
a few kB), or a `404` with `X-Error-Code: EntryNotFound` for a file the tree lists. Then the faults
stop and it polls again.

Before, each was recorded as "could not read config.json: OversizedArtifactError" (or
EntryNotFoundError) and published, `poll --once` exited 0, `tracker verify` said "all match", and
the clean poll repaired nothing: the store differed from a clean run's in its file versions,
diffs and advisories. Now every such read is read again; what persists leaves the revision pending
(not stored, the repo failing with the reason, `poll --once` exit 1), and the store after the
clean poll equals a clean run's.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bench.netfaults import content_faults, fault_trial, setting
from tracker.replica import Replica

pytestmark = pytest.mark.replica

Setting = tuple[Path, Replica, Path, dict[str, Any]]
NAMES = list(content_faults(3))
REPOS = ("ibm-granite/granite-3.1-1b-a400m-instruct",)


@pytest.fixture(scope="module")
def world() -> Iterator[Setting]:
    with setting(REPOS) as s:
        yield s


@pytest.mark.parametrize("name", NAMES)
def test_every_third_download_faulted_then_a_clean_poll_equals_a_clean_run(
    world: Setting, name: str
) -> None:
    workdir, hub, watchlist, reference = world
    r = fault_trial(name, content_faults(3)[name], 1, workdir, hub, watchlist, reference)
    assert r.differs == [] and r.equal, r  # no "could not read" a fault made, no advisory of one
    assert sum(r.applied.values()) >= 3, r  # the 3rd, 6th, 9th... download of the history
    assert r.faulty_exit == 0, r  # each faulted read was read again: nothing left pending
    assert r.problems == [] and r.verify_exit == 0 and r.recovery_polls == 1


@pytest.mark.parametrize("name", [NAMES[0], NAMES[3]])
def test_a_fault_on_every_download_leaves_the_revisions_pending(world: Setting, name: str) -> None:
    """The Content-Length and the 404 (the 80 MB and gzip bodies take the same path:
    `make soak` runs all four this way over the whole demo)."""
    workdir, hub, watchlist, reference = world
    r = fault_trial(
        name, content_faults(1)[name], 1, workdir, hub, watchlist, reference, inspect=True
    )
    assert r.faulty_exit == 1
    assert sorted(r.pending) == sorted(REPOS), r
    for why in r.pending.values():
        assert "integrity check failed 3 times: " in why, why
        if name.startswith("404"):
            assert "not found, but the tree lists it" in why, why
        else:
            assert "the answer is longer than the tree's " in why, why
    assert r.verify_faulty_exit == 0 and r.verify_faulty.endswith(": all match\n"), r
    assert r.differs == [] and r.equal and r.verify_exit == 0 and r.recovery_polls == 1
