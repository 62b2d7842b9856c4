"""Domain values: repo id validation and the Change wire format."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tracker.domain import Artifact, Change, ChangeKind, is_full_sha, parse_repo_id
from tracker.errors import InvalidRepoIdError

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
