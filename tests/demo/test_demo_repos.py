"""Tests for tracker.replica.repos: deterministic commits, deletions, the LFS rule, refs."""

from __future__ import annotations

import hashlib
import subprocess
import tempfile
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from tracker.replica.repos import (
    HUB_GITATTRIBUTES,
    LfsPointer,
    RepoWriteError,
    commit,
    default_lfs_rule,
    delete_ref,
    init_repo,
    lfs_object_path,
    parse_lfs_pointer,
    resolve,
    set_ref,
    write_lfs_object,
    write_sparse_lfs_object,
    zero_padded_sha256,
)
from tracker.shared.errors import InvalidRepoIdError

D1 = datetime(2024, 1, 1, 12, 0, tzinfo=UTC)
D2 = datetime(2024, 1, 2, 12, 0, tzinfo=UTC)


def git(repo: Path, *args: str) -> str:
    out = subprocess.run(
        ["git", f"--git-dir={repo}", *args], capture_output=True, text=True, check=True
    )
    return out.stdout


def build(root: Path) -> tuple[Path, str, str]:
    repo = init_repo(root, "acme/tiny")
    first = commit(
        repo,
        {".gitattributes": HUB_GITATTRIBUTES, "config.json": b'{"a": 1}\n', "sub/x.py": b"x = 1\n"},
        "Initial commit",
        author="Alice <alice@example.com>",
        date=D1,
    )
    second = commit(repo, {"sub/x.py": None, "config.json": b'{"a": 2}\n'}, "Update", date=D2)
    return repo, first, second


def test_same_inputs_give_same_shas(tmp_path: Path) -> None:
    _, a1, a2 = build(tmp_path / "one")
    _, b1, b2 = build(tmp_path / "two")
    assert (a1, a2) == (b1, b2)
    assert a1 != a2


def test_commit_records_author_date_message_and_parent(tmp_path: Path) -> None:
    repo, first, second = build(tmp_path)
    log = git(repo, "log", "--format=%H|%P|%an <%ae>|%aI|%cn <%ce>|%cI|%B", "main").strip()
    lines = [entry for entry in log.split("\n") if entry]
    assert lines[0].split("|") == [
        second,
        first,
        "tracker-test <test@example.invalid>",
        "2024-01-02T12:00:00+00:00",
        "tracker-test <test@example.invalid>",
        "2024-01-02T12:00:00+00:00",
        "Update",
    ]
    assert lines[1].split("|") == [
        first,
        "",
        "Alice <alice@example.com>",
        "2024-01-01T12:00:00+00:00",
        "Alice <alice@example.com>",
        "2024-01-01T12:00:00+00:00",
        "Initial commit",
    ]


def test_timezone_offset_is_kept(tmp_path: Path) -> None:
    repo = init_repo(tmp_path, "acme/tz")
    when = datetime(2023, 7, 18, 9, 30, tzinfo=timezone(timedelta(hours=-7)))
    sha = commit(repo, {"a.txt": b"a"}, "m", date=when)
    assert git(repo, "show", "-s", "--format=%aI %cI", sha).strip() == (
        "2023-07-18T09:30:00-07:00 2023-07-18T09:30:00-07:00"
    )


def test_deletion_keeps_other_files(tmp_path: Path) -> None:
    repo, first, second = build(tmp_path)
    assert git(repo, "ls-tree", "-r", "--name-only", first).split() == [
        ".gitattributes",
        "config.json",
        "sub/x.py",
    ]
    assert git(repo, "ls-tree", "-r", "--name-only", second).split() == [
        ".gitattributes",
        "config.json",
    ]
    assert git(repo, "show", f"{second}:config.json") == '{"a": 2}\n'


def test_deleting_a_missing_file_is_an_error(tmp_path: Path) -> None:
    repo, _, second = build(tmp_path)
    with pytest.raises(RepoWriteError, match="cannot delete"):
        commit(repo, {"nope.txt": None}, "x", date=D2)
    assert resolve(repo, "main") == second


