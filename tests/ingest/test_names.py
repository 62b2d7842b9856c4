"""Issue 10, item 5: a file name that is not valid UTF-8 anywhere in a repo's tree.

Before: the git source decoded such a name with surrogate escapes, the store refused it
(UnicodeEncodeError), and every poll of that repo failed for good. Now names are escaped
losslessly (`tracker.sources.names`: a byte outside UTF-8 is `\\xNN`, a backslash `\\\\`), stored
and shown escaped, and a tracked file under such a name is read and stored like any other.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from helpers_ingest import open_store
from hypothesis import given, settings
from hypothesis import strategies as st

from tracker.ingest.snapshots import poll_repo
from tracker.shared.domain import RepoId
from tracker.sources.git import GitSource
from tracker.sources.names import escape_name, escape_text_name, unescape_name
from tracker.store import RepoStatus
from tracker.watchlist import WatchedRepo

RID = RepoId("acme/names")
CONFIG = (
    Path(__file__).resolve().parents[3] / "shared/corpus/models/openai__gpt-oss-20b/config.json"
).read_bytes()
"""openai/gpt-oss-20b's real config.json."""
ENV = {**os.environ, "GIT_AUTHOR_NAME": "a", "GIT_AUTHOR_EMAIL": "a@example.invalid",
       "GIT_COMMITTER_NAME": "a", "GIT_COMMITTER_EMAIL": "a@example.invalid"}  # fmt: skip


@settings(max_examples=200, deadline=None)
@given(raw=st.binary(max_size=40) | st.lists(st.sampled_from(
    [b"\\", b"x", b"\xff", b"\xe9", b"a", b"\\x", b"ff", b"\xc3", b"\xa9", b"/"])).map(b"".join))  # fmt: skip
def test_names_escape_losslessly_into_storable_text(raw: bytes) -> None:
    text = escape_name(raw)
    text.encode("utf-8")  # storable and printable
    assert unescape_name(text) == raw


def test_valid_names_are_unchanged_and_others_are_escaped() -> None:
    assert escape_name("café/config.json".encode()) == "café/config.json"
    assert escape_name(b"notes-\xff.txt") == "notes-\\xff.txt"
    assert escape_name(b"a\\b") == "a\\\\b"  # so that a literal `\xff` can never collide
    assert escape_name(b"a\\xff") == "a\\\\xff"
    assert escape_text_name("\udcff.json") == "\\xed\\xb3\\xbf.json"
    assert escape_text_name("config.json") == "config.json"


def test_a_repo_with_names_that_are_not_utf8_polls_and_stores_them(tmp_path: Path) -> None:
    origin = tmp_path / "origin"
    subprocess.run(["git", "init", "-q", "-b", "main", str(origin)], check=True, env=ENV)
    (origin / "config.json").write_bytes(CONFIG)
    (origin / os.fsdecode(b"notes-\xff.txt")).write_bytes(b"latin-1 name\n")
    (origin / os.fsdecode(b"sub\xe9")).mkdir()
    (origin / os.fsdecode(b"sub\xe9/config.json")).write_bytes(CONFIG.replace(b"gpt_oss", b"x"))
    subprocess.run(["git", "-C", str(origin), "add", "-A"], check=True, env=ENV)
    subprocess.run(["git", "-C", str(origin), "commit", "-qm", "names"], check=True, env=ENV)

    store = open_store(tmp_path)
    try:
        src = GitSource(tmp_path / "mirrors", url=str(origin))
        watched = WatchedRepo(RID, git=str(origin), tracked=("config.json", "*/config.json"))
        report = poll_repo(store, src, watched)
        assert (report.status, report.error) == (RepoStatus.OK, None)
        assert report.head is not None
        tree = store.tree(RID, report.head)
        assert [e.path for e in tree] == ["config.json", "notes-\\xff.txt", "sub\\xe9/config.json"]
        assert [unescape_name(e.path) for e in tree] == [
            b"config.json", b"notes-\xff.txt", b"sub\xe9/config.json",
        ]  # fmt: skip
        files = store.snapshot(RID, report.head).files
        assert files == {"config.json": CONFIG,
                         "sub\\xe9/config.json": CONFIG.replace(b"gpt_oss", b"x")}  # fmt: skip
        again = poll_repo(store, src, watched)  # and the next poll too
        assert (again.status, again.revisions_ingested) == (RepoStatus.OK, 0)
    finally:
        store.close()
