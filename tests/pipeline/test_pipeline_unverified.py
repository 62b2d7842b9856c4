"""A revision whose estimate cannot be vouched for: its numbers are stored and shown, the keys the
reader did not understand are named, and no advisory says a card fits or no longer fits."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tracker.app import build
from tracker.replica import Replica
from tracker.replica.repos import commit, init_repo
from tracker.settings import load_settings
from tracker.shared.domain import RepoId, VerificationStatus

CONFIGS = Path(__file__).resolve().parents[1] / "data" / "configs"
UNKNOWN_KEYS = ("expert_ffn_width", "experts_routed_per_token", "n_expert_slots")


def unseen_moe(layers: int) -> bytes:
    """Stand-in: Qwen3-30B-A3B's real config under a model_type no reader knows, with its expert
    keys renamed to names no reader understands and its MoE layer switch dropped."""
    config = json.loads((CONFIGS / "Qwen__Qwen3-30B-A3B.json").read_text())
    config |= {"model_type": "acme_moe", "architectures": ["AcmeMoeForCausalLM"]}
    config["n_expert_slots"] = config.pop("num_experts")
    config["expert_ffn_width"] = config.pop("moe_intermediate_size")
    config["experts_routed_per_token"] = config.pop("num_experts_per_tok")
    del config["decoder_sparse_step"]
    config["num_hidden_layers"] = layers
    return json.dumps(config, indent=2).encode()


@pytest.mark.replica
def test_unverified_estimate_names_unknown_keys_and_no_advisory_gives_a_fit_verdict(
    tmp_path: Path,
) -> None:
    repo = init_repo(tmp_path / "hub", "acme/unseen-moe")
    day = datetime(2025, 6, 1, tzinfo=UTC)
    commit(repo, {"config.json": unseen_moe(4)}, "upload", date=day)
    # 4 → 96 layers: were the estimate vouched for, LoRA and serving would stop fitting cards.
    commit(repo, {"config.json": unseen_moe(96)}, "deeper", date=day.replace(day=2))
    watchlist = tmp_path / "watchlist.yaml"
    watchlist.write_text("repos:\n  - id: acme/unseen-moe\n")
    with Replica(tmp_path / "hub") as hub:
        settings = load_settings(
            state_dir=tmp_path / "state", watchlist=watchlist, hf_endpoint=hub.url
        )
        app = build(settings)
        try:
            report = app.pipeline.run_cycle()
            (cycle,) = report.repos
            assert cycle.error is None and len(cycle.analysed) == 2
            head = cycle.analysed[-1].sha
            stored = app.analysis.estimate(RepoId("acme/unseen-moe"), head)
            assert stored is not None and stored.estimate is not None
            v = stored.estimate.verification
            assert v.status is VerificationStatus.UNVERIFIED
            assert v.unknown_keys == UNKNOWN_KEYS
            assert ", ".join(UNKNOWN_KEYS) in v.reasons[0]
            # the numbers are still there (read as dense: the reader could not size the experts)
            assert stored.estimate.params.total > 0 and stored.estimate.cards

            advisories = app.advisories.list_advisories(repo_id=RepoId("acme/unseen-moe"))
            assert advisories, "the size change still makes an estimate advisory"
            estimate_groups = [a for a in advisories if a.group == "estimate"]
            assert estimate_groups
            for adv in advisories:
                record = adv.record
                text = json.dumps(record)
                assert "fits" not in text and "no longer fit" not in text
                changes = record["database_specific"]["changes"]
                changes += record["database_specific"]["estimate_changes"]
                assert not [c for c in changes if c["kind"] in ("fit_lost", "fit_gained")]
                assert not [c for c in changes if str(c["key"]).startswith("cards.")]
            details = estimate_groups[0].record["details"]
            assert "is **unverified**" in details
            assert "n_expert_slots" in details and "no card-fit verdict" in details
            after = estimate_groups[0].record["database_specific"]["estimate"]["after"]
            assert after["verification"]["status"] == "unverified"
        finally:
            app.close()


NEMOTRON_SUPER = (
    Path(__file__).resolve().parents[3]
    / "shared/corpus/models/nvidia__NVIDIA-Nemotron-3-Super-120B-A12B-FP8/config.json"
)


@pytest.mark.replica
def test_a_config_with_infinity_is_estimated_by_the_pipeline(tmp_path: Path) -> None:
    # The corpus's own config.json: "time_step_limit": [0.0, Infinity], as transformers reads it.
    data = NEMOTRON_SUPER.read_bytes()
    assert b"Infinity" in data
    repo = init_repo(tmp_path / "hub", "acme/nemotron-super")
    commit(repo, {"config.json": data}, "upload", date=datetime(2025, 6, 1, tzinfo=UTC))
    watchlist = tmp_path / "watchlist.yaml"
    watchlist.write_text("repos:\n  - id: acme/nemotron-super\n")
    with Replica(tmp_path / "hub") as hub:
        settings = load_settings(
            state_dir=tmp_path / "state", watchlist=watchlist, hf_endpoint=hub.url
        )
        app = build(settings)
        try:
            (cycle,) = app.pipeline.run_cycle().repos
            assert cycle.error is None and len(cycle.analysed) == 1
            stored = app.analysis.estimate(RepoId("acme/nemotron-super"), cycle.analysed[0].sha)
            assert stored is not None and stored.estimate is not None, stored
            # transformers 5.24.0's meta-device count of NemotronHForCausalLM for this config
            assert stored.estimate.params.total == 120_668_687_360
            # The diff reads it too: a change of the Infinity is a config change, never "could
            # not read config.json".
            capped = {**json.loads(data), "time_step_limit": [0.0, 1e9]}
            commit(repo, {"config.json": json.dumps(capped, indent=2).encode()}, "cap")
            first = cycle.analysed[0].sha
            (cycle,) = app.pipeline.run_cycle().repos
            assert cycle.error is None and len(cycle.analysed) == 1
            rid = RepoId("acme/nemotron-super")
            diff = app.analysis.diff(rid, first, cycle.analysed[0].sha)
            assert diff is not None
            assert [(c.artifact.value, c.kind.value, c.key, c.before, c.after) for c in diff.changes
                    if c.artifact.value == "config"] == [
                ("config", "changed", "time_step_limit", [0, "Infinity"], [0, 1000000000])
            ]  # fmt: skip
        finally:
            app.close()