def test_lfs_rule_by_name_and_by_size(tmp_path: Path) -> None:
    repo = init_repo(tmp_path, "acme/lfs")
    weights = b"\x00\x01" * 500
    big_text = b"a" * (10 * 1024 * 1024 + 1)
    sha = commit(
        repo,
        {"model.safetensors": weights, "notes.txt": big_text, "small.txt": b"hi", "m.gguf": b"g"},
        "add",
        date=D1,
    )
    for path, data in (("model.safetensors", weights), ("notes.txt", big_text), ("m.gguf", b"g")):
        pointer = git(repo, "show", f"{sha}:{path}").encode()
        oid = hashlib.sha256(data).hexdigest()
        assert (
            pointer
            == (
                f"version https://git-lfs.github.com/spec/v1\noid sha256:{oid}\nsize {len(data)}\n"
            ).encode()
        )
        assert parse_lfs_pointer(pointer) == LfsPointer(oid, len(data))
        obj = repo / "lfs" / "objects" / oid[:2] / oid[2:4] / oid
        assert obj.read_bytes() == data
    assert git(repo, "show", f"{sha}:small.txt") == "hi"


def test_custom_lfs_rule_overrides_default(tmp_path: Path) -> None:
    repo = init_repo(tmp_path, "acme/rule")
    sha = commit(
        repo,
        {"model.safetensors": b"raw", "tokenizer.json": b"{}"},
        "add",
        date=D1,
        lfs=lambda path, _data: path.endswith(".json"),
    )
    assert git(repo, "show", f"{sha}:model.safetensors") == "raw"
    assert parse_lfs_pointer(git(repo, "show", f"{sha}:tokenizer.json").encode()) is not None


def test_default_lfs_rule() -> None:
    assert default_lfs_rule("a/b/pytorch_model-00001-of-00002.bin", b"")
    assert default_lfs_rule("x.ckpt", b"")
    assert not default_lfs_rule("config.json", b"{}")
    assert not default_lfs_rule("safetensors.json", b"{}")
    assert default_lfs_rule("vocab.txt", bytes(10 * 1024 * 1024 + 1))
    assert not default_lfs_rule("vocab.txt", bytes(10 * 1024 * 1024))


def test_sparse_object_has_real_size_and_correct_oid(tmp_path: Path) -> None:
    repo = init_repo(tmp_path, "acme/sparse")
    head = b"\x08\x00\x00\x00\x00\x00\x00\x00{}      "
    size = 9 * 1024 * 1024 + 7
    pointer = write_sparse_lfs_object(repo, head, size)
    full = head + bytes(size - len(head))
    assert pointer == LfsPointer(hashlib.sha256(full).hexdigest(), size)
    assert zero_padded_sha256(head, size) == pointer.oid
    obj = lfs_object_path(repo, pointer.oid)
    assert obj.stat().st_size == size
    assert obj.read_bytes() == full
    sha = commit(repo, {"model.safetensors": pointer}, "weights", date=D1)
    assert git(repo, "show", f"{sha}:model.safetensors").encode() == pointer.encode()


def test_committing_a_pointer_without_object_fails(tmp_path: Path) -> None:
    repo = init_repo(tmp_path, "acme/missing")
    with pytest.raises(RepoWriteError, match="not in the store"):
        commit(repo, {"model.safetensors": LfsPointer("ab" * 32, 5)}, "x", date=D1)
    assert resolve(repo, "main") is None


def test_write_lfs_object_is_idempotent(tmp_path: Path) -> None:
    repo = init_repo(tmp_path, "acme/idem")
    assert write_lfs_object(repo, b"abc") == write_lfs_object(repo, b"abc")


def test_set_ref_moves_branch_back_and_delete_ref(tmp_path: Path) -> None:
    repo, first, second = build(tmp_path)
    set_ref(repo, "main", first)
    assert resolve(repo, "main") == first
    rewritten = commit(repo, {"config.json": b'{"a": 3}\n'}, "Rewrite", date=D2)
    assert git(repo, "rev-parse", f"{rewritten}^").strip() == first
    set_ref(repo, "refs/pr/1", second)
    assert resolve(repo, "refs/pr/1") == second
    set_ref(repo, "dev", second)
    delete_ref(repo, "dev")
    assert resolve(repo, "dev") is None
    with pytest.raises(RepoWriteError):
        delete_ref(repo, "dev")


def test_commit_on_new_branch_starts_from_nothing(tmp_path: Path) -> None:
    repo, _, _ = build(tmp_path)
    sha = commit(repo, {"b.txt": b"b"}, "orphan", ref="other", date=D1)
    assert git(repo, "rev-list", "--parents", "-n1", sha).split() == [sha]


