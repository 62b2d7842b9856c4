"""How a revision's preflight answers moved against the previous revision's (pure).

Changes are estimate changes (`Artifact.ESTIMATE`, file "") keyed `preflight.*`, so they travel
with the estimate: they form the estimate advisory group (`tracker.advisories.groups`) and their
rules are in `tracker.advisories.rules`. Only a changed answer is a change. Whether the remote code
imports is no change when it is unknown on either side (no symbol table for a version, code not
checked): "could not check" is recorded with the preflight, never published as a difference. A
capacity or LoRA answer that the revision loses (safetensors replaced by .bin: no census; a config
the LoRA resolution cannot read) is a change, before → after ("`q_proj`: 61 modules → cannot
resolve: …"), kind CHANGED; one found where the previous revision had none (a first safetensors
upload, a first or repaired config.json) is a change of kind ADDED, published low (nothing that
worked breaks: the advisory states the answer now known); unknown on both sides is none. A LoRA
answer lost because config.json could not be read is not published: the unreadable config is an
advisory of its own, with the reason. One found after such a revision is published: it is the only
place the answer shows again (the config's own "readable again" change does not compare values).
Capacity is counted from the safetensors headers alone, so it is lost only with them (whether or
not config.json is readable at the same revision) and that loss is always published; its bytes per
parameter needs the config's layer count and bits, so it is not compared when either side's
config.json could not be read (a GPTQ 8-bit checkpoint read as 4-bit: 1.20 → 0.67).

An answer found after revisions that had none is compared with the last revision that had it
(`since`: the pipeline looks back along the ingested chain and re-runs that revision's preflight
under today's settings), so a loss that was not published (an unreadable config.json) or one that
was never undone does not turn a real move into a low "found": the same answer as then is an
ADDED change "known again, as at `<sha>`" (low; it undoes the loss's advisory where there was
one), a different one a CHANGED change from that revision's answer, classified as any other move
("`q_proj` now resolves to 48 modules … (was 12) since `<sha>`").

- `preflight.remote_code.transformers-<V>`: the remote code stops importing on V (BROKEN, with
  the remote-code files the revision lacks, the missing names, the module that lacks each and the
  version it vanished in), or imports again (CHANGED);
- `preflight.remote_code.native_builds`: the packages that need a native build changed;
- `preflight.capacity`: bytes per parameter (2 decimals), quantized or not, weights-only cards
  per card, which boxes hold the checkpoint, the weights' bytes, the download's bytes (and so its
  hours; any byte: a re-upload adding duplicate shards changes nothing else), or whether the
  download outlives the window moved (one change, before → after);
- `preflight.lora.<target>`: what a LoRA target name resolves to (modules per layer kind) moved.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tracker.preflight.capacity import Capacity
from tracker.preflight.report import CONFIG_UNREAD, Preflight
from tracker.shared.domain import Artifact, Change, ChangeKind, JSONValue

_ART = Artifact.ESTIMATE
KIND_WORDS = {
    "attention.full": "full-attention layers",
    "attention.linear": "linear-attention layers",
    "mlp.dense": "dense MLPs",
    "mlp.shared": "shared experts",
    "mlp.router": "routers",
    "mlp.experts": "routed experts",
    "vision": "vision tower",
    "head": "task head",
    "other": "rest of the model",  # modules of none of the kinds above (remote code's census)
}


SINCE = "since"
"""The `facts` key of a change compared with an earlier revision than the previous one (the
previous could not answer): that revision's full sha (the advice pins it, not the previous)."""

Since = Mapping[str, tuple[str, Preflight]]
"""For an answer the previous revision lacks ("capacity" / "lora"): the last earlier revision that
had it, (its sha, its preflight under today's settings)."""


def preflight_delta(
    before: Preflight, after: Preflight, since: Since | None = None
) -> list[Change]:
    """The `preflight.*` changes from `before` to `after`; `since`: for an answer `before` lacks,
    the last earlier revision that had it (see the module docstring)."""
    since = since or {}
    return [
        *_remote(before, after),
        *_capacity(before, after, since.get("capacity")),
        *_lora(before, after, since.get("lora")),
    ]


