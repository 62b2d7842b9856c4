"""How preflight answers move between revisions: only a changed answer is a change, never an unknown."""

from __future__ import annotations

import json
from pathlib import Path

from tracker.advisories.advice import Assessment, Kind, advice
from tracker.advisories.classify import Classified
from tracker.advisories.groups import ChangeGroup, Subject
from tracker.preflight.delta import preflight_delta
from tracker.preflight.report import Preflight, run_preflight
from tracker.preflight.settings import PreflightSettings
from tracker.shared.domain import (
    Artifact,
    Change,
    ChangeKind,
    RepoId,
    SafetensorsHeader,
    Severity,
    Sha,
    TensorInfo,
    TreeEntry,
)

CONFIGS = Path(__file__).parents[1] / "data" / "configs"
NEXT = json.loads((CONFIGS / "Qwen__Qwen3-Next-80B-A3B-Thinking.json").read_text())


def _run(
    config: dict[str, object] | None, dtype: str | None = None, raw: bytes | None = None
) -> Preflight:
    headers = {}
    if dtype is not None:
        size = {"BF16": 2, "F32": 4, "F8_E4M3": 1}[dtype]
        info = TensorInfo(dtype, (10**9,), 10**9 * size)
        headers = {"model.safetensors": SafetensorsHeader({"model.embed_tokens.weight": info})}
    files = {} if config is None else {"config.json": json.dumps(config).encode()}
    if raw is not None:
        files = {"config.json": raw}
    return run_preflight(
        files=files,
        headers=headers,
        tree=(),
        tables={},
        settings=PreflightSettings(lora_targets=("q_proj", "in_proj_qkvz")),
    )


def test_an_unchanged_answer_and_one_unknown_on_both_sides_are_no_change() -> None:
    same = _run(NEXT, "BF16")
    assert preflight_delta(same, _run(NEXT, "BF16")) == []
    assert preflight_delta(_run(None), _run(None)) == []  # no config, no headers: unknown both


def test_an_answer_lost_is_a_change_with_before_and_after() -> None:
    """The hostile review: the safetensors replaced by .bin (no census), or a config the LoRA
    resolution cannot read, was no change at all; losing an answer is one now."""
    answered, lost = _run(NEXT, "F32"), _run(None)
    why = "no safetensors headers at this revision (nothing to count bytes from)"
    changes = preflight_delta(answered, lost)
    assert [(c.key, c.kind, c.summary) for c in changes] == [
        (
            "preflight.capacity",
            ChangeKind.CHANGED,
            f"what it takes to fetch and hold changed: capacity 4.00 GB → unknown: {why}",
        ),
        (
            "preflight.lora.q_proj",
            ChangeKind.CHANGED,
            "`q_proj`: 12 modules → cannot resolve: no config.json at this revision",
        ),
        (
            "preflight.lora.in_proj_qkvz",
            ChangeKind.CHANGED,
            "`in_proj_qkvz`: 36 modules → cannot resolve: no config.json at this revision",
        ),
    ]
    assert changes[0].before["bytes_per_param"] == 4.0  # type: ignore[index]
    assert changes[0].after == f"unknown: {why}"
    assert (changes[1].before, changes[1].after) == (
        {"attention.full": 12},
        "cannot resolve: no config.json at this revision",
    )
    # weights only as .bin: the census is lost, the LoRA answer (from config.json) stays
    [c] = preflight_delta(answered, _run(NEXT))
    assert (
        c.summary == f"what it takes to fetch and hold changed: capacity 4.00 GB → unknown: {why}"
    )


def test_a_layout_change_says_where_a_target_stops_resolving() -> None:
    # Every layer made full attention: in_proj_qkvz resolves nowhere, q_proj everywhere.
    full = {**NEXT, "full_attention_interval": 1}
    [q, lin] = preflight_delta(_run(NEXT), _run(full))
    assert (q.key, q.kind, q.before, q.after) == (
        "preflight.lora.q_proj",
        ChangeKind.CHANGED,
        {"attention.full": 12},
        {"attention.full": 48},
    )
    assert lin.summary == (
        "`in_proj_qkvz` now resolves to 0 modules in the linear-attention layers (was 36)"
    )


def test_a_re_upload_in_another_dtype_is_one_capacity_change_with_before_and_after() -> None:
    [c] = preflight_delta(_run(NEXT, "F32"), _run(NEXT, "F8_E4M3"))
    assert c.key == "preflight.capacity"
    assert (c.before["bytes_per_param"], c.after["bytes_per_param"]) == (4.0, 1.0)
    assert (c.before["quantized"], c.after["quantized"]) == (False, True)
    assert c.summary == (
        "what it takes to fetch and hold changed: already quantized: 1.00 bytes/parameter, no 4× "
        "left (was 4.00 bytes/parameter: 4-bit weights would take 8.0× less); "
        "weights 4.00 GB → 1.00 GB; download 4.00 GB → 1.00 GB, 0.01 → 0.00 h at 126 MB/s"
    )


