"""publish(): records valid against the OSV schema, exactly once, lifecycle (fixed, withdrawn), suppressions."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from advkit import HUB, MIXTRAL, MIXTRAL_SHAS, NOW, R1, R1_SHAS, ch, commit, make_store, publish

from tracker.advisories import service
from tracker.advisories.schema import validate_record
from tracker.advisories.service import withdraw_rewritten
from tracker.preflight.delta import preflight_delta
from tracker.preflight.report import Preflight, run_preflight
from tracker.preflight.settings import PreflightSettings
from tracker.shared.domain import (
    AdvisoryState,
    SafetensorsHeader,
    Severity,
    TensorInfo,
    WithdrawnBy,
)
from tracker.shared.domain import Artifact as A
from tracker.shared.domain import ChangeKind as K
from tracker.shared.errors import AdvisoryError, ConfigError, StoreError
from tracker.store.advisories import AdvisoryStore

M = MIXTRAL_SHAS
URL = f"{HUB}/{MIXTRAL}"
SHA5 = "41c1fe324a57f555d8df74b85a1353a583746532"
MIXTRAL_02 = (
    ch(A.CONFIG, K.ADDED, "attention_dropout", None, 0.0),
    ch(A.CONFIG, K.CHANGED, "model_type", "mistral", "mixtral"),
    ch(A.CONFIG, K.ADDED, "output_router_logits", None, True),
    ch(A.CONFIG, K.ADDED, "router_aux_loss_coef", None, 0.02),
    ch(A.CONFIG, K.ADDED, "sliding_window", None, 4096),
    ch(A.CONFIG, K.CHANGED, "transformers_version", "4.34.0.dev0", "4.36.0.dev0"),
)


def _pub(store: AdvisoryStore, sha, prev, changes, *, repo=MIXTRAL, now=NOW, overrides=None, **kw):
    return publish(
        store,
        repo_id=repo,
        commit=commit(sha, prev),
        previous=prev,
        changes=changes,
        estimate_before=kw.get("before"),
        estimate_after=kw.get("after"),
        repo_url=f"{HUB}/{repo}",
        overrides=overrides,
        prefix="TRACKER",
        now=now,
    )


def test_first_revision_with_no_changes_gets_no_advisory(store: AdvisoryStore) -> None:
    assert _pub(store, M[0], None, ()) == []
    assert store.counts()["advisories"] == 0
    assert store.counts()["advisory_revisions"] == 1


def test_one_advisory_per_group_with_the_highest_severity(store: AdvisoryStore) -> None:
    advs = _pub(store, M[1], M[0], MIXTRAL_02)
    assert [(a.id, a.group, a.severity) for a in advs] == [
        ("x_TRACKER-2026-1", "config", Severity.HIGH)
    ]
    rec = advs[0].record
    validate_record(rec)
    assert rec["affected"][0]["ranges"] == [
        {"type": "GIT", "repo": URL, "events": [{"introduced": M[1]}]}
    ]
    assert rec["affected"][0]["versions"] == [M[1]]
    assert rec["affected"][0]["package"] == {
        "ecosystem": "GIT",
        "name": URL,
        "purl": f"pkg:huggingface/{MIXTRAL}",
    }
    assert rec["references"][0] == {"type": "INTRODUCED", "url": f"{URL}/commit/{M[1]}"}
    assert rec["published"] == rec["modified"] == "2026-11-30T09:30:00Z"
    sev = {c["key"]: c["severity"] for c in rec["database_specific"]["changes"]}
    assert sev == {
        "attention_dropout": "low",
        "model_type": "high",
        "output_router_logits": "low",
        "router_aux_loss_coef": "low",
        "sliding_window": "high",  # a local-attention window is a computation switch
        "transformers_version": "low",
    }
    assert rec["summary"].startswith("mistralai/Mixtral-8x7B-v0.1: config changed (6 changes: ")


def test_groups_are_split_by_artifact(store: AdvisoryStore) -> None:
    changes = (
        ch(A.CHAT_TEMPLATE, K.RENDERED, "tool_call", "a", "b", file="tokenizer_config.json"),
        ch(A.CHAT_TEMPLATE, K.RENDERED, "multi_turn", "c", "d", file="tokenizer_config.json"),
        ch(A.CHAT_TEMPLATE, K.RENDERED, "system", "e", "f", file="tokenizer_config.json"),
        ch(
            A.SPECIAL_TOKENS,
            K.CHANGED,
            "eos_token",
            "<｜end▁of▁sentence｜>",
            "<|EOT|>",
            file="tokenizer_config.json",
        ),
        ch(A.ESTIMATE, K.CHANGED, "memory_gb.kv_cache", 10.0, 12.0, file=""),
    )
    advs = _pub(store, R1_SHAS[1], R1_SHAS[0], changes, repo=R1)
    assert [(a.group, a.severity) for a in advs] == [
        ("special_tokens", Severity.HIGH),
        ("chat_template", Severity.HIGH),
    ]
    assert (
        advs[1].record["summary"]
        == "deepseek-ai/DeepSeek-R1: chat template renders differently (3 conversations)"
    )
    # the estimate delta rides along in each advisory, and makes no advisory of its own
    for a in advs:
        assert [c["key"] for c in a.record["database_specific"]["estimate_changes"]] == [
            "memory_gb.kv_cache"
        ]


def test_estimate_group_only_for_fit_or_parameter_changes(store: AdvisoryStore) -> None:
    only_memory = (ch(A.ESTIMATE, K.CHANGED, "memory_gb.lora", 30.0, 31.0, file=""),)
    assert _pub(store, M[1], M[0], only_memory) == []
    fit = (ch(A.ESTIMATE, K.FIT_LOST, "cards.H100-80GB.lora", True, False, file=""),)
    advs = _pub(store, M[2], M[1], fit)
    assert [(a.group, a.severity) for a in advs] == [("estimate", Severity.HIGH)]


def test_publishing_twice_returns_the_same_advisories_and_writes_nothing(
    store: AdvisoryStore,
) -> None:
    first = _pub(store, M[1], M[0], MIXTRAL_02)
    counts = store.counts()
    again = _pub(store, M[1], M[0], MIXTRAL_02, now=NOW + timedelta(hours=1))
    assert again == first
    assert store.counts() == counts
    assert store.counts()["advisory_counters"] == 1
    # the next new advisory takes the next number: nothing was allocated by the re-publish
    nxt = _pub(store, M[2], M[1], (ch(A.CONFIG, K.CHANGED, "output_router_logits", True, False),))
    assert [a.id for a in nxt] == ["x_TRACKER-2026-2"]


def test_crash_after_publish_before_mark_analysed_then_restart(db_url: str) -> None:
    store = make_store(db_url)

    def pipeline_step() -> None:
        _pub(store, M[1], M[0], MIXTRAL_02)
        raise RuntimeError("killed before mark_analysed")

    with pytest.raises(RuntimeError):
        pipeline_step()
    store.engine.dispose()
    restarted = make_store(db_url)  # a new process: fresh engine and store on the same file
    advs = _pub(restarted, M[1], M[0], MIXTRAL_02, now=NOW + timedelta(minutes=5))
    assert [a.id for a in advs] == ["x_TRACKER-2026-1"]
    assert restarted.counts()["advisories"] == 1
    assert [a.id for a in restarted.list_advisories()] == ["x_TRACKER-2026-1"]
    restarted.engine.dispose()


def test_crash_inside_the_transaction_leaves_nothing(
    store: AdvisoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    def boom(*a: object, **k: object) -> None:
        raise RuntimeError("killed while writing")

    monkeypatch.setattr("tracker.store.advisories.AdvisoryTx.mark_revision", boom)
    with pytest.raises(RuntimeError):
        _pub(store, M[1], M[0], MIXTRAL_02)
    assert store.counts() == dict.fromkeys(store.counts(), 0)
    monkeypatch.undo()
    advs = _pub(store, M[1], M[0], MIXTRAL_02)
    assert [a.id for a in advs] == ["x_TRACKER-2026-1"]
    assert store.counts()["advisories"] == 1


def test_invalid_record_raises_and_writes_nothing(
    store: AdvisoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = service.build_record

    def short_sha(**kw: object) -> dict:
        rec = real(**kw)  # type: ignore[arg-type]
        rec["affected"][0]["versions"] = [M[1][:12]]
        rec["affected"][0]["ranges"][0]["events"] = [{"introduced": M[1][:12]}]
        return rec

    monkeypatch.setattr(service, "build_record", short_sha)
    with pytest.raises(AdvisoryError, match=r"full-length commit hashes|full 40-hex"):
        _pub(store, M[1], M[0], MIXTRAL_02)
    assert store.counts() == dict.fromkeys(store.counts(), 0)


def test_real_mixtral_history_extends_versions_fixes_on_restore(store: AdvisoryStore) -> None:
    later = [NOW + timedelta(hours=i) for i in range(8)]
    sw = "sliding_window"
    history = [
        (M[0], None, ()),
        (M[1], M[0], MIXTRAL_02),
        (M[2], M[1], (ch(A.CONFIG, K.CHANGED, "output_router_logits", True, False),)),
        (M[3], M[2], (ch(A.CONFIG, K.REMOVED, sw, 4096, None),)),
        (
            "41c1fe324a57f555d8df74b85a1353a583746532",
            M[3],
            (ch(A.CONFIG, K.ADDED, sw, None, None),),
        ),
        (
            "ccf7a6502058c82841f1be65cf7e35764be35318",
            "41c1fe324a57f555d8df74b85a1353a583746532",
            (ch(A.CONFIG, K.CHANGED, sw, None, 4096),),
        ),
    ]
    made = {}
    for i, (sha, prev, changes) in enumerate(history):
        made[sha] = [a.id for a in _pub(store, sha, prev, changes, now=later[i])]
    assert made == {
        M[0]: [],
        M[1]: ["x_TRACKER-2026-1"],
        M[2]: ["x_TRACKER-2026-2"],
        M[3]: ["x_TRACKER-2026-3"],  # a partial restore of -1 is still a change
        "41c1fe324a57f555d8df74b85a1353a583746532": ["x_TRACKER-2026-4"],
        "ccf7a6502058c82841f1be65cf7e35764be35318": [],  # restores 4096: fixes -3, makes nothing new
    }
    adv3 = store.get("x_TRACKER-2026-3")
    assert adv3 is not None
    validate_record(adv3.record)
    assert adv3.record["affected"][0]["ranges"][0]["events"] == [
        {"introduced": M[3]},
        {"fixed": "ccf7a6502058c82841f1be65cf7e35764be35318"},
    ]
    assert adv3.record["affected"][0]["versions"] == [
        M[3],
        "41c1fe324a57f555d8df74b85a1353a583746532",
    ]
    assert adv3.record["modified"] == "2026-11-30T14:30:00Z"
    assert adv3.record["published"] == "2026-11-30T12:30:00Z"
    adv1 = store.get("x_TRACKER-2026-1")
    assert adv1 is not None
    assert "fixed" not in str(adv1.record["affected"][0]["ranges"])
    assert adv1.record["affected"][0]["versions"] == [
        M[1],
        M[2],
        M[3],
        "41c1fe324a57f555d8df74b85a1353a583746532",
        "ccf7a6502058c82841f1be65cf7e35764be35318",
    ]
    # queries by commit: exactly the advisories whose versions contain it
    assert [a.id for a in store.affecting_commit(M[2])] == ["x_TRACKER-2026-1", "x_TRACKER-2026-2"]
    assert [a.id for a in store.affecting_commit("ccf7a6502058c82841f1be65cf7e35764be35318")] == [
        "x_TRACKER-2026-1",
        "x_TRACKER-2026-2",
        "x_TRACKER-2026-4",
    ]
    assert store.affecting_commit(M[0]) == []


def test_chat_template_revert_produces_fixed(store: AdvisoryStore) -> None:
    s0, s1, s2 = R1_SHAS
    t = (
        ch(A.CHAT_TEMPLATE, K.RENDERED, "tool_call", "<think>\n", "", file="tokenizer_config.json"),
    )
    back = (
        ch(A.CHAT_TEMPLATE, K.RENDERED, "tool_call", "", "<think>\n", file="tokenizer_config.json"),
    )
    [adv] = _pub(store, s1, s0, t, repo=R1)
    assert _pub(store, s2, s1, back, repo=R1, now=NOW + timedelta(days=1)) == []
    fixed = store.get(adv.id)
    assert fixed is not None
    validate_record(fixed.record)
    assert fixed.record["affected"][0]["ranges"][0]["events"][-1] == {"fixed": s2}
    assert fixed.record["affected"][0]["versions"] == [s1]
    assert {"type": "FIX", "url": f"{HUB}/{R1}/commit/{s2}"} in fixed.record["references"]
    assert fixed.record["modified"] == "2026-12-01T09:30:00Z"
    assert store.affecting_commit(s2) == []


def test_force_push_dropping_the_introducing_commit_withdraws(store: AdvisoryStore) -> None:
    [adv] = _pub(store, M[1], M[0], MIXTRAL_02)
    [other] = _pub(
        store, M[2], M[1], (ch(A.CONFIG, K.CHANGED, "output_router_logits", True, False),)
    )
    later = NOW + timedelta(days=2)
    out = withdraw_rewritten(store, MIXTRAL, [M[2]], later)
    assert [a.id for a in out] == [other.id]
    assert withdraw_rewritten(store, MIXTRAL, [M[2]], later) == []  # idempotent
    w = store.get(other.id)
    assert w is not None
    validate_record(w.record)
    assert w.record["withdrawn"] == w.record["modified"] == "2026-12-02T09:30:00Z"
    assert store.get(adv.id).record.get("withdrawn") is None  # type: ignore[union-attr]
    assert store.counts()["advisories"] == 2  # nothing deleted
    assert [a.id for a in store.affecting_commit(M[2])] == [adv.id]


def test_a_rewrite_withdrawal_is_recorded_as_such_and_undone_by_that_alone(
    store: AdvisoryStore,
) -> None:
    """Restoring reads `withdrawn_by`, never the human-readable reason: a reworded (or translated)
    reason still restores; an advisory withdrawn for no recorded reason never comes back."""
    import sqlalchemy as sa

    _pub(store, M[1], M[0], MIXTRAL_02)
    [other] = _pub(
        store, M[2], M[1], (ch(A.CONFIG, K.CHANGED, "output_router_logits", True, False),)
    )
    later = NOW + timedelta(days=2)
    withdraw_rewritten(store, MIXTRAL, [M[2]], later)
    with store.transaction() as tx:
        stored = tx.get(other.id)
    assert stored is not None
    assert (stored.state, stored.withdrawn_by) == (AdvisoryState.WITHDRAWN, WithdrawnBy.REWRITE)
    # the reason is for people: rewording it changes nothing
    with store.engine.begin() as conn:
        conn.execute(
            sa.text("UPDATE advisories SET record = replace(record, :a, :b) WHERE id = :id"),
            {"a": "introducing commit", "b": "Einführungs-Commit", "id": other.id},
        )
    back = service.restore_revived(store, MIXTRAL, [M[0], M[1], M[2]], later + timedelta(hours=1))
    assert [a.id for a in back] == [other.id]
    with store.transaction() as tx:
        stored = tx.get(other.id)
    assert stored is not None
    assert (stored.state, stored.withdrawn_by) == (AdvisoryState.OPEN, None)
    assert "withdrawn" not in stored.advisory.record

    # withdrawn, but not by a rewrite (no withdrawn_by): the commit being live restores nothing
    withdraw_rewritten(store, MIXTRAL, [M[2]], later + timedelta(hours=2))
    with store.engine.begin() as conn:
        conn.execute(
            sa.text("UPDATE advisories SET withdrawn_by = NULL WHERE id = :id"), {"id": other.id}
        )
    assert (
        service.restore_revived(store, MIXTRAL, [M[0], M[1], M[2]], later + timedelta(hours=3))
        == []
    )
    assert store.get(other.id).record["withdrawn"] == "2026-12-02T11:30:00Z"  # type: ignore[union-attr]


def test_withdrawn_by_goes_with_the_withdrawn_state_only(store: AdvisoryStore) -> None:
    [adv] = _pub(store, M[1], M[0], MIXTRAL_02)
    wrong = "withdrawn_by goes with state withdrawn only"
    with pytest.raises(StoreError, match=wrong), store.transaction() as tx:
        tx.update(
            adv,
            state=AdvisoryState.OPEN,
            pending=[],
            expect=AdvisoryState.OPEN,
            withdrawn_by=WithdrawnBy.REWRITE,
        )
    with pytest.raises(StoreError, match=wrong), store.transaction() as tx:
        tx.update(adv, state=AdvisoryState.WITHDRAWN, pending=[], expect=AdvisoryState.OPEN)


def test_suppressed_changes_are_recorded_not_published(store: AdvisoryStore) -> None:
    overrides = {
        "suppress": [
            {
                "match": {"artifact": "config", "key": "transformers_version"},
                "reason": "bookkeeping",
            }
        ],
        "rules": [
            {
                "match": {"key": "sliding_window"},
                "severity": "critical",
                "rationale": "we rely on it",
            }
        ],
    }
    [adv] = _pub(store, M[1], M[0], MIXTRAL_02, overrides=overrides)
    assert adv.severity is Severity.CRITICAL
    db = adv.record["database_specific"]
    assert [c["key"] for c in db["changes"]] == [
        "attention_dropout",
        "model_type",
        "output_router_logits",
        "router_aux_loss_coef",
        "sliding_window",
    ]
    assert [(c["key"], c["suppressed"]) for c in db["suppressed"]] == [
        ("transformers_version", "bookkeeping")
    ]
    only = (ch(A.CONFIG, K.CHANGED, "transformers_version", "4.36.0.dev0", "4.37.0"),)
    assert _pub(store, M[2], M[1], only, overrides=overrides) == []
    recorded = store.suppressed(repo_id=MIXTRAL)
    assert [(s.sha, s.change["key"], s.reason, s.severity) for s in recorded] == [
        (M[1], "transformers_version", "bookkeeping", Severity.LOW),
        (M[2], "transformers_version", "bookkeeping", Severity.LOW),
    ]


def test_invalid_overrides_are_a_config_error(store: AdvisoryStore) -> None:
    with pytest.raises(ConfigError):
        _pub(store, M[1], M[0], MIXTRAL_02, overrides={"rules": [{"severity": "urgent"}]})
    assert store.counts()["advisory_revisions"] == 0


@pytest.mark.postgres
def test_exactly_once_and_lifecycle_on_postgres(fresh_pg: str) -> None:
    import sqlalchemy as sa

    store = make_store(fresh_pg)
    try:
        [a] = _pub(store, M[1], M[0], MIXTRAL_02)
        assert _pub(store, M[1], M[0], MIXTRAL_02) == [a]
        restarted = AdvisoryStore(sa.create_engine(fresh_pg))
        assert _pub(restarted, M[1], M[0], MIXTRAL_02) == [a]
        restarted.engine.dispose()
        [b] = _pub(
            store, M[2], M[1], (ch(A.CONFIG, K.CHANGED, "output_router_logits", True, False),)
        )
        back = (ch(A.CONFIG, K.CHANGED, "output_router_logits", False, True),)
        assert _pub(store, M[3], M[2], back) == []
        assert store.get(b.id).record["affected"][0]["ranges"][0]["events"][-1] == {"fixed": M[3]}  # type: ignore[union-attr]
        assert [x.id for x in store.affecting_commit(M[2])] == [a.id, b.id]
        assert store.counts()["advisories"] == 2
    finally:
        store.engine.dispose()


def test_weight_manifest_advisory_stored_under_the_old_attribution_is_fixed(
    store: AdvisoryStore,
) -> None:
    """An advisory the previous tracker stored with its manifest-level changes attributed to the
    index file (a repo without one) is fixed by a later revision whose changes name the shard."""
    old_file, new_file = "model.safetensors.index.json", "model.safetensors"
    f32, bf16 = {"F32": 218}, {"BF16": 218}
    retype = (
        ch(A.WEIGHTS, K.CHANGED, "dtypes", f32, bf16, file=old_file),
        ch(A.WEIGHTS, K.CHANGED, "total_bytes", 5338513408, 2669256704, file=old_file),
    )
    [adv] = _pub(store, M[1], M[0], retype)
    with store.transaction() as tx:
        [stored] = tx.in_state(MIXTRAL, AdvisoryState.OPEN)
    assert {(p["file"], p["key"]) for p in stored.pending} == {
        (old_file, "dtypes"),
        (old_file, "total_bytes"),
    }
    back = (
        ch(A.WEIGHTS, K.CHANGED, "dtypes", bf16, f32, file=new_file),
        ch(A.WEIGHTS, K.CHANGED, "total_bytes", 2669256704, 5338513408, file=new_file),
    )
    assert _pub(store, M[2], M[1], back, now=NOW + timedelta(days=1)) == []
    fixed = store.get(adv.id)
    assert fixed is not None
    assert fixed.record["affected"][0]["ranges"][0]["events"][-1] == {"fixed": M[2]}
    with store.transaction() as tx:
        assert tx.in_state(MIXTRAL, AdvisoryState.OPEN) == []


def test_a_tensor_change_in_another_shard_is_not_the_same_place(store: AdvisoryStore) -> None:
    """Only manifest-level keys ignore the file: a tensor key names its shard."""
    name = "model.layers.0.mlp.weight"
    [adv] = _pub(
        store, M[1], M[0], (ch(A.WEIGHTS, K.RETYPED, name, "F32", "BF16", file="a.safetensors"),)
    )
    other = (ch(A.WEIGHTS, K.RETYPED, name, "BF16", "F32", file="b.safetensors"),)
    assert [a.id for a in _pub(store, M[2], M[1], other, now=NOW + timedelta(days=1))] == [
        "x_TRACKER-2026-2"
    ]
    still = store.get(adv.id)
    assert (
        still is not None and "fixed" not in still.record["affected"][0]["ranges"][0]["events"][-1]
    )


def _preflight(config: bytes | None = None, *, bf16: int = 0) -> Preflight:
    """A revision's preflight with `config` (None: no config.json) and a safetensors header of
    `bf16` BF16 parameters (0: no safetensors), asked about `q_proj`."""
    files = {} if config is None else {"config.json": config}
    headers = {}
    if bf16:
        info = TensorInfo("BF16", (bf16,), 2 * bf16)
        headers = {"model.safetensors": SafetensorsHeader({"model.embed_tokens.weight": info})}
    settings = PreflightSettings(lora_targets=("q_proj",))
    return run_preflight(files=files, headers=headers, tree=(), tables={}, settings=settings)


def test_undoing_a_low_answer_found_is_published_at_its_own_severity(store: AdvisoryStore) -> None:
    """A first config.json makes a low "answer found" advisory (`q_proj`: 28 modules); the next
    revision deletes the config, the high loss of that answer. The loss undoes the low advisory's
    change exactly, so it was absorbed by that advisory's fix: no advisory at all, only a "fixed"
    low one. Now it fixes the low advisory and is published (as a change, not as a fix). The
    other way round, a moderate loss (the safetensors gone) undone by a low find, the find is
    still absorbed by the fix."""
    configs = Path(__file__).parents[1] / "data" / "configs"
    config = (configs / "Qwen__Qwen3-0.6B.json").read_bytes()
    none, known = _preflight(), _preflight(config)
    found, lost = preflight_delta(none, known), preflight_delta(known, none)
    assert [(c.kind, c.after) for c in found] == [(K.ADDED, {"attention.full": 28})]
    [low] = _pub(store, M[1], M[0], found)
    assert low.severity is Severity.LOW
    [high] = _pub(store, M[2], M[1], lost, now=NOW + timedelta(hours=1))
    assert (high.severity, high.record["database_specific"]["changes"][0]["summary"]) == (
        Severity.HIGH,
        "`q_proj`: 28 modules → cannot resolve: no config.json at this revision",
    )
    assert "**Kind: a change with no evidence that it fixes or breaks something**" in str(
        high.record["details"]
    )
    fixed = store.get(low.id)
    assert fixed is not None
    assert fixed.record["affected"][0]["ranges"][0]["events"][-1] == {"fixed": M[2]}

    weights = _preflight(bf16=10**9)
    gone = preflight_delta(weights, none)
    [moderate] = _pub(store, M[3], M[2], gone, now=NOW + timedelta(hours=2))
    assert moderate.severity is Severity.MODERATE
    back = preflight_delta(none, weights)
    assert [c.kind for c in back] == [K.ADDED]
    assert _pub(store, SHA5, M[3], back, now=NOW + timedelta(hours=3)) == []
    again = store.get(moderate.id)
    assert again is not None
    assert again.record["affected"][0]["ranges"][0]["events"][-1] == {"fixed": SHA5}
