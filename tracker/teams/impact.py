"""Affected or not, with the reason, for one advisory × one team.

Where the team is in the repo's history decides *when* (`AFFECTED` today: its pinned revision is
in the advisory's versions; `NEXT_UPGRADE`: introduced after its pin and still open at HEAD; not
affected: fixed before its pin, or reverted before HEAD). What the team does decides *whether*:

- generation defaults: not a team that passes those settings itself, nor one that only trains;
- chat template: not a team that does not apply the template;
- tokenizer padding and pad-token ids: not a team that neither pads nor uses a classification head;
- remote code: the import on the transformers version the team runs (the stored preflight);
- a fit move: the team's own workloads re-estimated on its own cards before and after (crossing
  the verdict or not);
- the model card: never;
- anything else the team loads (config, weights, other tokenizer keys): affected.

Whatever the profile leaves out is said as UNKNOWN with the fields it misses. Pure: the store's
facts come through `Facts`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any, Protocol

from tracker.advisories.lifecycle import state_of
from tracker.estimate import estimate
from tracker.estimate.settings import DEFAULT_SETTINGS, Card, EstimateSettings
from tracker.preflight.report import RemoteCode
from tracker.shared.domain import Advisory, AdvisoryState, Artifact, RepoId, Sha
from tracker.shared.errors import EstimateError
from tracker.teams.profile import Team, TeamRepo, Workload


class Impact(StrEnum):
    AFFECTED = "affected"
    NEXT_UPGRADE = "affects your next upgrade"
    NOT_AFFECTED = "not affected"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Position:
    """Where a team is in a repo's ingested history (oldest first)."""

    order: tuple[Sha, ...]
    pinned: Sha
    head: Sha

    def seq(self, sha: str) -> int | None:
        return self.order.index(Sha(sha)) if sha in self.order else None


class Facts(Protocol):
    """What the store knows, as the judgement needs it."""

    def position(self, repo_id: RepoId, spec: str | None) -> Position | str:
        """The team's place (spec: a revision or ref; None: the watched ref) or why not."""

    def remote_code(self, repo_id: RepoId, sha: Sha) -> RemoteCode | None:
        """The stored preflight's remote-code answer at `sha` (None: none stored)."""

    def config(self, repo_id: RepoId, sha: Sha) -> Mapping[str, Any] | None:
        """config.json at `sha` (None: not stored or unreadable)."""


@dataclass(frozen=True)
class Verdict:
    """One advisory × one team."""

    advisory_id: str
    repo_id: RepoId
    team: str
    impact: Impact
    reason: str
    missing: tuple[str, ...] = ()


# (affected?, reason, missing fields); None: unknown
Relevance = tuple[bool | None, str, tuple[str, ...]]

BOOKKEEPING = frozenset({"transformers_version", "_name_or_path", "name_or_path"})
GENERATION_KEYS_IN_CONFIG = frozenset(
    {"max_length", "min_length", "do_sample", "temperature", "top_p", "top_k", "num_beams",
     "repetition_penalty", "length_penalty", "no_repeat_ngram_size"}
)  # fmt: skip
PAD_KEYS = frozenset({"pad_token", "pad_token_id", "padding_side"})


def _record_changes(adv: Advisory) -> tuple[list[Mapping[str, Any]], list[Mapping[str, Any]]]:
    ds = adv.record.get("database_specific")
    ds = ds if isinstance(ds, dict) else {}
    changes: list[Mapping[str, Any]] = [c for c in ds.get("changes") or () if isinstance(c, dict)]
    findings: list[Mapping[str, Any]] = [f for f in ds.get("findings") or () if isinstance(f, dict)]
    return changes, findings


def _keys(adv: Advisory) -> list[str]:
    changes, findings = _record_changes(adv)
    out: list[str] = []
    for item in [*changes, *findings]:
        key = str(item.get("key", ""))
        if key and key not in out:
            out.append(key)
    return out


def _names(keys: Sequence[str]) -> str:
    return ", ".join(f"`{k}`" for k in keys)


SHOWN_KEYS = 5
"""How many changed keys a reason names before it says how many more (a weights advisory changes
hundreds of tensors: the reason is shortened by dropping names, never by cutting one)."""


