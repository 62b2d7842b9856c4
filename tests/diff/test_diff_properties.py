"""Property tests of the key-level JSON differ: re-serialising never reports, any leaf edit always does."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from tracker.diff._common import json_key_changes
from tracker.shared.domain import Artifact, ChangeKind

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


_TRACKED = (
    "config.json",
    "generation_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "chat_template.jinja",
    "chat_template.json",
    "model.safetensors.index.json",
    "pytorch_model.bin.index.json",
    "README.md",
    "modeling_x.py",
    "preprocessor_config.json",
)
_JSONISH = st.recursive(
    _LEAF,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(
            st.sampled_from(
                [
                    "model",
                    "vocab",
                    "merges",
                    "added_tokens",
                    "weight_map",
                    "chat_template",
                    "auto_map",
                    "eos_token",
                    "eos_token_id",
                    "type",
                    "id",
                    "content",
                    "name",
                    "template",
                    "metadata",
                    "total_size",
                    "AutoModel",
                ]
            ),
            inner,
            max_size=4,
        ),
    ),
    max_leaves=15,
)
_CONTENT = st.one_of(
    st.binary(max_size=64),
    _JSONISH.map(lambda v: json.dumps(v).encode()),
    st.text(max_size=64).map(str.encode),
)


@settings(max_examples=60, deadline=None)
@given(
    st.dictionaries(st.sampled_from(_TRACKED), _CONTENT, max_size=5),
    st.dictionaries(st.sampled_from(_TRACKED), _CONTENT, max_size=5),
)
def test_arbitrary_content_never_crashes_and_gives_json_values(
    old: dict[str, bytes], new: dict[str, bytes]
) -> None:
    from diffkit import make_snapshot

    from tracker.diff import diff_snapshots

    for before in (None, make_snapshot(old)):
        for change in diff_snapshots(before, make_snapshot(new)):
            json.dumps([change.before, change.after])
            assert change.summary and "\n" not in change.summary
