"""`tracker verify`: every stored blob re-hashed against its address, every stored file version
checked against its revision's tree; exit 0 when all match, 1 with one line per problem.

The store is filled by a real ingest (FakeSource: openai/gpt-oss-20b's config.json and
generation_config.json, a safetensors header), then damaged the two ways a store goes wrong:
a blob's bytes changed under its address (disk or a bad copy), and a file version whose bytes
are not the ones its tree names (what a store ingested before the integrity check could hold).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path

from hostile import MODELS
from reliakit import tracker

from tracker.ingest.snapshots import poll_repo
from tracker.shared.domain import RepoId
from tracker.sources.fake import FakeSource
from tracker.store import Store
from tracker.watchlist import WatchedRepo

RID = RepoId("openai/gpt-oss-20b")
GPT = MODELS / "openai__gpt-oss-20b"


def _ingested(tmp_path: Path) -> tuple[Path, list[str]]:
    state = tmp_path / "state"
    state.mkdir()
    (tmp_path / "watchlist.yaml").write_text(f"repos:\n  - id: {RID}\n")
    src = FakeSource()
    config = (GPT / "config.json").read_bytes()
    shas = [
        src.commit(RID, {"config.json": config,
                         "generation_config.json": (GPT / "generation_config.json").read_bytes()},
                   "upload"),
        src.commit(RID, {"config.json": config.replace(b'"gpt_oss"', b'"gpt-oss"')}, "edit"),
    ]  # fmt: skip
    store = Store.open(f"sqlite:///{state / 'tracker.db'}")
    try:
        poll_repo(store, src, WatchedRepo(RID))
    finally:
        store.close()
    return state, shas


def test_verify_passes_a_clean_store_and_names_every_damaged_row(tmp_path: Path) -> None:
    state, shas = _ingested(tmp_path)
    clean = tracker(state, "http://127.0.0.1:9", "verify")
    assert (clean.returncode, clean.stdout.strip(), clean.stderr) == (
        0, "verified 3 blobs and 4 file versions of 2 revisions: all match", "",
    )  # fmt: skip
    nothing = tracker(state, "http://127.0.0.1:9", "verify", "--repair")
    assert (nothing.returncode, nothing.stdout.strip(), nothing.stderr) == (
        0, "nothing to repair: no recorded 'could not read' is suspect", "",
    )  # fmt: skip

    db = sqlite3.connect(state / "tracker.db")
    with db:
        gen = (GPT / "generation_config.json").read_bytes()
        gen_key = hashlib.sha256(gen).hexdigest()
        db.execute("UPDATE blobs SET data = ? WHERE sha256 = ?", (gen + b" ", gen_key))
        # the second revision's config.json now points at the first revision's bytes
        first_cfg, second_cfg = (
            row[0]
            for row in db.execute(
                "SELECT f.blob_sha256 FROM revision_files f JOIN revisions r "
                "ON r.id = f.revision_pk WHERE f.path = 'config.json' ORDER BY r.seq"
            )
        )
        db.execute(
            "UPDATE revision_files SET blob_sha256 = ? WHERE blob_sha256 = ?",
            (first_cfg, second_cfg),
        )
    db.close()
    bad = tracker(state, "http://127.0.0.1:9", "verify", "--json")
    assert bad.returncode == 1, bad.stderr
    report = bad.json()
    assert (report["ok"], report["blobs"], report["file_versions"]) == (False, 3, 4)
    actual = hashlib.sha256(gen + b" ").hexdigest()
    assert [(p["where"], p["why"]) for p in report["problems"]] == [
        (f"blob {gen_key[:12]}", f"content hashes to {actual[:12]}"),
        (f"{RID}@{shas[0][:12]}:generation_config.json", f"its blob {gen_key[:12]} is damaged"),
        (f"{RID}@{shas[1][:12]}:config.json", json.loads(json.dumps(report["problems"][2]["why"]))),
        (f"{RID}@{shas[1][:12]}:generation_config.json", f"its blob {gen_key[:12]} is damaged"),
    ]
    assert report["problems"][2]["why"].startswith("stored bytes are not the tree's: git blob id ")
    assert bad.stderr.strip() == (
        "verified 3 blobs and 4 file versions of 2 revisions: 4 do not match"
    )


def test_verify_names_a_could_not_read_an_earlier_release_recorded_from_a_transport_fault(
    tmp_path: Path,
) -> None:
    """Issue 26: before, a lying `Content-Length` (or an 80 MB or gzip body) on a 1.8 kB
    config.json was recorded as "could not read config.json: OversizedArtifactError", and a
    transient 404 for a listed file as "EntryNotFoundError"; `tracker verify` said "all match".
    The rows are written as those releases wrote them (reason "<Exception>: <message>"; a later
    revision carries the version on). Each is now named, in each revision that carries it; the
    same reason for a file over the cap by its tree size is the file's own and is not."""
    state, shas = _ingested(tmp_path)
    not_found = (
        f"EntryNotFoundError: {RID}@{shas[0]}:generation_config.json: file not found "
        "(404 Client Error. (Request ID: Root=1-6751))"
    )
    oversized = (
        f"OversizedArtifactError: {RID}@{shas[1]}: config.json is 100000000 bytes, over the cap "
        "of 64000000 bytes"
    )
    db = sqlite3.connect(state / "tracker.db")
    with db:
        for seq, path, reason in (
            (0, "generation_config.json", not_found),
            (1, "generation_config.json", not_found),  # carried on: the tree's blob is the same
            (1, "config.json", oversized),
        ):
            db.execute(
                "UPDATE revision_files SET kind = 'unreadable', blob_sha256 = NULL, reason = ? "
                "WHERE path = ? AND revision_pk = (SELECT id FROM revisions ORDER BY seq "
                "LIMIT 1 OFFSET ?)",
                (reason, path, seq),
            )
    db.close()
    bad = tracker(state, "http://127.0.0.1:9", "verify", "--json")
    assert bad.returncode == 1, bad.stderr
    gen = len((GPT / "generation_config.json").read_bytes())
    cfg = len((GPT / "config.json").read_bytes().replace(b'"gpt_oss"', b'"gpt-oss"'))
    suffix = ", a fault of the transport, not the file's content"
    assert [(p["where"], p["why"]) for p in bad.json()["problems"]] == [
        (
            f"{RID}@{shas[0][:12]}:generation_config.json",
            f"suspect 'could not read' ({not_found}): recorded from a not-found answer for a "
            f"file its tree lists ({gen:,} bytes){suffix}",
        ),
        (
            f"{RID}@{shas[1][:12]}:config.json",
            f"suspect 'could not read' ({oversized}): recorded from an answer over the cap for "
            f"a file its tree says is {cfg:,} bytes, under the cap of 64,000,000{suffix}",
        ),
        (
            f"{RID}@{shas[1][:12]}:generation_config.json",
            f"suspect 'could not read' ({not_found}): recorded from a not-found answer for a "
            f"file its tree lists ({gen:,} bytes){suffix}",
        ),
    ]
    # under a cap the file's tree size is over, "over the cap" is the file's own
    small = tracker(
        state, "http://127.0.0.1:9", "verify", env={"TRACKER_MAX_FILE_BYTES": str(cfg - 1)}
    )
    assert small.returncode == 1
    assert [line.split(":", 2)[1] for line in small.stdout.splitlines()] == [
        "generation_config.json",
        "generation_config.json",
    ]
    assert small.stderr.strip() == (
        "verified 3 blobs and 4 file versions of 2 revisions: 2 do not match"
    )
