"""Issue 10, items 2 and 6, through the installed `tracker` against the Hub replica.

Each poll runs under a 1.5 GiB address-space limit. Before the fix, the 900-byte alias bomb in the
README's front matter was expanded (4.7 GB, 31 s), and the config nested 900 levels deep raised
RecursionError in analysis, leaving its revision pending for ever; a 60 MB config cost 2.9 GB.
Now each is a recorded "could not read", the revisions are analysed and the repo is OK.

Real files: openai/gpt-oss-20b's config.json and generation_config.json, Llama 4 Maverick's README
front matter (../shared/corpus); the hostile versions are those files with the bomb put in.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hostile import MODELS
from reliakit import GiB, tracker

from tracker.replica import Replica
from tracker.replica.repos import commit, init_repo

pytestmark = pytest.mark.replica
T0 = datetime(2025, 3, 1, tzinfo=UTC)
GPT_OSS = MODELS / "openai__gpt-oss-20b"
README = MODELS / "meta-llama__Llama-4-Maverick-17B-128E-Instruct" / "README.frontmatter.md"


def billion_laughs() -> bytes:
    doc = 'lol: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    prev = "a"
    for name in "bcdefghi":
        doc += f"{name}: &{name} [" + ",".join(["*" + prev] * 9) + "]\n"
        prev = name
    return b"---\n" + doc.encode() + b"---\n# card\n"


def wide_config() -> bytes:
    """gpt-oss-20b's config with 20 million empty arrays added: 60 MB, under the 64 MB fetch cap."""
    config = json.loads((GPT_OSS / "config.json").read_text())
    return json.dumps(config)[:-1].encode() + b', "pad": [' + b"[]," * 20_000_000 + b"[]]}"


@pytest.fixture(scope="module")
def bombs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Replica, list[str]]]:
    tmp = tmp_path_factory.mktemp("bombs")
    repo = init_repo(tmp / "hub", "acme/bombs")
    config = json.loads((GPT_OSS / "config.json").read_text())
    good = {
        "config.json": (GPT_OSS / "config.json").read_bytes(),
        "generation_config.json": (GPT_OSS / "generation_config.json").read_bytes(),
        "README.md": README.read_bytes() + b"\n# gpt-oss\n",
    }
    deep = dict(config, quantization_config=json.loads("[" * 900 + "]" * 900))
    wide = wide_config()
    shas = [
        commit(repo, good, "upload", date=T0),
        commit(repo, {"README.md": billion_laughs()}, "card", date=T0 + timedelta(hours=1)),
        commit(repo, {"config.json": json.dumps(deep).encode()}, "deep", date=T0 + timedelta(hours=2)),
        commit(repo, {"config.json": wide}, "wide", date=T0 + timedelta(hours=3)),
    ]  # fmt: skip
    (tmp / "watchlist.yaml").write_text("repos:\n  - id: acme/bombs\n")
    with Replica(tmp / "hub") as hub:
        yield tmp, hub, shas


def test_hostile_card_and_configs_are_recorded_could_not_read_and_the_repo_stays_ok(
    bombs: tuple[Path, Replica, list[str]],
) -> None:
    tmp, hub, shas = bombs
    state = tmp / "state"
    poll = tracker(state, hub.url, "poll", "--once", "--json", memory_limit=3 * GiB // 2)
    assert poll.returncode == 0, poll.stderr[-2000:]
    (report,) = json.loads(poll.stdout)
    assert [a["sha"] for a in report["analysed"]] == shas, (report, poll.stderr[-3000:])
    assert report["analysis_error"] is None

    (row,) = tracker(state, hub.url, "watch", "list", "--json").json()
    assert (row["status"], row["revisions"], row["last_error"]) == ("ok", 4, None)

    def unreadable(a: str, b: str) -> list[str]:
        out = tracker(state, hub.url, "diff", "acme/bombs", a, b, "--json")
        assert out.returncode == 0, out.stderr
        return sorted(c["summary"] for c in out.json()["changes"] if c["kind"] == "unreadable")

    assert unreadable(shas[0], shas[1]) == [
        "could not read README.md: YAML front matter aliases expand to more than 50,000 values"
    ]
    assert unreadable(shas[1], shas[2]) == [
        "could not read config.json: JSON nested deeper than 64 levels"
    ]
    wide = len(wide_config())
    assert unreadable(shas[2], shas[3]) == [
        f"could not read config.json: {wide:,} bytes, over 16,777,216"
    ]
    summaries = [
        a["summary"] for a in tracker(state, hub.url, "advisories", "list", "--json").json()
    ]
    assert any("could not read README.md: YAML front matter aliases expand" in s for s in summaries)
    assert sum("could not read config.json" in s for s in summaries) == 2


def test_preflight_reads_auto_map_and_index_files_within_the_bounds() -> None:
    """Preflight read config.json (for `auto_map`) and index files with a plain `json.loads`:
    the wide config's empty arrays were all built (about 1.3 GB for the 60 MB one; under the poll's
    1.5 GiB limit the MemoryError was caught as "preflight failed"). Now through the bounded
    loader: refused at the node bound, nothing built."""
    import tracemalloc

    from tracker.estimate.checkpoint import index_total_size as _total_size
    from tracker.preflight.imports import auto_map_modules

    config = json.loads((GPT_OSS / "config.json").read_text())
    wide = json.dumps(config)[:-1].encode() + b', "pad": [' + b"[]," * 2_000_000 + b"[]]}"
    index = b'{"metadata": {"pad": [' + b"[]," * 2_000_000 + b'[]]}, "weight_map": {}}'
    tracemalloc.start()
    try:
        assert auto_map_modules({"config.json": wide}) == []
        assert _total_size({"model.safetensors.index.json": index}) is None
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 * 2**20, peak  # the 6 MB inputs' own copies at most; before: ~130 MiB
