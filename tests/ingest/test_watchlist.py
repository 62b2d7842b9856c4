"""watchlist.yaml: resolution order, every problem reported at once, did-you-mean, safe file edits."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tracker.shared.errors import InvalidRepoIdError, NotWatchedError, WatchlistError
from tracker.watchlist import (
    DEFAULT_TRACKED,
    add_repo,
    load_watchlist,
    parse_interval,
    parse_watchlist,
    remove_repo,
)

YAML = """\
# team watchlist
defaults:
  poll_interval: 10m
  estimate: {lora_rank: 8, train_seq_len: 8192}
rules:
  - match: "deepseek-ai/*"
    poll_interval: 1h
    backfill: 20
  - match: "deepseek-ai/DeepSeek-V3*"
    estimate: {train_seq_len: 32768}
repos:
  - id: deepseek-ai/DeepSeek-V3   # big one
    ref: main
  - id: deepseek-ai/DeepSeek-R1
    poll_interval: 30s
  - id: Qwen/Qwen3-0.6B
    git: /srv/mirrors/qwen3.git
    tracked: [config.json, "*.safetensors"]
    advisories: {suppress: [{match: {artifact: model_card}, reason: noise}]}
  - meta-llama/Llama-2-7b-hf
"""


def test_resolution_defaults_rules_entry() -> None:
    wl = parse_watchlist(yaml.safe_load(YAML))
    v3, r1, qwen, llama = wl.repos
    assert (v3.repo_id, v3.ref, v3.poll_interval_s, v3.backfill) == (
        "deepseek-ai/DeepSeek-V3",
        "main",
        3600,
        20,
    )
    assert v3.estimate == {"lora_rank": 8, "train_seq_len": 32768}
    assert (r1.poll_interval_s, r1.backfill) == (30, 20)
    assert r1.estimate == {"lora_rank": 8, "train_seq_len": 8192}
    assert qwen.git == "/srv/mirrors/qwen3.git" and qwen.tracked == ("config.json", "*.safetensors")
    assert (
        qwen.advisories == {"suppress": [{"match": {"artifact": "model_card"}, "reason": "noise"}]}
        and qwen.backfill is None
    )
    assert (llama.repo_id, llama.poll_interval_s, llama.tracked) == (
        "meta-llama/Llama-2-7b-hf",
        600,
        DEFAULT_TRACKED,
    )
    assert wl.get("Qwen/Qwen3-0.6B") is qwen
    with pytest.raises(NotWatchedError):
        wl.get("x/y")


def test_every_problem_is_reported_at_once_with_did_you_mean() -> None:
    data = {
        "defaults": {"poll_intervall": "10m"},
        "rules": [{"poll_interval": "1h"}, {"match": "a/*", "backfil": 2}],
        "repos": [
            {"id": "acme/../etc"},
            {"id": "acme/ok", "ref": "bad ref", "backfill": 0, "poll_interval": "soon"},
            {"id": "acme/ok2", "tracked": []},
            {"id": "a/b/c"},
            {"id": "acme/dup"},
            {"id": "acme/dup"},
            {"name": "acme/x"},
        ],
        "repo": [],
    }
    with pytest.raises(WatchlistError) as info:
        parse_watchlist(data)
    problems = info.value.problems
    expected = [
        "defaults: unknown key 'poll_intervall' (did you mean 'poll_interval'?)",
        "rules[0]: needs a 'match' glob",
        "rules[1]: unknown key 'backfil' (did you mean 'backfill'?)",
        "repos[0].id: repo id 'acme/../etc'",
        "repos[1].ref: must be a branch, tag or commit name",
        "repos[1].backfill: must be >= 1, got 0",
        "repos[1].poll_interval: poll_interval 'soon' must look like",
        "repos[2].tracked: must be a non-empty list",
        "repos[3].id: repo id 'a/b/c' must be ORG/NAME",
        "repos[5]: acme/dup is listed twice",
        "repos[6]: unknown key 'name'",
        "watchlist: unknown key 'repo' (did you mean 'repos'?)",
    ]
    for want in expected:
        assert any(want in p for p in problems), (want, problems)
    assert len(problems) == len(expected) + 1  # repos[6] also lacks its id
    assert "  - repos[5]: acme/dup is listed twice" in str(info.value)


@pytest.mark.parametrize(
    "bad", ["../x", "a/..", "a/b/../c", "/a/b", "a//b", ".a/b", "a/b.", "a/-b", "a b/c", "a/b/"]
)
def test_repo_id_tricks_are_rejected(bad: str) -> None:
    with pytest.raises(WatchlistError, match="repo id"):
        parse_watchlist({"repos": [{"id": bad}]})


def test_intervals() -> None:
    assert [parse_interval(x) for x in ("30s", "10m", "1h", "2d", 45)] == [
        30,
        600,
        3600,
        172800,
        45,
    ]
    for bad in ("0m", "10", "1w", "", None, True, -5):
        with pytest.raises(ValueError):
            parse_interval(bad)


def test_load_missing_file_and_bad_yaml(tmp_path: Path) -> None:
    assert load_watchlist(tmp_path / "none.yaml").repos == ()
    bad = tmp_path / "bad.yaml"
    bad.write_text("repos: [unclosed\n")
    with pytest.raises(WatchlistError, match="not valid YAML"):
        load_watchlist(bad)


def test_add_and_remove_keep_the_rest_of_the_file(tmp_path: Path) -> None:
    path = tmp_path / "watchlist.yaml"
    path.write_text(YAML)
    wl = add_repo(path, "acme/new", ref="dev", backfill=3, git=None)
    assert wl.get("acme/new").ref == "dev" and wl.get("acme/new").backfill == 3
    text = path.read_text()
    assert text.startswith("# team watchlist\n") and "# big one" in text
    assert "  - id: acme/new\n    ref: dev\n    backfill: 3\n" in text
    with pytest.raises(WatchlistError, match="already"):
        add_repo(path, "acme/new")
    with pytest.raises(InvalidRepoIdError):
        add_repo(path, "acme/../x")
    with pytest.raises(WatchlistError, match="cannot add"):
        add_repo(path, "acme/other", poll_interval="sometimes")
    assert path.read_text() == text  # refused edits leave the file alone
    remove_repo(path, "deepseek-ai/DeepSeek-R1")
    remove_repo(path, "meta-llama/Llama-2-7b-hf")
    wl = load_watchlist(path)
    assert [r.repo_id for r in wl.repos] == [
        "deepseek-ai/DeepSeek-V3",
        "Qwen/Qwen3-0.6B",
        "acme/new",
    ]
    assert wl.get("Qwen/Qwen3-0.6B").advisories == {
        "suppress": [{"match": {"artifact": "model_card"}, "reason": "noise"}]
    }
    assert "# big one" in path.read_text() and "rules:" in path.read_text()
    with pytest.raises(NotWatchedError, match="not in"):
        remove_repo(path, "acme/gone")


def test_add_creates_a_file_and_repos_block(tmp_path: Path) -> None:
    path = tmp_path / "w.yaml"
    add_repo(path, "acme/a")
    assert path.read_text() == "repos:\n  - id: acme/a\n"
    path.write_text("defaults:\n  ref: main\nrepos: []\n")
    add_repo(path, "acme/b", git="https://example.invalid/b.git")
    assert [r.git for r in load_watchlist(path).repos] == ["https://example.invalid/b.git"]


def test_estimate_and_advisory_blocks_are_validated_at_load_time() -> None:
    from tracker.shared.errors import WatchlistError
    from tracker.watchlist import parse_watchlist

    data = {
        "defaults": {"advisories": {"rules": [{"match": {"artifact": "config"}, "severity": "low"}]}},
        "repos": [
            {"id": "acme/x", "estimate": {"train_seq_len": -5, "lora_rnak": 8},
             "advisories": {"rules": [{"match": {"artifact": "confg"}, "severity": "urgent"}]}},
            {"id": "acme/y", "advisories": {"suppress": [{"match": {"key": "text"}, "reason": "noise"}]}},
        ],
    }  # fmt: skip
    with pytest.raises(WatchlistError) as err:
        parse_watchlist(data)
    problems = err.value.problems
    assert "repos[0].estimate.train_seq_len: must be >= 1, got -5" in problems
    assert any("lora_rnak" in p and "did you mean 'lora_rank'" in p for p in problems)
    assert any(p.startswith("repos[0].advisories.rules[0].match.artifact") for p in problems)
    assert any(p.startswith("repos[0].advisories.rules[0].severity") for p in problems)
    assert not any(p.startswith("repos[1]") for p in problems)
    del data["repos"][0]  # type: ignore[attr-defined]
    (repo,) = parse_watchlist(data).repos
    # The repo's own rules/suppressions come before the defaults' (first match wins).
    assert repo.advisories["rules"] == [{"match": {"artifact": "config"}, "severity": "low"}]
    assert repo.advisories["suppress"] == [{"match": {"key": "text"}, "reason": "noise"}]