def _missing_text(version: Mapping[str, Any], first: Mapping[str, str]) -> str:
    parts = [f"cannot import: {p} is not in this revision" for p in version.get("absent") or []]
    parts += list(version.get("broken") or [])
    for m in version["missing"]:
        if m["where"] != "required" or m["status"] == "dynamic":
            continue
        lacks = (
            f"no module {m['module']}" if m["status"] == "no-module" else f"not in {m['module']}"
        )
        gone = first.get(m["symbol"])
        parts.append(
            f"{m['name'] or m['module']} ({lacks}" + (f", gone since {gone})" if gone else ")")
        )
    return ", ".join(parts)


def _remote(before: Preflight, after: Preflight) -> list[Change]:
    out: list[Change] = []
    rb, ra = before.remote_code, after.remote_code
    for version in after.settings.get("transformers") or []:
        was, now = rb.importable(version), ra.importable(version)
        if was is None or now is None or was == now:
            continue
        key = f"preflight.remote_code.transformers-{version}"
        if not now:
            row = next(
                (v for v in ra.versions if v["version"] == version),
                {"absent": ra.absent, "broken": ra.broken, "missing": []},
            )
            missing = _missing_text(row, ra.first_missing)
            out.append(
                Change(
                    _ART,
                    ChangeKind.BROKEN,
                    "",
                    key,
                    "importable",
                    f"does not import: {missing}",
                    f"remote code no longer imports on transformers {version}: {missing}",
                )
            )
        else:
            out.append(
                Change(
                    _ART,
                    ChangeKind.CHANGED,
                    "",
                    key,
                    "does not import",
                    "importable",
                    f"remote code imports on transformers {version} again",
                )
            )
    nb, na = sorted(rb.compiled), sorted(ra.compiled)
    if nb != na:
        added = [p for p in na if p not in nb]
        summary = (
            "remote code now needs a native build: " + ", ".join(added)
            if added
            else "remote code no longer needs a native build: "
            + ", ".join(p for p in nb if p not in na)
        )
        out.append(
            Change(
                _ART, ChangeKind.CHANGED, "", "preflight.remote_code.native_builds", nb, na, summary
            )
        )
    return out


def _capacity_view(p: Preflight) -> dict[str, JSONValue] | None:
    c = p.capacity
    if c is None:
        return None
    return {
        "bytes_per_param": None if c.bytes_per_param is None else round(c.bytes_per_param, 2),
        "quantized": c.quantized,
        "cards": dict(c.cards),
        "boxes_holding": sorted(name for name, b in c.boxes.items() if b["fits"]),
        "outlives_window": c.outlives_window,
        "weights_bytes": c.weights_bytes,
        # what a download fetches (the weight files' sizes in the tree): a re-upload adding
        # duplicate shards moves it with the same bytes/parameter; any byte counts
        "download_bytes": c.download_bytes,
        "download_source": c.download_source,
    }


def _gb(n: int) -> str:
    return f"{n / 1e9:,.2f} GB"


def _there(reason: str | None) -> str:
    """A previous revision's "why unknown", said of that revision ("no config.json", not "no
    config.json at this revision")."""
    return (reason or "no answer").replace(" at this revision", "")


def _held(c: Capacity) -> str:
    """One revision's capacity answer in a line (for an answer found where there was none)."""
    parts = [c.quantization_note, f"weights {_gb(c.weights_bytes)}"]
    parts.append(
        f"download {_gb(c.download_bytes)}, {c.download_hours:.2f} h at {c.throughput_mb_s:g} MB/s"
        + (f", outlives the {c.window_hours:g} h provisioning window" if c.outlives_window else "")
    )
    if c.cards:
        parts.append(
            "weights-only cards: " + ", ".join(f"{name} {n}" for name, n in c.cards.items())
        )
    holding = [name for name, b in c.boxes.items() if b["fits"]]
    short = [
        f"{name} ({b['short_gb']:,.0f} GB short)" for name, b in c.boxes.items() if not b["fits"]
    ]
    if holding:
        parts.append("held by " + ", ".join(holding))
    if short:
        parts.append("not held by " + ", ".join(short))
    return "; ".join(parts)


def _config_unread(p: Preflight) -> bool:
    """Whether `p`'s config.json could not be read (its LoRA answer says so)."""
    return (p.lora_error or "").startswith(CONFIG_UNREAD)


