"""`tracker diff REPO A B [--kind K] [--json]` against a real SQLite store filled through the Store API."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime, timedelta

import pytest
from diffkit import history

from tracker.app import build
from tracker.cli import main
from tracker.settings import load_settings
from tracker.shared.domain import Commit, RepoId, Sha, TreeEntry
from tracker.store.values import FileVersion

REPO = RepoId("mistralai/Mixtral-8x7B-v0.1")


@pytest.fixture
def shas() -> list[str]:
    """The Mixtral config history stored as 8 revisions; returns their shas, oldest first."""
    app = build(load_settings())
    try:
        app.store.ensure_repo(REPO, source_kind="hub", url=None, ref="main")
        previous: Sha | None = None
        out = []
        start = datetime(2023, 12, 11, tzinfo=UTC)
        for i, (sha, subject, files) in enumerate(history("mistralai__Mixtral-8x7B-v0.1")):
            tree = [TreeEntry(p, hashlib.sha1(b).hexdigest(), len(b)) for p, b in files.items()]
            commit = Commit(
                Sha(sha),
                (previous,) if previous else (),
                start + timedelta(hours=i),
                subject,
                subject,
                ("a",),
            )
            app.store.store_revision(
                REPO,
                commit,
                tree,
                {p: FileVersion.content(b) for p, b in files.items()},
                previous=previous,
            )
            previous = Sha(sha)
            out.append(sha)
        return out
    finally:
        app.close()


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(["diff", *args])
        raise SystemExit(0)
    captured = capsys.readouterr()
    return int(exc.value.code or 0), captured.out, captured.err


def test_diff_json_between_short_shas(shas: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, str(REPO), shas[5][:8], shas[6][:8], "--json")
    assert code == 0
    doc = json.loads(out)
    assert (doc["before"], doc["after"], doc["count"]) == (shas[5], shas[6], 1)
    (change,) = doc["changes"]
    assert (
        change["artifact"],
        change["kind"],
        change["key"],
        change["before"],
        change["after"],
    ) == ("config", "changed", "sliding_window", 4096, 32768)


def test_diff_text_with_head_refs(shas: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, str(REPO), "HEAD~1", "HEAD")
    assert code == 0
    assert out == (
        f"{REPO} {shas[6][:12]} → {shas[7][:12]}: 1 change\n\n"
        "config (1 change)\n"
        "  ~ changed config.json sliding_window: sliding_window changed: 32768 → null\n"
    )


def test_kind_filter_and_errors(shas: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, str(REPO), shas[0], shas[1], "--json", "--kind", "model_card")
    assert (code, json.loads(out)["count"]) == (0, 0)
    code, _, err = _run(capsys, str(REPO), shas[0], shas[1], "--kind", "nonsense")
    assert code == 2 and "'nonsense' is not one of" in err
    code, _, err = _run(capsys, str(REPO), "deadbeef", "HEAD")
    assert code == 3
    code, _, err = _run(capsys, "not-a-repo", "HEAD", "HEAD")
    assert code == 2
