"""The top-level watchlist.yaml watches exactly the demo repos and loads with the real loader."""

from __future__ import annotations

from pathlib import Path
from typing import Any

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


def test_both_demo_watchlists_name_three_transformers_versions() -> None:
    """The top-level and the packaged demo watchlist check remote code against the same three
    releases (every repo inherits `defaults.preflight`)."""
    from tracker.preflight.settings import PreflightSettings
    from tracker.replica.demo import DEMO_DIR

    for path in (WATCHLIST, DEMO_DIR / "watchlist.yaml"):
        for repo in load_watchlist(path).repos:
            versions = PreflightSettings.from_mapping(repo.preflight).transformers
            assert versions == ("4.57.1", "5.1.0", "5.24.0"), (path, repo.repo_id)


def test_the_demo_checks_chatglm2_remote_code_on_the_three_versions(demo_run: Any) -> None:
    """chatglm2-6b's configuration_chatglm.py (the demo's stand-in) imports PretrainedConfig from
    transformers: checked against each version's table, found in all three; but the history holds
    no modeling_chatglm.py or tokenization_chatglm.py, which auto_map names, so it cannot import
    on any of them."""
    app = demo_run.app
    stored = app.preflight.get(
        "THUDM/chatglm2-6b", app.store.repo_state("THUDM/chatglm2-6b").cursor
    )
    assert stored is not None and stored.preflight is not None
    code = stored.preflight.remote_code
    assert code.unchecked == {}
    assert [(v["version"], v["importable"], v["missing"], v["absent"]) for v in code.versions] == [
        (v, False, [], ["modeling_chatglm.py", "tokenization_chatglm.py"])
        for v in ("4.57.1", "5.1.0", "5.24.0")
    ]
    assert code.absent == ("modeling_chatglm.py", "tokenization_chatglm.py")
    assert [(i["module"], i["name"]) for i in code.transformers_imports] == [
        ("transformers", "PretrainedConfig")
    ]


def test_the_demo_marks_exactly_the_repos_whose_first_tree_lacks_auto_map_code() -> None:
    """`unlisted_code` (a first revision's missing `auto_map` code is no finding) is set, in both
    demo watchlists, on exactly the repos whose first demo revision has an `auto_map` naming a
    module the demo tree lacks: the corpus has none of their .py files, the real repos do."""
    import csv
    import json

    from tracker.replica.demo import DEMO_DIR

    lacking = set()
    for directory in sorted((DEMO_DIR / "repos").iterdir()):
        with (directory / "HISTORY.tsv").open() as f:
            rows = list(csv.DictReader(f, delimiter="\t"))
        first = {r["path"]: r["local_file"] for r in rows if r["seq"] == rows[0]["seq"]}
        for name in ("config.json", "tokenizer_config.json"):
            if name not in first:
                continue
            auto_map = json.loads((directory / first[name]).read_text()).get("auto_map") or {}
            modules = {ref.rsplit(".", 1)[0] for ref in auto_map.values() if isinstance(ref, str)}
            if any(f"{m}.py" not in first for m in modules):
                lacking.add(directory.name.replace("__", "/", 1))
    assert lacking == {"deepseek-ai/DeepSeek-R1", "THUDM/chatglm2-6b", "Qwen/Qwen-7B-Chat"}
    for path in (WATCHLIST, DEMO_DIR / "watchlist.yaml"):
        marked = {r.repo_id for r in load_watchlist(path).repos if "unlisted_code" in r.advisories}
        assert marked == lacking, path