def _capacity(
    before: Preflight, after: Preflight, since: tuple[str, Preflight] | None = None
) -> list[Change]:
    vb, va = _capacity_view(before), _capacity_view(after)
    if vb is None and va is None:
        return []
    if vb is None:  # found: unknown at the previous revision
        ca = after.capacity
        assert ca is not None and va is not None
        was = f"unknown: {before.capacity_error}"
        why = f"unknown at the previous revision: {_there(before.capacity_error)}"
        if since is not None and since[1].capacity is not None:
            sha, fact = f"`{since[0][:12]}`", {SINCE: since[0]}
            moved = _capacity_moved(since[1], after)
            if moved is None:
                summary = (
                    f"what it takes to fetch and hold is known again, the same as at {sha}: "
                    f"{_held(ca)} ({why})"
                )
                kind = ChangeKind.ADDED
                return [Change(_ART, kind, "", "preflight.capacity", was, va, summary, facts=fact)]
            vs, va, notes = moved
            summary = f"what it takes to fetch and hold changed since {sha} ({why}): " + "; ".join(
                notes
            )
            kind = ChangeKind.CHANGED
            return [Change(_ART, kind, "", "preflight.capacity", vs, va, summary, facts=fact)]
        summary = f"what it takes to fetch and hold is now known: {_held(ca)} ({why})"
        return [Change(_ART, ChangeKind.ADDED, "", "preflight.capacity", was, va, summary)]
    if va is None:  # the revision loses an answer the previous one had
        cb = before.capacity
        assert cb is not None
        now = f"unknown: {after.capacity_error}"
        summary = (
            f"what it takes to fetch and hold changed: capacity {_gb(cb.weights_bytes)} → {now}"
        )
        return [Change(_ART, ChangeKind.CHANGED, "", "preflight.capacity", vb, now, summary)]
    moved = _capacity_moved(before, after)
    if moved is None:
        return []
    vb, va, notes = moved
    summary = "what it takes to fetch and hold changed: " + "; ".join(notes)
    return [Change(_ART, ChangeKind.CHANGED, "", "preflight.capacity", vb, va, summary)]


def _capacity_moved(
    before: Preflight, after: Preflight
) -> tuple[dict[str, JSONValue], dict[str, JSONValue], list[str]] | None:
    """How the capacity answer moved between two revisions that both have one: (before's view,
    after's view, one note per move), or None when it did not."""
    vb, va = _capacity_view(before), _capacity_view(after)
    assert vb is not None and va is not None
    if vb["download_source"] != va["download_source"]:
        # measured differently (tree sizes on one side only): not a change of the revision
        for v in (vb, va):
            v.pop("download_bytes")
    if _config_unread(before) or _config_unread(after):
        # counted without the config's layer count and bits (every layer's tensors, packed
        # weights unpacked at 4 bits): bytes per parameter moves with the config's readability,
        # not the revision's weights; the unreadable config.json is its own advisory
        for v in (vb, va):
            v.pop("bytes_per_param")
    if vb == va:
        return None
    cb, ca = before.capacity, after.capacity
    assert cb is not None and ca is not None
    notes: list[str] = []
    if vb.get("bytes_per_param") != va.get("bytes_per_param") or vb["quantized"] != va["quantized"]:
        notes.append(f"{ca.quantization_note} (was {cb.quantization_note})")
    moved = [
        f"{name} {vb['cards'].get(name, '—')} → {n}"  # type: ignore[union-attr]
        for name, n in ca.cards.items()
        if vb["cards"].get(name) != n  # type: ignore[union-attr]
    ]
    if moved:
        notes.append("weights-only cards: " + ", ".join(moved))
    for name, box in ca.boxes.items():
        held = (cb.boxes.get(name) or {}).get("fits")
        if held is not None and held != box["fits"]:
            notes.append(
                f"{name} now holds it"
                if box["fits"]
                else f"{name} no longer holds it ({box['short_gb']:,.0f} GB short)"
            )
    if vb["weights_bytes"] != va["weights_bytes"]:
        notes.append(f"weights {_gb(cb.weights_bytes)} → {_gb(ca.weights_bytes)}")
    if vb.get("download_bytes") != va.get("download_bytes") and "download_bytes" in va:
        notes.append(
            f"download {_gb(cb.download_bytes)} → {_gb(ca.download_bytes)}, "
            f"{cb.download_hours:.2f} → {ca.download_hours:.2f} h at {ca.throughput_mb_s:g} MB/s"
        )
    if vb["outlives_window"] != va["outlives_window"]:
        notes.append(
            f"download {cb.download_hours:.1f} → {ca.download_hours:.1f} h "
            + ("now outlives" if ca.outlives_window else "now fits")
            + f" the {ca.window_hours:g} h provisioning window"
        )
    return vb, va, notes


