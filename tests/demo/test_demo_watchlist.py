"""The top-level watchlist.yaml watches exactly the demo repos and loads with the real loader."""

from __future__ import annotations

from pathlib import Path

from tracker.replica.demo import demo_repo_ids
from tracker.watchlist import load_watchlist

WATCHLIST = Path(__file__).resolve().parents[2] / "watchlist.yaml"


def test_watchlist_is_the_demo() -> None:
    wl = load_watchlist(WATCHLIST)
    assert sorted(r.repo_id for r in wl.repos) == demo_repo_ids()
    by_id = {r.repo_id: r for r in wl.repos}
    assert by_id["deepseek-ai/DeepSeek-R1"].poll_interval_s == 30 * 60
    assert by_id["Qwen/Qwen-7B-Chat"].poll_interval_s == 20 * 60
    assert by_id["meta-llama/Llama-2-7b-hf"].poll_interval_s == 10 * 60
    assert {r.ref for r in wl.repos} == {"main"}
    assert {r.backfill for r in wl.repos} == {None}