def _some_names(keys: Sequence[str], group: Artifact) -> str:
    """The first SHOWN_KEYS of `keys` in backticks, then "and N more tensors" (every dropped
    key a tensor name of a weights change) or "and N more keys". A weights change names its
    file-wide keys (`content`, `total_bytes`, ...) before its tensors (dotted names)."""
    if len(keys) <= SHOWN_KEYS:
        return _names(keys)
    if group is Artifact.WEIGHTS:
        keys = [k for k in keys if "." not in k] + [k for k in keys if "." in k]
    rest = keys[SHOWN_KEYS:]
    noun = "tensors" if group is Artifact.WEIGHTS and all("." in k for k in rest) else "keys"
    return f"{_names(keys[:SHOWN_KEYS])} and {len(rest)} more {noun}"


def _generation(keys: Sequence[str], use: TeamRepo) -> Relevance:
    keys = [k for k in keys if not k.startswith("_") and k not in BOOKKEEPING]
    if not keys:
        return False, "bookkeeping keys only: generate() behaves the same", ()
    if use.workloads is not None and not any(w.kind == "serve" for w in use.workloads):
        return False, "the team does not generate with it (fine-tuning only)", ()
    if use.generation is None:
        return (
            None,
            f"the profile does not say which generation settings the team passes ({_names(keys)} changed)",
            ("generation",),
        )
    if use.generation == "all":
        return False, "the team passes every generation setting itself", ()
    own = [k for k in keys if k in use.generation]
    default = [k for k in keys if k not in use.generation]
    if not default:
        return False, f"the team passes {_names(own)} itself", ()
    return True, f"the team takes the repo's default for {_names(default)}", ()


def _padding(keys: Sequence[str], use: TeamRepo) -> Relevance:
    if use.padding is True:
        return True, f"the team pads with the tokenizer ({_names(keys)} changed)", ()
    head = any(k.endswith("_id") for k in keys)  # model code reads the config's pad id
    if head and use.classification_head is True:
        return True, f"the classification head reads the pad id ({_names(keys)} changed)", ()
    missing = tuple(
        f
        for f, v in (("padding", use.padding), ("classification_head", use.classification_head))
        if v is None and (f == "padding" or head)
    )
    if missing:
        return (
            None,
            f"{_names(keys)} changed; the profile does not say "
            + " or ".join(
                {
                    "padding": "whether the team pads",
                    "classification_head": "whether it uses a classification head",
                }[m]
                for m in missing
            ),
            missing,
        )
    if head:
        return False, "the team neither pads nor uses a classification head", ()
    return False, "the team does not pad with the tokenizer", ()


def _remote_code(adv: Advisory, team: Team, use: TeamRepo, facts: Facts) -> Relevance:
    if use.trust_remote_code is False:
        return False, "the team does not run remote code (trust_remote_code off)", ()
    if use.trust_remote_code is None:
        return (
            None,
            "the profile does not say whether the team runs remote code",
            ("trust_remote_code",),
        )
    if team.transformers is None:
        return (
            None,
            "the profile does not say which transformers version the team runs",
            ("transformers",),
        )
    rc = facts.remote_code(adv.repo_id, adv.introduced)
    if rc is None:
        return None, f"no preflight is stored for {adv.introduced[:12]}", ()
    v = team.transformers
    ok = rc.importable(v)
    if ok is None:
        return (
            None,
            f"preflight did not check transformers {v} (add it to the watchlist's "
            "preflight.transformers)",
            (),
        )
    if ok:
        return (
            False,
            f"the remote code imports on transformers {v} (it is still new code that runs under "
            "trust_remote_code: review it)",
            (),
        )
    return True, f"the remote code does not import on transformers {v}{rc.why_not(v)}", ()


def _settings(team: Team, w: Workload) -> EstimateSettings:
    assert team.cards is not None
    card = Card(team.cards.name, team.cards.vram_gb)
    s = replace(DEFAULT_SETTINGS, cards=(card,), extra_cards=())
    if w.context:
        s = replace(s, train_seq_len=w.context, serve_seq_len=w.context)
    if w.rank:
        s = replace(s, lora_rank=w.rank)
    if w.kind == "qlora":
        s = replace(s, lora_base="nf4")
    if w.sharding and w.sharding != "none":
        s = replace(s, sharding=w.sharding, shards=team.cards.count)
    if w.kind == "serve":
        s = replace(s, serve_shards=w.tensor_parallel or 1)
    return s


def largest_batch(config: Mapping[str, Any], team: Team, w: Workload) -> int:
    assert team.cards is not None
    est = estimate(config, None, _settings(team, w))
    fit = est.card(team.cards.name)
    assert fit is not None
    setup = {"serve": "serve", "full": "full_finetune"}.get(w.kind, "lora")
    return fit.fit(setup).batch


