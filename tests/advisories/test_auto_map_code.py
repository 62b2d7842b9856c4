"""An `auto_map` entry whose code file the revision does not have is a consistency finding (issue 24,
item 2), through the installed `tracker` polling a Hub replica and the OSV export.

The history is a small git repo built from Llama-2-7b-hf's real config.json with an `auto_map`
naming a configuration module of its own (`configuration_acme.py`, written here): uploaded with
the module, the module deleted, the module restored. The deletion is the finding's evidence (the
previous revision had the file); a later tree that never listed it is not enough, since a partial
copy of a repo (the demo's trees leave out the code the corpus lacks) would make the finding false
of the real revision. A first ingested revision without the module is "broken as first seen"
(issue 24 part 3), unless the watchlist says the repo's trees leave out its code (`unlisted_code`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tracker.replica import Replica
from tracker.replica.repos import commit, init_repo

pytestmark = pytest.mark.replica

TRACKER = Path(sys.executable).with_name("tracker")
MODEL = Path(__file__).resolve().parents[2].parent / "shared" / "corpus" / "models"
CONFIG = json.loads((MODEL / "meta-llama__Llama-2-7b-hf" / "config.json").read_text())
T0 = datetime(2025, 3, 1, 9, 30, tzinfo=UTC)
CODE = (
    b"from transformers import LlamaConfig\n\n\n"
    b"class AcmeConfig(LlamaConfig):\n"
    b'    model_type = "llama"\n'
)
FILES = {
    "config.json": json.dumps(
        {**CONFIG, "auto_map": {"AutoConfig": "configuration_acme.AcmeConfig"}}, indent=2
    ).encode(),
    "configuration_acme.py": CODE,
}
TEXT = (
    "`auto_map` in config.json names configuration_acme.py, which this revision does not have: "
    "loading with trust_remote_code=True fails"
)


def _tracker(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [str(TRACKER), *args], env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[str], list[dict[str, Any]]]:
    root = tmp_path_factory.mktemp("automap")
    repo = init_repo(root / "hub", "acme/remote")
    steps: list[tuple[str, dict[str, bytes | None]]] = [
        ("upload", dict(FILES)),
        ("Delete configuration_acme.py", {"configuration_acme.py": None}),
        ("Restore configuration_acme.py", {"configuration_acme.py": CODE}),
    ]
    shas = [
        commit(repo, files, message, date=T0 + timedelta(days=day))
        for day, (message, files) in enumerate(steps)
    ]
    watchlist = root / "watchlist.yaml"
    watchlist.write_text("repos:\n  - id: acme/remote\n")
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("TRACKER_", "HF_", "HUGGINGFACE_"))
    }
    env |= {
        "TRACKER_STATE_DIR": str(root / "state"),
        "TRACKER_WATCHLIST": str(watchlist),
        "TRACKER_RETRY_ATTEMPTS": "1",
    }
    with Replica(root / "hub") as hub:
        env["TRACKER_HF_ENDPOINT"] = hub.url
        _tracker(env, "poll", "--once")
    _tracker(env, "advisories", "export", str(root / "osv"))
    records = [json.loads(p.read_text()) for p in sorted((root / "osv").glob("*.json"))]
    return shas, sorted(records, key=lambda r: int(r["id"].rsplit("-", 1)[1]))


def test_deleting_the_code_auto_map_names_is_a_finding_and_restoring_it_fixes_it(
    history: tuple[list[str], list[dict[str, Any]]],
) -> None:
    (c0, c1, c2), records = history
    found = [r for r in records if r["database_specific"].get("findings")]
    assert [
        [(f["check"], f["severity"], f["text"]) for f in r["database_specific"]["findings"]]
        for r in found
    ] == [[("auto-map-code-missing", "high", TEXT)]]
    (record,) = found
    # the finding rides on the removal's own advisory (custom-code-removed, moderate), which it
    # makes a regression; the restore fixes it
    assert record["summary"] == (
        "acme/remote: custom code: remote code file configuration_acme.py removed"
    )
    assert record["database_specific"]["severity"] == "moderate"
    assert f"**Kind: a regression**: {TEXT}." in record["details"]
    status = record["details"].split("## Status\n\n", 1)[1]
    assert status.startswith(f"**Fixed** by commit [`{c2[:12]}`]")
    (affected,) = record["affected"]
    (rng,) = affected["ranges"]
    assert rng["events"] == [{"introduced": c1}, {"fixed": c2}]
    assert affected["versions"] == [c1]
    for r in records:  # neither the upload nor the restore is called broken
        assert c0 not in [e.get("introduced") for e in r["affected"][0]["ranges"][0]["events"]]


def _snap(files: dict[str, bytes], sha: str) -> Any:
    import hashlib

    from tracker.shared.domain import RepoId, Sha, Snapshot, TreeEntry

    tree = tuple(
        TreeEntry(p, hashlib.sha1(b).hexdigest(), len(b)) for p, b in sorted(files.items())
    )
    return Snapshot(RepoId("acme/remote"), Sha(sha), tree, dict(files))


def test_a_tree_that_never_had_the_file_is_no_evidence() -> None:
    """The finding is on every revision that lacks the file (`findings_of`); after the first
    revision it is introduced only by a revision whose parent had it, not when an `auto_map`
    entry starts naming a file no revision had (the demo's chatglm2-6b and Qwen-7B-Chat trees).
    On the first ingested revision it is introduced unless the watchlist says the repo's trees
    leave out its code (`unlisted_code`, as the demo's does)."""
    from tracker.advisories.consistency import findings_of, introduced
    from tracker.advisories.effects import Context, Side

    bare = _snap({"config.json": FILES["config.json"]}, "1" * 40)
    full = _snap(FILES, "2" * 40)
    no_map = _snap({"config.json": json.dumps(CONFIG).encode()}, "3" * 40)
    assert [f.text for f in findings_of(Side(bare))] == [TEXT]
    assert [f.text for f in findings_of(Side(full))] == []
    assert [f.text for f in introduced(Context(None, bare))] == [TEXT]  # a first revision's own
    assert introduced(Context(None, bare), first_code=False) == []  # `unlisted_code`
    assert introduced(Context(no_map, bare)) == []
    assert [f.text for f in introduced(Context(full, bare))] == [TEXT]


def test_another_repos_code_and_tokenizer_auto_maps() -> None:
    from tracker.advisories.consistency import findings_of
    from tracker.advisories.effects import Side

    config = {**CONFIG, "auto_map": {"AutoConfig": "org/other--configuration_acme.AcmeConfig"}}
    tokenizer = {"auto_map": {"AutoTokenizer": ["tokenization_acme.AcmeTokenizer", None]}}
    side = Side(
        _snap(
            {
                "config.json": json.dumps(config).encode(),
                "tokenizer_config.json": json.dumps(tokenizer).encode(),
            },
            "4" * 40,
        )
    )
    assert [(f.file, f.text) for f in findings_of(side) if f.key == "auto_map"] == [
        (
            "tokenizer_config.json",
            "`auto_map` in tokenizer_config.json names tokenization_acme.py, which this revision "
            "does not have: loading with trust_remote_code=True fails",
        )
    ]


def test_the_claim_holds_in_transformers(tmp_path: Path) -> None:
    """`trust_remote_code=True` loading fails without the file, and works with it."""
    transformers = pytest.importorskip("transformers")
    (tmp_path / "config.json").write_bytes(FILES["config.json"])
    with pytest.raises(
        OSError, match=r"does not appear to have a file named configuration_acme\.py"
    ):
        transformers.AutoConfig.from_pretrained(str(tmp_path), trust_remote_code=True)
    (tmp_path / "configuration_acme.py").write_bytes(CODE)
    config = transformers.AutoConfig.from_pretrained(str(tmp_path), trust_remote_code=True)
    assert type(config).__name__ == "AcmeConfig"


FIRST = {
    "config.json": json.dumps(
        {
            **CONFIG,
            "auto_map": {
                "AutoConfig": "configuration_acme.AcmeConfig",
                "AutoModelForCausalLM": "modeling_acme.AcmeForCausalLM",
            },
        },
        indent=2,
    ).encode(),
    "modeling_acme.py": b"from configuration_acme import AcmeConfig\n",
}
PARTIAL = "this mirror lists no code files"


@pytest.fixture(scope="module")
def first_seen(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, list[str]], Any]:
    """Two repos with the same history (uploaded without configuration_acme.py, which `auto_map`
    names; the module added the next day), one marked `unlisted_code` in the watchlist; one
    `tracker poll --once`, then the export."""
    root = tmp_path_factory.mktemp("firstseen")
    shas: dict[str, list[str]] = {}
    for rid in ("acme/first", "acme/partial"):
        repo = init_repo(root / "hub", rid)
        shas[rid] = [
            commit(repo, FIRST, "upload", date=T0),
            commit(repo, {"configuration_acme.py": CODE}, "Add configuration_acme.py",
                   date=T0 + timedelta(days=1)),
        ]  # fmt: skip
    watchlist = root / "watchlist.yaml"
    watchlist.write_text(
        "repos:\n  - id: acme/first\n  - id: acme/partial\n"
        f"    advisories:\n      unlisted_code: {PARTIAL}\n"
    )
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("TRACKER_", "HF_", "HUGGINGFACE_"))
    }
    env |= {
        "TRACKER_STATE_DIR": str(root / "state"),
        "TRACKER_WATCHLIST": str(watchlist),
        "TRACKER_RETRY_ATTEMPTS": "1",
    }
    with Replica(root / "hub") as hub:
        env["TRACKER_HF_ENDPOINT"] = hub.url
        _tracker(env, "poll", "--once")
    _tracker(env, "advisories", "export", str(root / "osv"))
    records = [json.loads(p.read_text()) for p in sorted((root / "osv").glob("*.json"))]
    return shas, records


