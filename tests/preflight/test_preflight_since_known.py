"""Where a preflight answer was last had (`Pipeline._since`) costs no store read per revision once
the pipeline has analysed the revision before, and says the same after a restart or where the
previous revision has no stored preflight.

Before `Pipeline._known`, a repo whose LoRA answer is never had (MiMo-7B: a model type with no
module-name table) walked 32 revisions back through the store for every revision analysed
(180 queries, about as long as the rest of its analysis), and a previous revision without a
stored preflight (analysed before the preflight store, or one that overran its budget) stopped
the look back: the answer back was a low "found" instead of a move from the last revision that
had it.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from tracker.app import App, build
from tracker.replica import Replica
from tracker.replica.repos import commit, init_repo
from tracker.settings import load_settings
from tracker.store.preflight import PreflightStore

from .test_preflight_census_cli import CODE, tiny_config
from .test_preflight_pipeline import safetensors

pytestmark = [pytest.mark.replica, pytest.mark.slow]

CONFIGS = Path(__file__).parents[1] / "data" / "configs"
T0 = datetime(2025, 8, 1, tzinfo=UTC)


@contextmanager
def _tracker(tmp_path: Path) -> Iterator[App]:
    with Replica(tmp_path / "hub") as hub:
        app = build(
            load_settings(
                state_dir=tmp_path / "state",
                watchlist=tmp_path / "watchlist.yaml",
                hf_endpoint=hub.url,
                preflight_index_url=(tmp_path / "no-index").as_uri(),
            )
        )
        try:
            yield app
        finally:
            app.close()


class _Counting(PreflightStore):
    """The pipeline's preflight store, counting the stored preflights it reads."""

    reads = 0

    def get(self, *args: Any, **kwargs: Any) -> Any:
        self.reads += 1
        return super().get(*args, **kwargs)


def test_an_answer_never_had_is_not_looked_for_again_at_every_revision(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "hub", "acme/mimo")
    config = (CONFIGS / "XiaomiMiMo__MiMo-7B-Base.json").read_bytes()
    commit(
        repo,
        {"config.json": config, "model.safetensors": safetensors("BF16", 2, 1000)},
        "upload",
        date=T0,
    )
    for i in range(1, 40):
        commit(repo, {"README.md": f"r{i}\n".encode()}, f"r{i}", date=T0 + timedelta(hours=i))
    (tmp_path / "watchlist.yaml").write_text("repos:\n  - id: acme/mimo\n")
    with _tracker(tmp_path) as app:
        pipeline = app.pipeline
        pipeline.preflight = counting = _Counting(app.store.engine)
        report = pipeline.run_cycle()
        assert report.repos[0].error is None and len(report.repos[0].analysed) == 40
        # the second revision reads the first's preflight (it has capacity; LoRA: no earlier
        # revision to walk to); the 38 after it read nothing (it was 1 + up to 32 reads each)
        assert counting.reads == 1
        stored = counting.get("acme/mimo", report.repos[0].analysed[-1].sha)  # type: ignore[arg-type]
        assert stored is not None and stored.preflight is not None
        assert stored.preflight.lora is None and stored.preflight.capacity is not None
        keys = {
            c["key"]
            for a in app.advisories.list_advisories(repo_id="acme/mimo")
            for c in a.record["database_specific"]["changes"]
        }
        assert not {k for k in keys if k.startswith("preflight.")} and keys == {"", "text"}


def _lora_changes(app: App, repo_id: str) -> dict[str, tuple[str, str, Any, Any, str]]:
    out = {}
    for adv in app.advisories.list_advisories(repo_id=repo_id):
        for c in adv.record["database_specific"]["changes"]:
            if c["key"].startswith("preflight.lora."):
                out[adv.introduced[:7]] = (
                    c["kind"],
                    c["severity"],
                    c["before"],
                    c["after"],
                    c["summary"],
                )
    return out