def _fit(adv: Advisory, team: Team, use: TeamRepo, facts: Facts) -> Relevance:
    missing = tuple(
        f for f, v in (("cards", team.cards), ("workloads", use.workloads)) if v is None
    )
    if missing:
        return (
            None,
            "the estimate moved; the profile does not give the team's " + " and ".join(missing),
            missing,
        )
    ds = adv.record.get("database_specific")
    previous = ds.get("previous") if isinstance(ds, dict) else None
    if not isinstance(previous, str):
        return None, "no earlier revision to compare the fit with", ()
    before = facts.config(adv.repo_id, Sha(previous))
    after = facts.config(adv.repo_id, adv.introduced)
    if before is None or after is None:
        return None, "config.json is not readable at both revisions", ()
    assert team.cards is not None and use.workloads is not None
    crossed, kept = [], []
    for w in use.workloads:
        try:
            b, a = largest_batch(before, team, w), largest_batch(after, team, w)
        except EstimateError as exc:
            return None, f"no estimate for {w}: {exc}", ()
        fits_b, fits_a = b >= w.batch, a >= w.batch
        if fits_b and not fits_a:
            crossed.append(f"{w} no longer fits {team.cards} (largest batch {b} → {a})")
        elif fits_a and not fits_b:
            crossed.append(f"{w} now fits {team.cards} (largest batch {b} → {a})")
        else:
            verdict = "fits" if fits_a else "does not fit"
            kept.append(f"{w} still {verdict} {team.cards} (largest batch {b} → {a})")
    if crossed:
        return True, "; ".join(crossed), ()
    return False, "; ".join(kept), ()


IMPORT_KEY = "preflight.remote_code.transformers-"
"""How the key of a preflight import change begins (the version follows): the remote code starts
or stops importing on that transformers version (`tracker.preflight.delta`)."""


def import_break_versions(adv: Advisory) -> tuple[str, ...] | None:
    """The transformers versions an advisory made only of preflight import changes is about, in
    record order; None when it holds anything else (judged as any other advisory)."""
    ds = adv.record.get("database_specific")
    changes = ds.get("changes") if isinstance(ds, dict) else None
    if not isinstance(changes, list) or not changes:
        return None
    keys = [c.get("key") if isinstance(c, dict) else None for c in changes]
    if not all(isinstance(k, str) and k.startswith(IMPORT_KEY) for k in keys):
        return None
    return tuple(dict.fromkeys(str(k).removeprefix(IMPORT_KEY) for k in keys))


def _import_break(versions: Sequence[str], team: Team, use: TeamRepo) -> Relevance:
    on = ", ".join(versions)
    if use.trust_remote_code is False:
        return False, "the team does not run remote code (trust_remote_code off)", ()
    if use.trust_remote_code is None:
        return (
            None,
            f"the import changed on transformers {on}; the profile does not say whether the "
            "team runs remote code",
            ("trust_remote_code",),
        )
    if team.transformers is None:
        return (
            None,
            f"the import changed on transformers {on}; the profile does not say which "
            "transformers version the team runs",
            ("transformers",),
        )
    if team.transformers in versions:
        return True, f"the import changed on transformers {on}, which the team runs", ()
    return (
        False,
        f"the import changed on transformers {on} only; the team runs {team.transformers}",
        (),
    )


def relevance(adv: Advisory, team: Team, use: TeamRepo, facts: Facts) -> Relevance:
    """Whether what the advisory changes touches what the team does, and why."""
    broken = import_break_versions(adv)
    if broken is not None:
        return _import_break(broken, team, use)
    keys = _keys(adv)
    group = adv.group
    ds = adv.record.get("database_specific")
    estimate_moved = bool(isinstance(ds, dict) and ds.get("estimate_changes"))
    if group is Artifact.MODEL_CARD:
        return False, "a model card change: nothing the team loads or runs", ()
    if group is Artifact.LINEAGE:
        return _stale(adv, use)
    if group is Artifact.ESTIMATE or (estimate_moved and group is Artifact.CONFIG):
        fit = _fit(adv, team, use, facts)
        if group is Artifact.ESTIMATE or fit[0]:
            return fit
        rest = relevance_of_keys(adv, team, use, facts, keys)
        return rest[0], f"{rest[1]}; {fit[1]}" if fit[0] is False else rest[1], rest[2]
    return relevance_of_keys(adv, team, use, facts, keys)


