"""Property tests of the key-level JSON differ: re-serialising never reports, any leaf edit always does."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from tracker.diff._common import json_key_changes
from tracker.domain import Artifact, ChangeKind

_KEYS = st.text(alphabet="abcdefghij_", min_size=1, max_size=6)
_LEAF = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**6), 10**6),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.text(max_size=8),
)
_DOC = st.recursive(
    _LEAF,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(_KEYS, inner, max_size=4)),
    max_leaves=20,
)
_OBJ = st.dictionaries(_KEYS, _DOC, min_size=1, max_size=6)


@settings(max_examples=150, deadline=None)
@given(_OBJ, st.integers(0, 8))
def test_reserialised_documents_give_no_change(doc: dict[str, object], indent: int) -> None:
    again = json.loads(json.dumps(dict(reversed(list(doc.items()))), indent=indent, sort_keys=True))
    assert json_key_changes(Artifact.CONFIG, "config.json", doc, again) == []


@settings(max_examples=150, deadline=None)
@given(_OBJ, st.data())
def test_changing_a_top_level_value_is_always_reported_at_or_under_its_key(
    doc: dict[str, object], data: st.DataObject
) -> None:
    key = data.draw(st.sampled_from(sorted(doc)))
    new_value = data.draw(
        _DOC.filter(lambda v: json.dumps(v, sort_keys=True) != json.dumps(doc[key], sort_keys=True))
    )
    if (
        isinstance(new_value, float)
        and isinstance(doc[key], int | float)
        and float(doc[key]) == new_value
    ):  # type: ignore[arg-type]
        return
    changed = dict(doc, **{key: new_value})
    changes = json_key_changes(Artifact.CONFIG, "config.json", doc, changed)
    assert changes, (doc[key], new_value)
    assert all(c.key == key or c.key.startswith((f"{key}.", f"{key}[")) for c in changes)
    assert all(c.kind is not ChangeKind.UNREADABLE for c in changes)
