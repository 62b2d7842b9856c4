"""Group one revision's classified changes into the advisories they make (pure).

One advisory per (repo, revision, group); a group is an artifact kind (`Artifact`), and estimate
changes form the `estimate` group only when a setup stops or starts fitting a card, the parameter
counts change or a preflight answer changes (`preflight.*`: remote code, capacity, LoRA targets;
the rest ride along as the estimate table of every advisory's details). Both the
record builder (`osv`) and the details renderer (`details`) take the `ChangeGroup` made here, and the
`Subject` (the revision) every advisory of a revision shares.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tracker.advisories.classify import Classified, highest
from tracker.advisories.generation import Generation
from tracker.shared.domain import Artifact, ChangeKind, Commit, Estimate, RepoId, Severity, Sha

ESTIMATE_GROUP = Artifact.ESTIMATE
DTYPE_KEYS = frozenset({"torch_dtype", "dtype"})
"""config.json keys that name the checkpoint's dtype (a re-upload in another dtype moves them)."""
_ESTIMATE_TRIGGERS = (ChangeKind.FIT_LOST, ChangeKind.FIT_GAINED)
_GROUP_ORDER = list(Artifact)


@dataclass(frozen=True)
class Subject:
    """The revision a set of advisories is about: the repo and its URL, the commit that introduced
    the changes and the one before it (None: the first ingested), the estimate reports of both, and
    the introducing commit as the source lists it (title, message, authors, date; None: unknown),
    the effective generation defaults of both (`tracker.advisories.generation`; None: not
    known), and `broken_before`: the ids of open advisories whose consistency findings the
    previous revision has (advice then never pins it)."""

    repo_id: RepoId
    repo_url: str
    introduced: Sha
    previous: Sha | None
    estimate_before: Estimate | None
    estimate_after: Estimate | None
    commit: Commit | None = None
    generation_before: Generation | None = None
    generation_after: Generation | None = None
    kept: Sha | None = None
    """The revision advice pins when not the previous one (which does not load)."""
    previous_lacks: str = "no readable config.json"
    """Why the previous revision does not load (`tracker.advisories.loading`), when it does not."""
    nothing_to_pin: bool = False
    """No ingested revision before this one both loads and lacks the advisory's changes."""
    broken_before: tuple[str, ...] = ()
    fixed_here: tuple[str, ...] = ()
    """Ids of advisories with consistency findings this revision fixes: the previous revision has
    their defects, so advice never pins it."""

    @property
    def url(self) -> str:
        """`repo_url` without a trailing slash (how records name the repo)."""
        return self.repo_url.rstrip("/")


@dataclass(frozen=True)
class ChangeGroup:
    """The changes of one revision that make one advisory; `severity` is the highest published one."""

    name: Artifact
    published: tuple[Classified, ...]
    suppressed: tuple[Classified, ...]

    @property
    def severity(self) -> Severity:
        return highest([c.severity for c in self.published])


def group_of(c: Classified) -> Artifact | None:
    """The group a classified change belongs to (None: an estimate change that only rides along)."""
    ch = c.change
    if ch.artifact is Artifact.ESTIMATE:
        if ch.kind in _ESTIMATE_TRIGGERS or ch.key.startswith(("params.", "preflight.")):
            return ESTIMATE_GROUP
        return None
    return ch.artifact


def is_reupload(group: ChangeGroup) -> bool:
    """Whether `group` is a re-upload's one advisory (`_merge_reupload`)."""
    return group.name is Artifact.WEIGHTS and any(
        c.change.artifact is not Artifact.WEIGHTS for c in group.published
    )


def _merge_reupload(buckets: dict[Artifact, list[Classified]]) -> None:
    """One advisory per cause, for a re-upload: when the weights' tensors are retyped, the
    config's dtype keys move with them into the weights group, and so does the estimate group
    when the config changed nothing else (the re-upload is then what moved the estimate).
    Other changes of the revision keep their own groups."""
    weights = buckets.get(Artifact.WEIGHTS, [])
    if not any(c.change.kind is ChangeKind.RETYPED and c.suppressed is None for c in weights):
        return
    config = buckets.get(Artifact.CONFIG, [])
    dtype = [c for c in config if c.change.key.rpartition(".")[2] in DTYPE_KEYS]
    rest = [c for c in config if c not in dtype]
    if not any(c.suppressed is None for c in dtype):
        return
    weights.extend(dtype)
    if rest:
        buckets[Artifact.CONFIG] = rest
    else:
        buckets.pop(Artifact.CONFIG, None)
    if not any(c.suppressed is None for c in rest):
        weights.extend(buckets.pop(ESTIMATE_GROUP, []))


def group_changes(classified: Sequence[Classified]) -> tuple[ChangeGroup, ...]:
    """Group one revision's classified changes; groups with no unsuppressed change are dropped.

    Order: groups in `Artifact` declaration order; changes keep their input order. Estimate
    changes form the `estimate` group only for FIT_LOST/FIT_GAINED, `params.*` or `preflight.*` keys.
    A re-upload in another dtype (retyped tensors with the config's dtype) is one weights group
    with the dtype and estimate changes (`_merge_reupload`).
    Suppressed changes stay attached to their group's advisory if it has one; callers record all
    suppressions separately as well.
    """
    buckets: dict[Artifact, list[Classified]] = {}
    for c in classified:
        g = group_of(c)
        if g is not None:
            buckets.setdefault(g, []).append(c)
    _merge_reupload(buckets)
    out = []
    for name in sorted(buckets, key=_GROUP_ORDER.index):
        items = buckets[name]
        pub = tuple(c for c in items if c.suppressed is None)
        sup = tuple(c for c in items if c.suppressed is not None)
        if pub:
            out.append(ChangeGroup(name, pub, sup))
    return tuple(out)