def _stale(adv: Advisory, use: TeamRepo) -> Relevance:
    """A stale derivative, or one that differs from its base (`tracker.advisories.stale`): a chat
    template alone matters to a team that applies it; an id, generation default or tokenizer to
    every team that runs the repo."""
    ds = adv.record.get("database_specific")
    lineage = ds.get("lineage") if isinstance(ds, dict) else None
    stale = lineage.get("stale") if isinstance(lineage, dict) else None
    keys = list(dict.fromkeys(str(s.get("key")) for s in stale or () if isinstance(s, dict)))
    base = lineage.get("base") if isinstance(lineage, dict) else None
    differs = isinstance(lineage, dict) and lineage.get("kind") == "differs"
    if keys == ["chat_template"]:
        if use.chat_template is None:
            return (
                None,
                "the profile does not say whether the team applies the chat template",
                ("chat_template",),
            )
        if not use.chat_template:
            return False, "the team does not apply the chat template", ()
        if differs:
            return True, f"the team applies the chat template, which differs from {base}'s", ()
        return True, f"the team applies the chat template, which {base} has since fixed", ()
    if differs:
        return True, f"the repo differs from its base {base} in {_names(keys)}", ()
    return True, f"the repo still has values its base {base} left: {_names(keys)}", ()


def relevance_of_keys(
    adv: Advisory, team: Team, use: TeamRepo, facts: Facts, keys: Sequence[str]
) -> Relevance:
    """`relevance` by the group and the keys that changed (the fit aside)."""
    group = adv.group
    if group is Artifact.GENERATION_CONFIG:
        return _generation(keys, use)
    if group is Artifact.CHAT_TEMPLATE:
        if use.chat_template is None:
            return (
                None,
                "the profile does not say whether the team applies the chat template",
                ("chat_template",),
            )
        if use.chat_template:
            return True, "the team applies the chat template, which renders differently", ()
        return False, "the team does not apply the chat template", ()
    if group is Artifact.CUSTOM_CODE:
        return _remote_code(adv, team, use, facts)
    if group in (Artifact.TOKENIZER, Artifact.SPECIAL_TOKENS) and keys and set(keys) <= PAD_KEYS:
        return _padding(keys, use)
    if group is Artifact.CONFIG and keys and set(keys) <= GENERATION_KEYS_IN_CONFIG | BOOKKEEPING:
        return _generation(keys, use)
    meaningful = [k for k in keys if k not in BOOKKEEPING]
    if keys and not meaningful:
        return False, f"bookkeeping only ({_names(keys)}): nothing the team runs changes", ()
    what = _some_names(meaningful, group) if meaningful else "the change"
    return True, f"the team loads {group.value.replace('_', ' ')}: {what} changed", ()


def versions_of(adv: Advisory) -> set[str]:
    out: set[str] = set()
    affected = adv.record.get("affected")
    for aff in affected if isinstance(affected, list) else []:
        if isinstance(aff, dict):
            out.update(v for v in aff.get("versions") or () if isinstance(v, str))
    return out


def judge(adv: Advisory, team: Team, facts: Facts) -> Verdict:
    """Affected or not, and why, for `adv` and `team`."""

    def verdict(impact: Impact, reason: str, missing: tuple[str, ...] = ()) -> Verdict:
        return Verdict(adv.id, adv.repo_id, team.name, impact, reason, missing)

    use = team.repo(adv.repo_id)
    if use is None:
        return verdict(Impact.NOT_AFFECTED, f"the team does not use {adv.repo_id}")
    state = state_of(adv.record)
    if state is AdvisoryState.WITHDRAWN:
        return verdict(Impact.NOT_AFFECTED, "the advisory is withdrawn")
    pos = facts.position(adv.repo_id, use.revision or use.follows)
    if isinstance(pos, str):
        return verdict(
            Impact.UNKNOWN, f"the team's place in the history is unknown: {pos}", ("revision",)
        )
    pinned, intro = pos.seq(pos.pinned), pos.seq(adv.introduced)
    where = "its pinned revision" if use.revision else "HEAD"
    if pos.pinned in versions_of(adv):
        when = Impact.AFFECTED
    elif intro is not None and pinned is not None and intro > pinned:
        if state is not AdvisoryState.OPEN:
            return verdict(
                Impact.NOT_AFFECTED,
                "introduced after its pinned revision and fixed before HEAD: the next upgrade "
                "skips it",
            )
        when = Impact.NEXT_UPGRADE
    else:
        return verdict(Impact.NOT_AFFECTED, f"fixed at or before {where} ({pos.pinned[:12]})")
    hit, reason, missing = relevance(adv, team, use, facts)
    if hit is None:
        return verdict(Impact.UNKNOWN, reason, missing)
    if not hit:
        return verdict(Impact.NOT_AFFECTED, reason)
    if when is Impact.NEXT_UPGRADE:
        reason = f"introduced after its pinned revision ({pos.pinned[:12]}): {reason}"
    return verdict(when, reason)