def test_a_re_upload_adding_duplicate_shards_is_a_capacity_change() -> None:
    """Same tensors, same bytes/parameter, cards and boxes; one more 4 GB copy of the shard in the
    tree: the download grows (it was silent when only bytes/parameter and cards were compared)."""
    info = TensorInfo("F32", (10**9,), 4 * 10**9)
    headers = {"model.safetensors": SafetensorsHeader({"model.embed_tokens.weight": info})}
    files = {"config.json": json.dumps(NEXT).encode()}

    def run(*paths: str) -> Preflight:
        tree = [TreeEntry(p, "b" * 40, 4 * 10**9) for p in paths]
        return run_preflight(
            files=files, headers=headers, tree=tree, tables={}, settings=PreflightSettings()
        )

    one = run("model.safetensors")
    assert preflight_delta(one, run("model.safetensors")) == []
    [c] = preflight_delta(one, run("model.safetensors", "copy/model.safetensors"))
    assert c.key == "preflight.capacity" and c.kind == ChangeKind.CHANGED
    assert (c.before["download_bytes"], c.after["download_bytes"]) == (4 * 10**9, 8 * 10**9)
    assert c.before["bytes_per_param"] == c.after["bytes_per_param"] == 4.0
    assert c.summary == (
        "what it takes to fetch and hold changed: download 4.00 GB → 8.00 GB, "
        "0.01 → 0.02 h at 126 MB/s"
    )


def test_an_answer_lost_with_an_unreadable_config_is_not_published_twice() -> None:
    """config.json that cannot be read is an advisory of its own (`unreadable`, with the reason);
    the capacity and LoRA answers lost with it are recorded but not published again (a fresh-clone
    run counted two advisories for one hostile config)."""
    answered = _run(NEXT, "BF16")
    unread = _run(None, "BF16", raw=b"[" * 200)
    assert unread.lora_error is not None and unread.lora_error.startswith(
        "could not read config.json: "
    )
    assert preflight_delta(answered, unread) == []


def test_weights_lost_with_an_unreadable_config_are_still_a_capacity_change() -> None:
    """Safetensors replaced by .bin in the revision that breaks config.json: the capacity answer
    is lost with the headers, not with the config (it is counted from the headers alone), so the
    loss is published with that reason; it was recorded as "could not read config.json" and, as
    an answer lost with an unreadable config, never published (nor when the config came back)."""
    why = "no safetensors headers at this revision (nothing to count bytes from)"
    lost = _run(None, raw=b"[" * 200)
    assert lost.capacity_error == why
    assert (lost.lora_error or "").startswith("could not read config.json: ")
    [c] = preflight_delta(_run(NEXT, "BF16"), lost)
    assert (c.key, c.kind, c.after, c.summary) == (
        "preflight.capacity",
        ChangeKind.CHANGED,
        f"unknown: {why}",
        f"what it takes to fetch and hold changed: capacity 2.00 GB → unknown: {why}",
    )
    # the config repaired, the weights still .bin: the LoRA answers are found, capacity stays lost
    assert [(c.key, c.kind) for c in preflight_delta(lost, _run(NEXT))] == [
        ("preflight.lora.q_proj", ChangeKind.ADDED),
        ("preflight.lora.in_proj_qkvz", ChangeKind.ADDED),
    ]


def test_bytes_per_parameter_is_not_compared_across_an_unreadable_config() -> None:
    """GPTQ 8-bit weights: counted without the config, packed weights unpack at 4 bits (1.20 →
    0.67 bytes/parameter), a capacity advisory at the revision that breaks config.json and another
    at the one that repairs it, next to the unreadable config's own. Weights that do move still
    are a change."""
    config = json.loads((CONFIGS / "Qwen__Qwen3-0.6B.json").read_text())
    config["quantization_config"] = {"quant_method": "gptq", "bits": 8}

    def run(raw: bytes, scale: int = 1) -> Preflight:
        header = {
            "model.layers.0.mlp.down_proj.qweight": TensorInfo("I32", (10**8,), 4 * 10**8),
            "model.embed_tokens.weight": TensorInfo("F16", (10**8 * scale,), 2 * 10**8 * scale),
        }
        return run_preflight(
            files={"config.json": raw},
            headers={"model.safetensors": SafetensorsHeader(header)},
            tree=(),
            tables={},
            settings=PreflightSettings(lora_targets=("q_proj",)),
        )

    ok, unread = run(json.dumps(config).encode()), run(b"[" * 200)
    assert ok.capacity is not None and unread.capacity is not None
    assert (
        round(ok.capacity.bytes_per_param or 0, 2),
        round(unread.capacity.bytes_per_param or 0, 2),
    ) == (
        1.2,
        0.67,
    )
    assert preflight_delta(ok, unread) == []
    assert [(c.key, c.kind) for c in preflight_delta(unread, ok)] == [
        ("preflight.lora.q_proj", ChangeKind.ADDED)
    ]
    [c] = preflight_delta(ok, run(b"[" * 200, scale=2))
    assert c.summary == (
        "what it takes to fetch and hold changed: weights 0.60 GB → 0.80 GB; "
        "download 0.60 GB → 0.80 GB, 0.00 → 0.00 h at 126 MB/s"
    )
    assert "bytes_per_param" not in c.after  # type: ignore[operator]


