"""Pure lifecycle and schema checks: pending digests, fix/extend/withdraw on records, OSV git rules."""

from __future__ import annotations

import copy
from dataclasses import replace

import pytest
from advkit import MIXTRAL, MIXTRAL_SHAS, NOW, ch

from tracker.advisories.classify import classify
from tracker.advisories.groups import Subject, group_changes
from tracker.advisories.lifecycle import (
    PendingChange,
    add_version,
    advance,
    cured,
    initial_pending,
    is_open,
    mark_fixed,
    removed_fixes,
    reopen,
    withdraw,
)
from tracker.advisories.osv import build_record
from tracker.advisories.schema import SCHEMA_VERSION, osv_schema, validate_record
from tracker.shared.domain import Artifact as A
from tracker.shared.domain import ChangeKind as K
from tracker.shared.domain import Sha
from tracker.shared.errors import AdvisoryError

M = MIXTRAL_SHAS
URL = "http://127.0.0.1:1/mistralai/Mixtral-8x7B-v0.1"


def _record() -> dict:
    [group] = group_changes([classify(ch(A.CONFIG, K.CHANGED, "model_type", "mistral", "mixtral"))])
    return build_record(
        advisory_id="x_TRACKER-2026-1",
        subject=Subject(MIXTRAL, URL, M[1], M[0], None, None),
        group=group,
        estimate_changes=(),
        now=NOW,
    )


def test_pending_fixes_only_when_every_change_is_restored() -> None:
    changes = [ch(A.CONFIG, K.CHANGED, "a", 1, 2), ch(A.CONFIG, K.ADDED, "b", None, 5)]
    pending = initial_pending(changes)
    step = advance(pending, [ch(A.CONFIG, K.CHANGED, "a", 2, 1)])
    assert (step.fixed, step.restoring) == (False, frozenset({0}))
    step = advance(
        step.pending, [ch(A.CONFIG, K.CHANGED, "x", 0, 1), ch(A.CONFIG, K.REMOVED, "b", 5, None)]
    )
    assert (step.fixed, step.restoring) == (True, frozenset({1}))


def _entry(artifact: str, key: str, before: str, now: str) -> PendingChange:
    return PendingChange(artifact, "f.json", key, before, now, "after")


def test_effect_gone_by_findings_or_by_renders_and_never_otherwise() -> None:
    arch = _entry("config", "architectures", "BloomModel", "BloomForCausalLM")
    finding = _entry("consistency", "architecture-class-unknown:architectures", "none", "none")
    assert cured([arch, finding]) == (True, "findings")
    assert cured([arch, replace(finding, current="still")]) == (False, "")
    assert cured([arch]) == (False, "")  # no finding: the value itself must be back
    elsewhere = _entry("consistency", "token-id-out-of-vocab:eos_token_id", "none", "none")
    assert cured([arch, elsewhere]) == (False, "")  # a finding about another key decides nothing
    source = _entry("chat_template", "source", "T1", "T3")
    render = _entry("chat_template", "system_user", "R1", "R1")
    assert cured([source, render]) == (True, "rendered")
    assert cured([source, replace(render, current="R2")]) == (False, "")
    assert cured([source]) == (False, "")  # a source change that rendered the same: text decides
    assert cured([render]) == (True, "")


def test_restoring_from_a_third_value_fixes_but_is_not_absorbed() -> None:
    pending = initial_pending([ch(A.CONFIG, K.CHANGED, "a", 1, 2)])
    step = advance(pending, [ch(A.CONFIG, K.CHANGED, "a", 2, 3)])
    assert (step.fixed, step.restoring) == (False, frozenset())
    step = advance(step.pending, [ch(A.CONFIG, K.CHANGED, "a", 3, 1)])
    assert (step.fixed, step.restoring) == (True, frozenset())


def test_unreadable_neither_restores_nor_touches() -> None:
    pending = initial_pending([ch(A.CONFIG, K.CHANGED, "a", 1, 2)])
    step = advance(pending, [ch(A.CONFIG, K.UNREADABLE, "a", None, None)])
    assert step.pending == pending
    assert not step.fixed