def test_a_first_revision_without_the_code_auto_map_names_is_broken_as_first_seen(
    first_seen: tuple[dict[str, list[str]], list[dict[str, Any]]],
) -> None:
    """Before, the first revision was silent (only a later deletion was evidence); now it is an
    advisory of its own, fixed by the commit that adds the module."""
    shas, records = first_seen
    c0, c1 = shas["acme/first"]
    mine = [r for r in records if r["affected"][0]["package"]["name"].endswith("/acme/first")]
    found = [r for r in mine if r["database_specific"].get("findings")]
    (record,) = found
    assert [
        (f["check"], f["severity"], f["text"]) for f in record["database_specific"]["findings"]
    ] == [("auto-map-code-missing", "high", TEXT)]
    assert record["summary"].startswith("acme/first: broken as first seen: ")
    assert record["database_specific"]["severity"] == "high"
    (affected,) = record["affected"]
    assert affected["ranges"][0]["events"] == [{"introduced": c0}, {"fixed": c1}]
    assert affected["versions"] == [c0]
    assert "fixed_how" not in record["database_specific"]  # its one finding is resolved
    status = record["details"].split("## Status\n\n", 1)[1]
    assert status.startswith(f"**Fixed** by commit [`{c1[:12]}`]")


def test_unlisted_code_in_the_watchlist_keeps_a_first_revision_silent(
    first_seen: tuple[dict[str, list[str]], list[dict[str, Any]]],
) -> None:
    """The demo's trees leave out the real repos' code (the corpus has none): its watchlist marks
    chatglm2-6b, Qwen-7B-Chat and DeepSeek-R1 so, and the same history then publishes no finding."""
    _, records = first_seen
    partial = [r for r in records if r["affected"][0]["package"]["name"].endswith("/acme/partial")]
    assert [r["database_specific"].get("findings") for r in partial] == [None] * len(partial)