def test_an_answer_found_where_there_was_none_is_an_added_change_stating_it() -> None:
    """A first safetensors upload and a first config.json: the answers now known are published
    (kind ADDED, the low `preflight-answer-found` rule), each saying what it now is and why it
    was unknown; they were recorded but never published."""
    answered, lost = _run(NEXT, "F32"), _run(None)
    why = "no safetensors headers at this revision (nothing to count bytes from)"
    changes = preflight_delta(lost, answered)
    assert [(c.key, c.kind, c.before) for c in changes] == [
        ("preflight.capacity", ChangeKind.ADDED, f"unknown: {why}"),
        (
            "preflight.lora.q_proj",
            ChangeKind.ADDED,
            "cannot resolve: no config.json at this revision",
        ),
        (
            "preflight.lora.in_proj_qkvz",
            ChangeKind.ADDED,
            "cannot resolve: no config.json at this revision",
        ),
    ]
    assert changes[0].summary == (
        "what it takes to fetch and hold is now known: 4.00 bytes/parameter: 4-bit weights would "
        "take 8.0× less; weights 4.00 GB; download 4.00 GB, 0.01 h at 126 MB/s; weights-only "
        "cards: T4 16 GB 1, L4 24 GB 1, A100 40 GB 1, A100/H100 80 GB 1, H200 141 GB 1; held by "
        "8 × H200 141 GB, 8 × B200 180 GB (unknown at the previous revision: no safetensors "
        "headers (nothing to count bytes from))"
    )
    assert changes[0].after["weights_bytes"] == 4 * 10**9  # type: ignore[index]
    assert [(c.summary, c.after) for c in changes[1:]] == [
        (
            "`q_proj` now resolves to 12 modules in the full-attention layers "
            "(unresolved at the previous revision: no config.json)",
            {"attention.full": 12},
        ),
        (
            "`in_proj_qkvz` now resolves to 36 modules in the linear-attention layers "
            "(unresolved at the previous revision: no config.json)",
            {"attention.linear": 36},
        ),
    ]
    # only the census found (safetensors replace .bin): one change, the LoRA answer was there
    [c] = preflight_delta(_run(NEXT), answered)
    assert (c.key, c.kind) == ("preflight.capacity", ChangeKind.ADDED)


def test_an_answer_found_after_an_unreadable_config_is_published() -> None:
    """The config's "readable again" change does not compare values: the LoRA answers found with
    the repaired config.json are the only place they show again (the loss was not published)."""
    unread = _run(None, "BF16", raw=b"[" * 200)
    changes = preflight_delta(unread, _run(NEXT, "BF16"))
    assert [(c.key, c.kind, c.after) for c in changes] == [
        ("preflight.lora.q_proj", ChangeKind.ADDED, {"attention.full": 12}),
        ("preflight.lora.in_proj_qkvz", ChangeKind.ADDED, {"attention.linear": 36}),
    ]
    assert all(
        str(c.before).startswith("cannot resolve: could not read config.json: ") for c in changes
    )