def test_record_lifecycle_operations_keep_the_record_valid() -> None:
    rec = _record()
    validate_record(rec)
    assert rec["schema_version"] == SCHEMA_VERSION
    later = NOW.replace(hour=12)
    ext = add_version(rec, M[2], later)
    assert ext["affected"][0]["versions"] == [M[1], M[2]]
    assert ext["modified"] == "2026-11-30T12:30:00Z"
    assert rec["affected"][0]["versions"] == [M[1]]  # inputs are never mutated
    assert add_version(ext, M[2], NOW.replace(hour=13)) == ext
    fixed = mark_fixed(ext, M[3], later)
    validate_record(fixed)
    assert not is_open(fixed)
    with pytest.raises(AdvisoryError):
        mark_fixed(fixed, M[3], later)
    gone = withdraw(fixed, NOW.replace(hour=14), "rewritten")
    validate_record(gone)
    assert gone["withdrawn"] == gone["modified"] == "2026-11-30T14:30:00Z"
    assert withdraw(gone, NOW.replace(hour=15), "again") == gone
    with pytest.raises(AdvisoryError):
        add_version(rec, M[2][:7], later)


def test_every_fix_a_rewrite_removed_is_remembered_with_how_it_was_decided() -> None:
    """Fixed at M[2] (by its renders), M[2] dropped, fixed again at M[3], M[3] dropped: both
    removed fixes are kept, oldest first, each with its own `fixed_how`, so that a push bringing
    M[2] back fixes it there (before: only the last, M[3], was kept). Fixing it at one of them
    takes that one off the list."""
    rec = mark_fixed(_record(), M[2], NOW, how="rendered")
    rec = reopen(rec, NOW, "M[2] dropped")
    assert removed_fixes(rec) == [(M[2], "rendered")]
    rec = mark_fixed(rec, M[3], NOW)
    assert rec["database_specific"]["earlier_fixes"] == [{"fixed": M[2], "how": "rendered"}]
    assert "was_fixed" not in rec["database_specific"]
    rec = reopen(rec, NOW, "M[3] dropped")
    validate_record(rec)
    assert removed_fixes(rec) == [(M[2], "rendered"), (M[3], "")]
    back = mark_fixed(rec, M[2], NOW, how="rendered")
    validate_record(back)
    assert back["database_specific"]["earlier_fixes"] == [{"fixed": M[3], "how": ""}]
    assert back["database_specific"]["fixed_how"] == "rendered"
    assert removed_fixes(back) == [(M[3], "")]


def test_schema_rejects_what_osv_forbids() -> None:
    def bad(mutate) -> str:  # type: ignore[no-untyped-def]
        rec = copy.deepcopy(_record())
        mutate(rec)
        with pytest.raises(AdvisoryError) as exc:
            validate_record(rec)
        return str(exc.value)

    assert "versions" in bad(lambda r: r["affected"][0].pop("versions"))
    assert "full" in bad(
        lambda r: r["affected"][0]["ranges"][0]["events"].__setitem__(0, {"introduced": M[1][:10]})
    )
    assert "repo" in bad(lambda r: r["affected"][0]["ranges"][0].pop("repo"))
    assert "modified" in bad(lambda r: r.__setitem__("modified", "2026-11-30 09:30:00"))
    assert "id" in bad(lambda r: r.__setitem__("id", "TRACKER-2026-1"))
    assert "fixed" in bad(
        lambda r: r["affected"][0]["ranges"][0]["events"].append(
            {"fixed": M[2], "introduced": M[1]}
        )
    )


def test_bundled_schema_is_the_shared_copy() -> None:
    from pathlib import Path

    shared = Path(__file__).parents[3] / "shared" / "osv-schema" / "schema.json"
    if shared.exists():
        import json

        assert osv_schema() == json.loads(shared.read_text())
    assert osv_schema()["title"] == "Open Source Vulnerability"


def test_build_record_rejects_short_shas() -> None:
    [group] = group_changes([classify(ch(A.CONFIG, K.CHANGED, "model_type", "mistral", "mixtral"))])
    with pytest.raises(AdvisoryError):
        build_record(
            advisory_id="x_TRACKER-2026-1",
            subject=Subject(MIXTRAL, URL, Sha(M[1][:12]), None, None, None),
            group=group,
            estimate_changes=(),
            now=NOW,
        )
