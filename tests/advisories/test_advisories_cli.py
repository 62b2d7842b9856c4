"""The advisories CLI end to end: app.build on a real SQLite state dir, publish, then list/show/export."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from advkit import HUB, MIXTRAL, MIXTRAL_SHAS, NOW, ch, commit, publish

from tracker.app import build
from tracker.cli import main
from tracker.settings import load_settings
from tracker.shared.domain import Artifact as A
from tracker.shared.domain import ChangeKind as K

M = MIXTRAL_SHAS


@pytest.fixture
def published() -> None:
    app = build(load_settings())
    try:
        store = app.advisories
        for sha, prev, changes, overrides in [
            (M[1], M[0], (ch(A.CONFIG, K.CHANGED, "model_type", "mistral", "mixtral"),), None),
            (
                M[2],
                M[1],
                (ch(A.CONFIG, K.CHANGED, "output_router_logits", True, False),),
                {
                    "suppress": [
                        {
                            "match": {"key": "output_router_logits"},
                            "reason": "router logits are training-only",
                        }
                    ]
                },
            ),
            (M[3], M[2], (ch(A.CONFIG, K.CHANGED, "max_position_embeddings", 32768, 4096),), None),
        ]:
            publish(
                store,
                repo_id=MIXTRAL,
                commit=commit(sha, prev),
                previous=prev,
                changes=changes,
                estimate_before=None,
                estimate_after=None,
                repo_url=f"{HUB}/{MIXTRAL}",
                overrides=overrides,
                prefix="TRACKER",
                now=NOW,
            )
    finally:
        app.close()


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exc:
        main([*args])
        raise SystemExit(0)
    return int(exc.value.code or 0), capsys.readouterr().out


def test_list_filters_and_json(published: None, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _run(capsys, "advisories", "list", "--json")
    assert code == 0
    rows = json.loads(out)
    assert [(r["id"], r["severity"], r["state"]) for r in rows] == [
        ("x_TRACKER-2026-1", "high", "open"),
        ("x_TRACKER-2026-2", "moderate", "open"),
    ]
    code, out = _run(capsys, "advisories", "list", "--severity", "moderate", "--json")
    assert [r["id"] for r in json.loads(out)] == ["x_TRACKER-2026-2"]
    code, out = _run(capsys, "advisories", "list", "--since", "2026-12-01", "--json")
    assert json.loads(out) == []
    code, out = _run(capsys, "advisories", "list", "--suppressed", "--json")
    assert [(r["key"], r["reason"]) for r in json.loads(out)] == [
        ("output_router_logits", "router logits are training-only")
    ]
    code, _ = _run(capsys, "advisories", "list", "--severity", "urgent")
    assert code == 2


def test_show_and_missing_id(published: None, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _run(capsys, "advisories", "show", "x_TRACKER-2026-1", "--json")
    assert code == 0
    assert json.loads(out)["id"] == "x_TRACKER-2026-1"
    code, out = _run(capsys, "advisories", "show", "x_TRACKER-2026-1")
    assert "mistralai/Mixtral-8x7B-v0.1: config: model_type" in out
    code, _ = _run(capsys, "advisories", "show", "x_TRACKER-2026-9")
    assert code == 3


def test_export_is_byte_deterministic(
    published: None, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    assert _run(capsys, "advisories", "export", str(a))[0] == 0
    assert _run(capsys, "advisories", "export", str(b))[0] == 0
    names = sorted(p.name for p in a.iterdir())
    assert names == ["modified_id.csv", "x_TRACKER-2026-1.json", "x_TRACKER-2026-2.json"]
    for n in names:
        assert (a / n).read_bytes() == (b / n).read_bytes()
    assert (
        (a / "modified_id.csv").read_text()
        == "2026-11-30T09:30:00Z,x_TRACKER-2026-1\n2026-11-30T09:30:00Z,x_TRACKER-2026-2\n"
    )
    text = (a / "x_TRACKER-2026-1.json").read_text()
    assert text.endswith("}\n") and text.startswith('{\n  "affected": [')