def _order(kind: str) -> int:
    return list(KIND_WORDS).index(kind) if kind in KIND_WORDS else len(KIND_WORDS)


def _where(a: Mapping[str, int]) -> str:
    """ "24 modules in the full-attention layers, 0 in the routed experts" (every layer kind)."""
    if not a:
        return "0 modules"
    kinds = sorted(a, key=_order)
    first, *rest = kinds
    text = f"{a[first]:,} modules in the {KIND_WORDS.get(first, first)}"
    return ", ".join([text, *(f"{a[k]:,} in the {KIND_WORDS.get(k, k)}" for k in rest)])


def _answer(p: Preflight, target: str) -> dict[str, int] | str | None:
    """What `target` resolves to (modules per layer kind), why it cannot be resolved, or None
    when `p` was not asked about it."""
    if p.lora is None:
        listed = target in (p.settings.get("lora_targets") or [])  # type: ignore[operator]
        return f"cannot resolve: {p.lora_error}" if listed else None
    if target in p.lora.targets:
        return {k: v["modules"] for k, v in p.lora.targets[target].items()}
    if target in p.lora.unresolved:
        return f"cannot resolve: {p.lora.unresolved[target]}"
    return None


def _moved(b: Mapping[str, int], a: Mapping[str, int]) -> str:
    """ "48 modules in the full-attention layers (was 12)", for each layer kind that moved."""
    parts = []
    for where in sorted(set(a) | set(b), key=_order):
        if a.get(where, 0) != b.get(where, 0):
            words = KIND_WORDS.get(where, where)
            parts.append(f"{a.get(where, 0)} modules in the {words} (was {b.get(where, 0)})")
    return ", ".join(parts)


def _lora(
    before: Preflight, after: Preflight, since: tuple[str, Preflight] | None = None
) -> list[Change]:
    out: list[Change] = []
    targets = list(after.lora.targets) if after.lora is not None else []
    targets += list(after.lora.unresolved) if after.lora is not None else []
    targets += [str(t) for t in after.settings.get("lora_targets") or []]  # type: ignore[union-attr]
    for target in dict.fromkeys(targets):
        b, a = _answer(before, target), _answer(after, target)
        if b is None or a is None or b == a or (isinstance(b, str) and isinstance(a, str)):
            continue  # not asked on one side, the same, or unknown on both sides
        if isinstance(a, str) and (after.lora_error or "").startswith(CONFIG_UNREAD):
            continue  # lost with an unreadable config.json, its own advisory
        kind, fact = ChangeKind.CHANGED, {}
        if isinstance(b, str) and not isinstance(a, str):  # found (the module docstring)
            kind = ChangeKind.ADDED
            why = (
                f"unresolved at the previous revision: {_there(b.removeprefix('cannot resolve: '))}"
            )
            then = _answer(since[1], target) if since is not None else None
            if since is None or not isinstance(then, dict):
                summary = f"`{target}` now resolves to {_where(a)} ({why})"
            else:  # compared with the last revision that had the answer
                fact, at = {SINCE: since[0]}, f"`{since[0][:12]}`"
                if then == a:
                    summary = f"`{target}` resolves again to {_where(a)}, as at {at} ({why})"
                else:
                    kind, b = ChangeKind.CHANGED, then
                    summary = f"`{target}` now resolves to {_moved(then, a)} since {at} ({why})"
        elif isinstance(a, str) and not isinstance(b, str):
            summary = f"`{target}`: {sum(b.values()):,} modules → {a}"
        elif not isinstance(a, str) and not isinstance(b, str):
            summary = f"`{target}` now resolves to " + _moved(b, a)
        out.append(
            Change(_ART, kind, "", f"preflight.lora.{target}", b, a, summary, facts=fact)  # type: ignore[arg-type]
        )
    return out