@pytest.mark.parametrize("restart", ["none", "restart", "restart, no stored preflight"])
def test_the_last_revision_with_an_answer_is_the_same_after_a_restart(
    tmp_path: Path, restart: str
) -> None:
    """R1 Qwen3-0.6B (`q_proj`: 28 modules), R2 an unreadable config.json, R3 a README, R4 two
    layers fewer: R4 moves `q_proj` 28 → 26 since R1 (high), whether R4 is analysed in the
    process that analysed R3 (what it knows), in a new one (the store, walked), or in a new one
    where R3 has no stored preflight (it did stop the look back: a low "found")."""
    config = json.loads((CONFIGS / "Qwen__Qwen3-0.6B.json").read_text())
    fewer = {**config, "num_hidden_layers": 26}
    repo = init_repo(tmp_path / "hub", "acme/qwen3")
    steps: list[dict[str, bytes | None]] = [
        {"config.json": json.dumps(config).encode(), "model.safetensors": safetensors("BF16", 2, 1000)},
        {"config.json": b"[" * 200},
        {"README.md": b"hello\n"},
        {"config.json": json.dumps(fewer).encode()},
    ]  # fmt: skip
    (tmp_path / "watchlist.yaml").write_text(
        "repos:\n  - id: acme/qwen3\n    preflight:\n      lora_targets: [q_proj]\n"
    )
    shas = [commit(repo, steps[i], f"r{i + 1}", date=T0 + timedelta(days=i)) for i in range(3)]
    with _tracker(tmp_path) as app:
        app.pipeline.run_cycle()
        if restart == "none":
            shas.append(commit(repo, steps[3], "r4", date=T0 + timedelta(days=3)))
            app.pipeline.run_cycle()
            changes = _lora_changes(app, "acme/qwen3")
    if restart != "none":
        if restart == "restart, no stored preflight":
            with sa.create_engine(f"sqlite:///{tmp_path / 'state' / 'tracker.db'}").begin() as db:
                gone = db.execute(
                    sa.text("DELETE FROM revision_preflight WHERE sha = :sha"), {"sha": shas[2]}
                )
                assert gone.rowcount == 1
        shas.append(commit(repo, steps[3], "r4", date=T0 + timedelta(days=3)))
        with _tracker(tmp_path) as app:
            app.pipeline.run_cycle()
            changes = _lora_changes(app, "acme/qwen3")
    assert changes == {
        shas[3][:7]: (
            "changed",
            "high",
            {"attention.full": 28},
            {"attention.full": 26},
            "`q_proj` now resolves to 26 modules in the full-attention layers (was 28) since "
            f"`{shas[0][:12]}` (unresolved at the previous revision: could not read config.json: "
            "config is not valid JSON: Expecting value: line 1 column 201 (char 200))",
        )
    }


def _tiny(layers: int) -> dict[str, bytes]:
    """The two-layer remote-code model of the census CLI test with `layers` layers: config.json
    and a real safetensors file (q_proj and gate per layer, embedding, output head)."""
    config = tiny_config(layers)
    header: dict[str, object] = {}
    offset = 0
    shapes = {"embed.weight": (32, 16), "lm_head.weight": (32, 16)}
    for i in range(layers):
        shapes |= {f"layers.{i}.q_proj.weight": (32, 16), f"layers.{i}.gate.weight": (4, 16)}
    for name, (rows, cols) in shapes.items():
        header[name] = {
            "dtype": "BF16",
            "shape": [rows, cols],
            "data_offsets": [offset, offset + 2 * rows * cols],
        }
        offset += 2 * rows * cols
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    weights = struct.pack("<Q", len(raw)) + raw + bytes(offset)
    return {"config.json": json.dumps(config).encode(), "model.safetensors": weights}


def test_a_target_the_remote_code_left_unresolved_is_compared_with_the_last_revision_resolving_it(
    tmp_path: Path,
) -> None:
    """R1: all-linear 4 modules (q_proj and gate in 2 layers; the head is left out); R2's code
    builds `gate` by a function it does not show (all-linear unresolved: published, high); R3
    shows it again, with 3 layers: 6 modules, a move from R1's 4 (it was a low "found")."""
    linear = CODE.replace(
        "self.gate = make_gate(config)", "self.gate = nn.Linear(config.hidden_size, 4, bias=False)"
    )
    repo = init_repo(tmp_path / "hub", "acme/tiny")
    steps: list[dict[str, bytes | None]] = [
        {**_tiny(2), "modeling_tiny.py": linear.encode()},
        {"modeling_tiny.py": CODE.encode()},
        {**_tiny(3), "modeling_tiny.py": linear.encode()},
    ]
    shas = [commit(repo, s, f"r{i + 1}", date=T0 + timedelta(days=i)) for i, s in enumerate(steps)]
    (tmp_path / "watchlist.yaml").write_text(
        "repos:\n  - id: acme/tiny\n    preflight:\n      lora_targets: [all-linear]\n"
    )
    with _tracker(tmp_path) as app:
        app.pipeline.run_cycle()
        changes = _lora_changes(app, "acme/tiny")
    unresolved = "not understood: `gate` (built by make_gate(), which the code does not show)"
    assert changes == {
        shas[1][:7]: (
            "changed",
            "high",
            {"other": 4},
            f"cannot resolve: {unresolved}",
            f"`all-linear`: 4 modules → cannot resolve: {unresolved}",
        ),
        shas[2][:7]: (
            "changed",
            "high",
            {"other": 4},
            {"other": 6},
            "`all-linear` now resolves to 6 modules in the rest of the model (was 4) since "
            f"`{shas[0][:12]}` (unresolved at the previous revision: {unresolved})",
        ),
    }