@pytest.mark.parametrize("path", ["", "/abs", "a/../b", ".git/config", "a//b", "a\\b", "./a"])
def test_unsafe_paths_are_refused(tmp_path: Path, path: str) -> None:
    repo = init_repo(tmp_path, "acme/paths")
    with pytest.raises(RepoWriteError, match="safe"):
        commit(repo, {path: b"x"}, "x", date=D1)


@pytest.mark.parametrize("ref", ["", "a..b", "a b", "x.lock", "refs/heads/", "a~1"])
def test_bad_refs_are_refused(tmp_path: Path, ref: str) -> None:
    repo, first, _ = build(tmp_path)
    with pytest.raises(RepoWriteError, match="ref name"):
        set_ref(repo, ref, first)


def test_bad_sha_author_and_repo_id(tmp_path: Path) -> None:
    repo, _, _ = build(tmp_path)
    with pytest.raises(RepoWriteError, match="not a commit"):
        set_ref(repo, "main", "0" * 40)
    with pytest.raises(RepoWriteError, match="author"):
        commit(repo, {"a": b"a"}, "x", author="no email", date=D1)
    with pytest.raises(InvalidRepoIdError):
        init_repo(tmp_path, "../evil")
    with pytest.raises(RepoWriteError, match="already exists"):
        init_repo(tmp_path, "acme/tiny")


_NAME = st.text(
    alphabet=st.characters(
        codec="utf-8", exclude_categories=("Cc", "Cs"), exclude_characters="/\\"
    ),
    min_size=1,
    max_size=12,
).filter(lambda s: s not in (".", "..", ".git"))
_PATH = st.lists(_NAME, min_size=1, max_size=3).map("/".join)


@settings(max_examples=25, deadline=None)
@given(
    first=st.dictionaries(_PATH, st.binary(max_size=64), min_size=1, max_size=5),
    second=st.dictionaries(_PATH, st.binary(max_size=64), max_size=5),
)
def test_committed_trees_hold_exactly_the_files(
    first: dict[str, bytes], second: dict[str, bytes]
) -> None:
    # A path cannot be both a file and a directory in one tree.
    every = [*first, *second]
    assume(not any(a != b and b.startswith(a + "/") for a in every for b in every))
    with tempfile.TemporaryDirectory() as tmp:
        repo = init_repo(Path(tmp), "acme/prop")
        no_lfs = {"lfs": lambda _p, _d: False}
        commit(repo, dict(first), "one", date=D1, **no_lfs)  # type: ignore[arg-type]
        deleted = sorted(first)[0]
        change: dict[str, bytes | None] = {**second}
        if deleted not in second:
            change[deleted] = None
        sha = commit(repo, change, "two", date=D2, **no_lfs)  # type: ignore[arg-type]
        expected = {**first, **second}
        if deleted not in second:
            del expected[deleted]
        listing = git(repo, "ls-tree", "-r", "-z", "--name-only", sha)
        assert sorted(p for p in listing.split("\0") if p) == sorted(expected)
        paths = sorted(expected)
        out = subprocess.run(
            ["git", f"--git-dir={repo}", "cat-file", "--batch"],
            input="".join(f"{sha}:{p}\n" for p in paths).encode(),
            capture_output=True,
            check=True,
        ).stdout
        for path in paths:
            header, _, out = out.partition(b"\n")
            size = int(header.split()[2])
            assert out[:size] == expected[path], path
            out = out[size + 1 :]


def test_paths_with_quotes_spaces_and_unicode(tmp_path: Path) -> None:
    repo = init_repo(tmp_path, "acme/names")
    files = {'"q".txt': b"1", "dir with space/ü.json": b"2", 'a"b': b"3"}
    sha = commit(repo, dict(files), "names", date=D1)  # type: ignore[arg-type]
    listing = git(repo, "ls-tree", "-r", "-z", "--name-only", sha)
    assert sorted(p for p in listing.split("\0") if p) == sorted(files)
    sha = commit(repo, {'"q".txt': None}, "del", date=D2)
    assert '"q".txt' not in git(repo, "ls-tree", "-r", "-z", "--name-only", sha)