def test_an_answer_back_is_compared_with_the_last_revision_that_had_it() -> None:
    """`since`: the answer as at an earlier revision, for an answer the previous one lacks. The
    same answer is "known again" (ADDED, low); another is a move from that revision's (CHANGED,
    classified as any move), never a low "found" (the hostile review of issue 15)."""
    then, lost = _run(NEXT, "BF16"), _run(None)
    sha = "a1b2c3d4e5f6" + "0" * 28
    again = preflight_delta(
        lost, _run(NEXT, "BF16"), {"capacity": (sha, then), "lora": (sha, then)}
    )
    assert [(c.key, c.kind) for c in again] == [
        ("preflight.capacity", ChangeKind.ADDED),
        ("preflight.lora.q_proj", ChangeKind.ADDED),
        ("preflight.lora.in_proj_qkvz", ChangeKind.ADDED),
    ]
    assert again[0].summary.startswith(
        "what it takes to fetch and hold is known again, the same as at `a1b2c3d4e5f6`: 2.00 "
        "bytes/parameter"
    )
    assert again[1].summary == (
        "`q_proj` resolves again to 12 modules in the full-attention layers, as at "
        "`a1b2c3d4e5f6` (unresolved at the previous revision: no config.json)"
    )
    full = {**NEXT, "full_attention_interval": 1}
    moved = preflight_delta(lost, _run(full, "F32"), {"capacity": (sha, then), "lora": (sha, then)})
    assert [(c.key, c.kind, c.before, c.after) for c in moved[1:]] == [
        (
            "preflight.lora.q_proj",
            ChangeKind.CHANGED,
            {"attention.full": 12},
            {"attention.full": 48},
        ),
        ("preflight.lora.in_proj_qkvz", ChangeKind.CHANGED, {"attention.linear": 36}, {}),
    ]
    assert moved[0].kind == ChangeKind.CHANGED
    assert (moved[0].before["bytes_per_param"], moved[0].after["bytes_per_param"]) == (2.0, 4.0)  # type: ignore[index]
    assert moved[0].summary == (
        "what it takes to fetch and hold changed since `a1b2c3d4e5f6` (unknown at the previous "
        "revision: no safetensors headers (nothing to count bytes from)): 4.00 bytes/parameter: "
        "4-bit weights would take 8.0× less (was 2.00 bytes/parameter: 4-bit weights would take "
        "4.0× less); weights 2.00 GB → 4.00 GB; download 2.00 GB → 4.00 GB, 0.00 → 0.01 h at "
        "126 MB/s"
    )
    # an earlier revision without the answer either: the low "found" as before
    [c, *_] = preflight_delta(lost, _run(NEXT, "BF16"), {"capacity": (sha, lost)})
    assert (c.key, c.kind) == ("preflight.capacity", ChangeKind.ADDED)
    assert c.summary.startswith("what it takes to fetch and hold is now known: ")


def test_a_change_from_an_earlier_revision_names_it_and_the_advice_pins_it() -> None:
    """A change compared with the last revision that had the answer carries that revision
    (`facts["since"]`); the advice pins it, not the previous revision that could not answer
    (no config.json, no safetensors: pinning it keeps nothing). In a group with changes from the
    previous revision too, the previous is pinned and the earlier one named for its keys."""
    then, lost = _run(NEXT, "BF16"), _run(None)
    sha = "a1b2c3d4e5f6" + "0" * 28
    full = {**NEXT, "full_attention_interval": 1}
    moved = preflight_delta(lost, _run(full, "F32"), {"capacity": (sha, then), "lora": (sha, then)})
    again = preflight_delta(
        lost, _run(NEXT, "BF16"), {"capacity": (sha, then), "lora": (sha, then)}
    )
    found = preflight_delta(lost, _run(NEXT, "BF16"))
    assert [dict(c.facts) for c in moved + again] == [{"since": sha}] * 6
    assert [dict(c.facts) for c in found] == [{}] * 3

    prev, new = "b" * 40, "c" * 40
    subject = Subject(RepoId("acme/next"), "https://hub/acme/next", Sha(new), Sha(prev), None, None)
    since = [Classified(c, Severity.HIGH, "preflight-lora-targets", "") for c in moved[1:]]
    ordinary = Classified(
        Change(Artifact.ESTIMATE, ChangeKind.CHANGED, "", "memory.inference", 1, 2, "more"),
        Severity.MODERATE,
        "estimate-memory",
        "",
    )
    pinned = advice(
        subject, ChangeGroup(Artifact.ESTIMATE, tuple(since), ()), Assessment(Kind.CHANGE, ())
    )
    assert pinned == [
        "The previous revision `bbbbbbbbbbbb` could not answer this; the answers above are "
        "compared with `a1b2c3d4e5f6`, the last revision before it that could. To keep the old "
        f'behaviour, pin `a1b2c3d4e5f6` (`revision="{sha}"` in `from_pretrained`). To take the '
        "change, upgrade to `cccccccccccc` or later once you re-check your hardware plan against "
        "the new estimate."
    ]
    mixed = advice(
        subject,
        ChangeGroup(Artifact.ESTIMATE, (ordinary, *since), ()),
        Assessment(Kind.REGRESSION, ()),
    )
    assert mixed == [
        "The previous revision `bbbbbbbbbbbb` could not answer `preflight.lora.q_proj`, "
        "`preflight.lora.in_proj_qkvz`: they are compared with `a1b2c3d4e5f6`, the last "
        "revision before it that could; pin that one to keep those answers. Stay on the "
        f'previous revision: pin `bbbbbbbbbbbb` (`revision="{prev}"` in `from_pretrained`) '
        "until a later revision fixes this (tracker marks this advisory fixed when one does). If "
        "you have already upgraded, re-check your hardware plan against the new estimate."
    ]
