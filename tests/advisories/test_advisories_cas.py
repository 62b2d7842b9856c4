"""Issue 26, item 3: lifecycle transitions are compare-and-set on PostgreSQL.

Under READ COMMITTED a transaction reads a row before another process commits its change to it.
Before: a poller that had read an advisory as open while another one marked it fixed raised
`AdvisoryError: '…' is not open` (a plain error: `poll --once` exited 1), and a write derived
from a stale read could overwrite another writer's transition. Now `AdvisoryTx.update` writes
only while the stored state is the one the caller read (else AdvisoryConflictError), and
publishing retries a conflict, reading what the other writer committed (a second "fixed" of the
same revision is a no-op)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from advkit import HUB, NOW, R1, R1_SHAS, ch, commit, make_store, publish

from tracker.shared.domain import AdvisoryState, WithdrawnBy
from tracker.shared.domain import Artifact as A
from tracker.shared.domain import ChangeKind as K
from tracker.store.advisories import AdvisoryConflictError, AdvisoryStore
from tracker.store.advisories.queries import AdvisoryTx

pytestmark = pytest.mark.postgres
S0, S1, S2 = R1_SHAS
T = (ch(A.CHAT_TEMPLATE, K.RENDERED, "tool_call", "<think>\n", "", file="tokenizer_config.json"),)
BACK = (
    ch(A.CHAT_TEMPLATE, K.RENDERED, "tool_call", "", "<think>\n", file="tokenizer_config.json"),
)


def _pub(store: AdvisoryStore, sha: str, prev: str, changes: Any, days: int) -> list[Any]:
    return publish(
        store, repo_id=R1, commit=commit(sha, prev), previous=prev, changes=changes,
        estimate_before=None, estimate_after=None, repo_url=f"{HUB}/{R1}", overrides=None,
        prefix="TRACKER", now=NOW + timedelta(days=days),
    )  # fmt: skip


@pytest.fixture
def stores(fresh_pg: str) -> Iterator[tuple[AdvisoryStore, AdvisoryStore]]:
    """Two advisory stores on one PostgreSQL database: two processes' connections."""
    one, two = make_store(fresh_pg), make_store(fresh_pg)
    yield one, two
    one.engine.dispose()
    two.engine.dispose()


def test_a_write_from_a_stale_read_is_a_conflict_not_an_overwrite(
    stores: tuple[AdvisoryStore, AdvisoryStore],
) -> None:
    one, two = stores
    [adv] = _pub(one, S1, S0, T, 0)
    with pytest.raises(AdvisoryConflictError, match="is no longer open"), one.transaction() as tx:
        stored = tx.get(adv.id)
        assert stored is not None and stored.state is AdvisoryState.OPEN
        assert _pub(two, S2, S1, BACK, 1) == []  # the other process fixes it and commits
        tx.update(
            stored.advisory,
            state=AdvisoryState.WITHDRAWN,
            pending=[],
            expect=stored.state,
            withdrawn_by=WithdrawnBy.REWRITE,
        )
    after = one.get(adv.id)
    assert after is not None
    assert after.record["affected"][0]["ranges"][0]["events"] == [  # type: ignore[index]
        {"introduced": S1},
        {"fixed": S2},
    ]
    assert "withdrawn" not in after.record


def test_a_fix_another_poller_commits_meanwhile_is_retried_into_a_no_op(
    stores: tuple[AdvisoryStore, AdvisoryStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    one, two = stores
    [adv] = _pub(one, S1, S0, T, 0)
    read = AdvisoryTx.get
    raced: list[str] = []

    def get_while_another_fixes(self: AdvisoryTx, advisory_id: str) -> Any:
        if not raced:  # the first read of this poller: the other one publishes the fix first
            raced.append(advisory_id)
            monkeypatch.setattr(AdvisoryTx, "get", read)
            assert _pub(two, S2, S1, BACK, 1) == []
        return read(self, advisory_id)

    monkeypatch.setattr(AdvisoryTx, "get", get_while_another_fixes)
    assert _pub(one, S2, S1, BACK, 1) == []  # before: AdvisoryError "… is not open"
    assert raced == [adv.id]
    fixed = one.get(adv.id)
    assert fixed is not None
    assert fixed.record["affected"][0]["ranges"][0]["events"] == [  # type: ignore[index]
        {"introduced": S1},
        {"fixed": S2},
    ]
    assert [r for r in fixed.record["references"] if r["type"] == "FIX"] == [  # type: ignore[index,union-attr,attr-defined]
        {"type": "FIX", "url": f"{HUB}/{R1}/commit/{S2}"}
    ]
