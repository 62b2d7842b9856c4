"""Issue 10, item 1 and the fault-proxy must-show, short form: the installed `tracker poll --once`
reads a demo repo (ibm-granite/granite-3.1-1b-a400m-instruct, real files) through the fault proxy
breaking answers in every mode at once (corrupt bytes with 200, a lying Content-Length, short
bodies, malformed JSON, resets, 5xx, a 429 with Retry-After: 3600, a trickle). After the faults
stop, the store equals a clean run's (files, blobs, diffs, estimates, advisories: nothing built
from a faulty byte) and `tracker verify` passes. Before the integrity check, corrupt and cut
bodies were stored and analysed (in one run 59 wrong file versions, 31 wrong advisories).

Long form (each fault alone, several seeds, two repos): `python -m bench.run netfaults`.
"""

from __future__ import annotations

import pytest

from bench.netfaults import all_at_once, fault_trial, setting
from tracker.replica.faultproxy import Mode

pytestmark = pytest.mark.replica

REPO = ("ibm-granite/granite-3.1-1b-a400m-instruct",)


def test_after_every_fault_stops_the_store_equals_a_clean_run() -> None:
    with setting(REPO) as (workdir, hub, watchlist, reference):
        result = fault_trial("all at once", all_at_once(), 4, workdir, hub, watchlist, reference)
    # the trial really broke answers in the modes that corrupt content
    assert {Mode.CORRUPT, Mode.LYING_LENGTH, Mode.TRICKLE} <= set(result.applied), result
    assert result.faulty_exit == 1  # the revisions it could not verify were not stored: failing
    assert result.faulty_seconds < 60  # no Retry-After slept through, the trickle was cut
    assert result.recovery_polls == 1
    assert result.differs == []
    assert result.equal and result.problems == [] and result.verify_exit == 0
