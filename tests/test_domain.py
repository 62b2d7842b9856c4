"""Domain values: repo id validation and the Change wire format."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tracker.shared.domain import Artifact, Change, ChangeKind, is_full_sha, parse_repo_id
from tracker.shared.errors import InvalidRepoIdError

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=10,
)


@given(
    artifact=st.sampled_from(Artifact),
    kind=st.sampled_from(ChangeKind),
    file=st.text(max_size=30),
    key=st.text(max_size=30),
    before=json_values,
    after=json_values,
    summary=st.text(max_size=50),
    detail=st.text(max_size=50),
)
def test_change_json_round_trips_through_json_text(**fields: object) -> None:
    change = Change(**fields)  # type: ignore[arg-type]
    assert Change.from_json(json.loads(json.dumps(change.to_json()))) == change


@pytest.mark.parametrize(
    "good", ["meta-llama/Llama-2-7b-hf", "Qwen/Qwen3-0.6B", "a/b", "org_1/name.v2-x"]
)
def test_valid_repo_ids(good: str) -> None:
    assert parse_repo_id(good) == good


@pytest.mark.parametrize(
    "bad",
    ["a/../b", "../a", "a/..", "a", "a/b/c", "/a/b", "a/b/", ".a/b", "a/-b", "a/b.", "a /b", "a/b%2f", "", "a/" + "x" * 97],
)  # fmt: skip
def test_invalid_repo_ids(bad: str) -> None:
    with pytest.raises(InvalidRepoIdError):
        parse_repo_id(bad)


def test_full_sha() -> None:
    assert is_full_sha("0" * 40)
    assert not is_full_sha("0" * 39)
    assert not is_full_sha("A" * 40)


REF_CASES = [
    "main", "release@2024", "a@b@c", "x@", "@@", "@/x", "x/@", "{@}", "a{b}", "@", "@{1}",
    "a@{b", "HEAD", "refs/heads/main", "v1.0", "a..b", ".hidden", "a/.b", "main.lock",
    "a.lock/b", "a.lockx", ".lock", "lock", "a./b", "end.", "a/b", "/a", "a/", "a//b", "a b",
    "a~b", "a^b", "a:b", "a?b", "a*b", "a[b", "a\\b", "ünïcode", "a\x7fb", "a\tb", "a.b.c",
]  # fmt: skip


@pytest.mark.parametrize("name", REF_CASES)
def test_ref_names_follow_git_check_ref_format(name: str) -> None:
    """One ref-name rule for the watchlist's `ref` and every revision the API and CLI take, the
    same as git's own (`git check-ref-format --allow-onelevel`)."""
    import subprocess

    from tracker.shared.domain import is_ref_name
    from tracker.shared.errors import InvalidRevisionError, WatchlistError
    from tracker.store.store import parse_revision
    from tracker.watchlist import parse_watchlist

    git = subprocess.run(["git", "check-ref-format", "--allow-onelevel", name], check=False)
    assert is_ref_name(name) is (git.returncode == 0)
    if git.returncode == 0:
        assert parse_revision(name + "~2") == (name, 2)
        assert parse_watchlist({"repos": [{"id": "acme/x", "ref": name}]}).repos[0].ref == name
    else:
        with pytest.raises(InvalidRevisionError):
            parse_revision(name)
        with pytest.raises(WatchlistError, match="git's ref-name rules"):
            parse_watchlist({"repos": [{"id": "acme/x", "ref": name}]})
