"""Properties of the classification (issue 16), over transformers' own table and real configs.

- Renaming a key to any of its aliases never changes the severity (nor the rule).
- Moving a generation key between config.json and generation_config.json changes the wording
  (which file governs) but never lowers it below moderate while it governs generation.
- No-op edits (re-indent, key reorder) publish nothing; a bookkeeping-only change only low.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from advkit import HUB, NOW, commit, publish, snap
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tracker.advisories.classify import Classified, Context, classify
from tracker.advisories.knowledge import load
from tracker.advisories.rules import SEVERITY_RANK
from tracker.diff import diff_snapshots
from tracker.shared.domain import Artifact, RepoId, Severity, Sha
from tracker.store.advisories import AdvisoryStore

KNOWLEDGE = load()


def _strict(text: str) -> Any:
    def refuse(name: str) -> Any:
        raise ValueError(name)

    try:
        return json.loads(text, parse_constant=refuse)
    except ValueError:
        return (
            None  # a real config with Infinity/NaN (not strict JSON): left out of these properties
        )


CONFIGS = {
    p.stem: config
    for p in sorted((Path(__file__).resolve().parents[1] / "data" / "configs").glob("*.json"))
    if (config := _strict(p.read_text())) is not None
}
PAIRS = KNOWLEDGE.alias_pairs()
GROUP_PAIRS = sorted(
    {(a, b) for names in KNOWLEDGE.groups.values() for a in names for b in names if a < b}
)
SETTINGS = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def _classified(before: dict[str, Any], after: dict[str, Any]) -> list[Classified]:
    b, a = snap(before), snap(after)
    ctx = Context(b, a)
    return [classify(c, context=ctx) for c in diff_snapshots(b, a)]


def _only(before: dict[str, Any], after: dict[str, Any]) -> Classified:
    (one,) = _classified(before, after)
    return one


def _conf(before: dict[str, Any], after: dict[str, Any]) -> Classified:
    """The one change between two config.json contents, classified."""
    return _only({"config.json": before}, {"config.json": after})


def _edit(config: dict[str, Any], name: str, value: object) -> dict[str, Any]:
    out = dict(config)
    if value is None:
        out.pop(name, None)
    else:
        out[name] = value
    return out


def test_the_alias_table_is_transformers_own() -> None:
    assert len(PAIRS) == 520
    assert ("gpt2", "num_hidden_layers", "n_layer") in PAIRS
    assert ("t5", "num_attention_heads", "num_heads") in PAIRS
    assert {"n_layer", "num_layers", "num_hidden_layers", "encoder_layers"} <= KNOWLEDGE.names_of(
        "n_layer"
    )


@SETTINGS
@given(
    pair=st.sampled_from(PAIRS),
    old=st.none() | st.integers(1, 4096),
    new=st.none() | st.integers(1, 4096),
)
def test_renaming_a_key_to_its_class_alias_never_changes_the_severity(
    pair: tuple[str, str, str], old: int | None, new: int | None
) -> None:
    model_type, standard, attribute = pair
    assume(old != new)
    base = {"model_type": model_type, "architectures": ["X"]}
    got = [_conf(_edit(base, name, old), _edit(base, name, new)) for name in (standard, attribute)]
    assert (got[0].severity, got[0].rule) == (got[1].severity, got[1].rule), (
        got[0].rationale,
        got[1].rationale,
    )


@SETTINGS
@given(pair=st.sampled_from(GROUP_PAIRS), old=st.integers(1, 64), new=st.integers(1, 64))
def test_any_two_names_of_one_fact_get_the_same_severity(
    pair: tuple[str, str], old: int, new: int
) -> None:
    # no model_type: the rule can only come from the fact, whatever its name
    assume(old != new)
    got = [_conf({name: old}, {name: new}) for name in pair]
    assert (got[0].severity, got[0].rule) == (got[1].severity, got[1].rule)


REAL_ALIASED = sorted(
    (name, attr, std)
    for name, config in CONFIGS.items()
    if (cls := KNOWLEDGE.classes.get(str(config.get("model_type")))) is not None
    and "auto_map" not in config
    for std, attr in cls.attribute_map.items()
    if attr in config and std not in config and isinstance(config[attr], int)
)


def test_real_configs_use_aliases() -> None:
    assert len(CONFIGS) == 64  # of 65: Nemotron-3-Super's config has Infinity (not strict JSON)
    assert len(REAL_ALIASED) == 29
    assert ("openai-community__gpt2-xl", "n_layer", "num_hidden_layers") in REAL_ALIASED
    assert ("google__t5-v1_1-base", "num_heads", "num_attention_heads") in REAL_ALIASED


@SETTINGS
@given(case=st.sampled_from(REAL_ALIASED), factor=st.sampled_from([0.5, 2, 3]))
def test_a_real_config_spelling_a_fact_by_its_standard_name_is_classified_the_same(
    case: tuple[str, str, str], factor: float
) -> None:
    name, attr, std = case
    config = CONFIGS[name]
    old = config[attr]
    new = max(1, int(old * factor))
    assume(new != old)
    own = _conf(config, {**config, attr: new})
    renamed = {k: v for k, v in config.items() if k != attr}
    standard = _conf({**renamed, std: old}, {**renamed, std: new})
    assert (own.severity, own.rule) == (standard.severity, standard.rule)
    assert own.severity in (Severity.HIGH, Severity.CRITICAL)  # sizes and counts, every one


# --- generation keys ----------------------------------------------------------------------------

# GenerationConfig's fields that set a generation default (token ids, output flags and the KV-cache
# switch have rules of their own, louder or quieter)
GENERATION_KEYS = sorted(
    set(KNOWLEDGE.generation_defaults)
    - {
        "use_cache",
        "output_scores",
        "return_dict_in_generate",
        "bad_words_ids",
        "forced_bos_token_id",
        "forced_eos_token_id",
        "suppress_tokens",
        "begin_suppress_tokens",
    }
)
VALUES = st.one_of(
    st.integers(0, 512), st.floats(0.05, 4.0).map(lambda f: round(f, 2)), st.booleans()
)
T5 = CONFIGS["google__t5-v1_1-base"]


def test_generation_keys_come_from_generation_config() -> None:
    assert {
        "num_beams",
        "max_length",
        "min_length",
        "length_penalty",
        "no_repeat_ngram_size",
    } <= set(GENERATION_KEYS)
    assert {"early_stopping", "do_sample", "temperature", "top_k", "top_p"} <= set(GENERATION_KEYS)
    assert "repetition_penalty" in GENERATION_KEYS and len(GENERATION_KEYS) == 26


@SETTINGS
@given(key=st.sampled_from(GENERATION_KEYS), old=VALUES, new=VALUES)
def test_moving_a_generation_key_changes_the_wording_never_below_moderate_while_it_governs(
    key: str, old: object, new: object
) -> None:
    assume(json.dumps(old) != json.dumps(new) and old is not new)
    # in config.json, no generation_config.json: config.json governs
    in_config = _only({"config.json": {**T5, key: old}}, {"config.json": {**T5, key: new}})
    # in generation_config.json: it governs
    gen = {"decoder_start_token_id": 0}
    in_generation = _only(
        {"config.json": T5, "generation_config.json": {**gen, key: old}},
        {"config.json": T5, "generation_config.json": {**gen, key: new}},
    )
    for got in (in_config, in_generation):
        assert SEVERITY_RANK[got.severity] >= SEVERITY_RANK[Severity.MODERATE], got.rationale
        assert got.rule == "generation-defaults"
    assert in_config.change.artifact is Artifact.CONFIG
    assert "config.json governs: this revision has no readable generation_config.json" in (
        in_config.rationale
    )
    assert "generation_config.json governs" in in_generation.rationale
    assert in_config.rationale != in_generation.rationale
    # the key moves from config.json into a new generation_config.json: both sides say so
    moved = {
        c.change.key or c.change.file: c
        for c in _classified(
            {"config.json": {**T5, key: old}},
            {"config.json": T5, "generation_config.json": {**gen, key: new}},
        )
        if c.change.artifact in (Artifact.CONFIG, Artifact.GENERATION_CONFIG)
    }
    assert SEVERITY_RANK[moved[key].severity] >= SEVERITY_RANK[Severity.MODERATE]
    assert f"config.json governed `{key}` at the previous revision" in moved[key].rationale
    assert moved["generation_config.json"].rule == "file-added"
    # while generation_config.json governs at both revisions, config.json's key is shadowed
    shadowed = _only(
        {"config.json": {**T5, key: old}, "generation_config.json": gen},
        {"config.json": {**T5, key: new}, "generation_config.json": gen},
    )
    assert (shadowed.severity, shadowed.rule) == (Severity.LOW, "generation-shadowed")


def test_an_unreadable_generation_config_hands_generation_back_to_config_json() -> None:
    # transformers falls back to config.json when generation_config.json cannot be loaded
    before = snap({"config.json": {**T5, "num_beams": 4}, "generation_config.json": b"{not json"})
    after = snap({"config.json": {**T5, "num_beams": 1}, "generation_config.json": b"{not json"})
    ctx = Context(before, after)
    (got,) = [classify(c, context=ctx) for c in diff_snapshots(before, after)]
    assert (got.severity, got.rule) == (Severity.MODERATE, "generation-defaults")
    assert "config.json governs" in got.rationale


# --- no-op edits ----------------------------------------------------------------------------------

REAL = sorted(CONFIGS)


def _reindent(config: dict[str, Any]) -> bytes:
    return json.dumps(config, indent=4).encode()


def _reorder(config: dict[str, Any]) -> bytes:
    return json.dumps(dict(reversed(list(config.items()))), indent=2).encode()


@SETTINGS
@given(name=st.sampled_from(REAL), edit=st.sampled_from([_reindent, _reorder]))
def test_reindenting_or_reordering_a_real_config_changes_nothing(name: str, edit: Any) -> None:
    config = CONFIGS[name]
    before = snap({"config.json": json.dumps(config, indent=2).encode()})
    after = snap({"config.json": edit(config)})
    assert diff_snapshots(before, after) == ()


@SETTINGS
@given(
    name=st.sampled_from(REAL),
    version=st.sampled_from(["4.46.3", "4.57.1", "5.0.0.dev0"]),
    path=st.sampled_from([None, "/home/someone/ckpt", "org/model"]),
)
def test_a_bookkeeping_only_change_of_a_real_config_is_only_low(
    name: str, version: str, path: str | None
) -> None:
    config = CONFIGS[name]
    assume(config.get("transformers_version") != version)
    edited = {**config, "transformers_version": version}
    edited = _edit(edited, "_name_or_path", path)
    got = _classified({"config.json": config}, {"config.json": edited})
    assert got and {c.severity for c in got} == {Severity.LOW}
    assert {c.rule.split(":")[0] for c in got} == {"bookkeeping"}


@pytest.mark.parametrize("name", ["meta-llama__Llama-2-7b-hf", "google__t5-v1_1-base"])
def test_no_op_edits_publish_nothing_and_bookkeeping_only_low(
    store: AdvisoryStore, name: str
) -> None:
    config = CONFIGS[name]
    versions = [
        json.dumps(config, indent=2).encode(),
        _reindent(config),
        _reorder(config),
        json.dumps({**config, "transformers_version": "9.9.9"}, indent=2).encode(),
    ]
    shas = [Sha(f"{i:040x}") for i in range(1, len(versions) + 1)]
    made: list[list[str]] = []
    previous = None
    for sha, data in zip(shas, versions, strict=True):
        before = (
            snap({"config.json": versions[shas.index(previous)]}, previous) if previous else None
        )
        after = snap({"config.json": data}, sha)
        advs = publish(
            store,
            repo_id=RepoId("acme/model"),
            commit=commit(sha, previous),
            previous=previous,
            changes=diff_snapshots(before, after),
            estimate_before=None,
            estimate_after=None,
            repo_url=f"{HUB}/acme/model",
            overrides=None,
            prefix="TRACKER",
            now=NOW,
            context=Context(before, after),
        )
        made.append([f"{a.group} {a.severity.value}" for a in advs])
        previous = sha
    assert made == [[], [], [], ["config low"]]
