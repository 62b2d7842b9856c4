"""Advisory lifecycle on OSV records: extend versions, fix on restore, withdraw on rewrite (pure; `now` passed in).

An open advisory keeps a `pending` list (stored beside the record, not in it): for each change, its
location (artifact, file, key), a digest of its value before, and a digest of the current value.
A later change at the same location updates the current digest; when every entry's current digest
equals its before digest again, the advisory is fixed at that commit. An advisory that carries
consistency findings has an entry per finding too (`cured`): the finding is the defect,
so a change entry at the key a finding is about counts as restored once the finding is resolved
(bloom-560m's `architectures` naming a class transformers does not define, then one it does).
After a history rewrite the service re-derives state from the ref's line
(`service.restore_revived`): a fix whose commit a push brings back fixes again (WAS_FIXED, or an
earlier one of EARLIER_FIXES when rewrites removed several), and
`versions` is exactly the line's revisions from the introducing commit up to the fixing one.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from tracker.advisories.details import advice_of, commit_line, with_advice, with_status
from tracker.advisories.osv import commit_url
from tracker.diff import CONVERSATION_IDS
from tracker.shared.domain import (
    AdvisoryState,
    Change,
    ChangeKind,
    Commit,
    JSONValue,
    Sha,
    is_full_sha,
    rfc3339,
)
from tracker.shared.errors import AdvisoryError

Location = tuple[str, str, str]


@dataclass(frozen=True)
class PendingChange:
    """One change of an open advisory: where it is, digests of the value before, after and now."""

    artifact: str
    file: str
    key: str
    before: str
    current: str
    after: str = ""

    @property
    def location(self) -> Location:
        return (self.artifact, self.file, self.key)

    @property
    def restored(self) -> bool:
        return self.before == self.current

    def to_json(self) -> dict[str, str]:
        return {
            "artifact": self.artifact,
            "file": self.file,
            "key": self.key,
            "before": self.before,
            "current": self.current,
            "after": self.after,
        }

    @classmethod
    def from_json(cls, raw: Mapping[str, str]) -> PendingChange:
        return cls(
            raw["artifact"],
            raw["file"],
            raw["key"],
            raw["before"],
            raw["current"],
            raw.get("after", ""),
        )


def value_digest(value: JSONValue) -> str:
    """A stable digest of a JSON value (canonical JSON, sorted keys)."""
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _location(change: Change) -> Location:
    return (change.artifact.value, change.file, change.key)


MANIFEST_KEYS = frozenset({"shards", "total_bytes", "dtypes", "duplicates", "content"})
"""Keys of the weight manifest as a whole (not one tensor). Their `file` names what carries them,
and that attribution moved: first the index file (`model.safetensors.index.json`, even in repos
without one), now the shards when there is no index, and the shard list itself changes between
revisions. So they are matched on (artifact, key) alone."""


def same_place(location: Location) -> Location:
    """The identity a pending entry and a later change are matched on: the location, without the
    file for weight-manifest keys (see MANIFEST_KEYS), so advisories stored under an earlier
    attribution still meet the changes that fix them."""
    artifact, _file, key = location
    if artifact == "weights" and key in MANIFEST_KEYS:
        return (artifact, "", key)
    return location


def _trackable(change: Change) -> bool:
    # "Could not read" says nothing about the value, so it can neither introduce nor restore one.
    return change.kind is not ChangeKind.UNREADABLE


def initial_pending(changes: Sequence[Change]) -> tuple[PendingChange, ...]:
    """The pending list of a new advisory made of `changes` (one entry per location, first wins)."""
    seen: dict[Location, PendingChange] = {}
    for ch in changes:
        loc = _location(ch)
        if same_place(loc) not in seen:
            after = value_digest(ch.after)
            seen[same_place(loc)] = PendingChange(
                *loc, before=value_digest(ch.before), current=after, after=after
            )
    return tuple(seen.values())


FINDINGS = "findings"
RENDERED = "rendered"
FINDING_ARTIFACT = "consistency"
"""The artifact of a consistency finding's pending entry (`tracker.advisories.broken`)."""
TEMPLATE_ARTIFACT = "chat_template"


def _rendered(p: PendingChange) -> bool:
    """Whether `p` is a chat template's rendered canonical conversation (not its source)."""
    return p.artifact == TEMPLATE_ARTIFACT and p.key.split(":")[-1] in CONVERSATION_IDS


def cured(pending: Sequence[PendingChange]) -> tuple[bool, str]:
    """(whether the advisory's effect is gone, how: "" when every value is back, FINDINGS or
    RENDERED when one of these exceptions decided it) for `pending` after a revision: every
    entry is restored, except that

    - a change's entry at a (file, key) that one of the advisory's findings is about counts as
      restored once every finding there is resolved: the finding is what the change broke (a
      class transformers does not define, an id outside the vocabulary), so the defect is gone
      although the value need not be the one before (`architectures` naming another class
      transformers defines);
    - a chat template's source counts as restored once every rendered conversation the
      advisory is about renders as before: what the model sees is back, whatever the template's
      text (a revert written differently that renders the same prompts)."""
    at: dict[tuple[str, str], list[PendingChange]] = {}
    for p in pending:
        if p.artifact == FINDING_ARTIFACT and ":" in p.key:
            at.setdefault((p.file, p.key.split(":", 1)[1]), []).append(p)
    renders = [p for p in pending if _rendered(p)]
    rendered_back = bool(renders) and all(p.restored for p in renders)
    how = ""
    for p in pending:
        if p.restored:
            continue
        if p.artifact == TEMPLATE_ARTIFACT and not _rendered(p) and rendered_back:
            how = how or RENDERED
            continue
        found = at.get((p.file, p.key)) if p.artifact != FINDING_ARTIFACT else None
        if not found or not all(f.restored for f in found):
            return False, ""
        how = FINDINGS
    return True, how


@dataclass(frozen=True)
class Advance:
    """What a new revision's changes do to one open advisory."""

    pending: tuple[PendingChange, ...]
    restoring: frozenset[
        int
    ]  # indices of the revision's changes that directly undo this advisory's
    fixed: bool


def advance(pending: Sequence[PendingChange], changes: Sequence[Change]) -> Advance:
    """Apply a revision's `changes` to an advisory's `pending` entries.

    A change at a pending location (matched by `same_place`; the entry takes the change's
    current attribution) sets that entry's current digest to its `after`. It is
    "restoring" when it directly undoes the advisory's change: its after equals the entry's
    before and its before equals the entry's original after (a change from some third value that
    happens to restore is a change of its own). `fixed` is true when something was touched by this
    revision and every entry's current value equals its before value. UNREADABLE changes are ignored.
    """
    by_loc = {same_place(p.location): p for p in pending}
    restoring: set[int] = set()
    touched = False
    for i, ch in enumerate(changes):
        loc = _location(ch)
        place = same_place(loc)
        if place not in by_loc or not _trackable(ch):
            continue
        touched = True
        entry = by_loc[place]
        entry = PendingChange(
            *loc, before=entry.before, current=value_digest(ch.after), after=entry.after
        )
        by_loc[place] = entry
        if entry.restored and value_digest(ch.before) == entry.after:
            restoring.add(i)
    new = tuple(by_loc[same_place(p.location)] for p in pending)
    return Advance(
        new, frozenset(restoring), touched and bool(new) and all(p.restored for p in new)
    )


def _affected_range(
    record: dict[str, JSONValue],
) -> tuple[dict[str, JSONValue], dict[str, JSONValue]]:
    try:
        aff = record["affected"][0]
        rng = next(r for r in aff["ranges"] if r["type"] == "GIT")
    except (KeyError, IndexError, StopIteration, TypeError) as exc:
        raise AdvisoryError(f"{record.get('id')!r}: record has no GIT range") from exc
    return aff, rng


def is_open(record: Mapping[str, JSONValue]) -> bool:
    """True when the record is neither withdrawn nor has a fixed event."""
    if record.get("withdrawn"):
        return False
    for aff in record.get("affected") or []:
        for rng in aff.get("ranges") or []:
            if any("fixed" in ev for ev in rng.get("events") or []):
                return False
    return True


def state_of(record: Mapping[str, JSONValue]) -> AdvisoryState:
    """The lifecycle state a record shows: withdrawn, else fixed (a `fixed` event), else open."""
    if record.get("withdrawn"):
        return AdvisoryState.WITHDRAWN
    return AdvisoryState.OPEN if is_open(record) else AdvisoryState.FIXED


def add_version(record: Mapping[str, JSONValue], sha: Sha, now: datetime) -> dict[str, JSONValue]:
    """A copy of `record` with `sha` appended to `versions` and `modified = now` (no-op copy if present)."""
    if not is_full_sha(sha):
        raise AdvisoryError(f"version {sha!r} is not a full 40-hex sha")
    out = copy.deepcopy(dict(record))
    aff, _ = _affected_range(out)
    if sha in aff["versions"]:
        return out
    aff["versions"].append(sha)
    out["modified"] = rfc3339(now)
    return out


def _details(record: Mapping[str, JSONValue], paragraph: str | None) -> str | None:
    details = record.get("details")
    return with_status(details, paragraph) if isinstance(details, str) else None


OPEN_ADVICE = "open_advice"
"""`database_specific` key holding the "What to do" of the open advisory while it is not open
(fixed or withdrawn), so that reopening or restoring it gives its advice back."""


FIXED_HOW = "fixed_how"
"""`database_specific` key saying how the fix was decided: "findings" when the advisory's
consistency findings were resolved without every value returning to its earlier one
(`cured`); absent when every value is back."""
WAS_FIXED = "was_fixed"
"""`database_specific` key of a reopened advisory: the fixing commit a rewrite removed, so that a
push that brings it back fixes the advisory there again."""
EARLIER_FIXES = "earlier_fixes"
"""`database_specific` key: the other fixing commits rewrites removed before WAS_FIXED, each
`{"fixed": sha, "how": FIXED_HOW's value}`, oldest first (fixed at j, j dropped, fixed again at
j2, then j pushed back: j fixes it again). A commit's first-parent line never changes, so a
commit that once fixed the advisory fixes it whenever the ref holds it."""


def removed_fixes(record: Mapping[str, JSONValue]) -> list[tuple[Sha, str]]:
    """The fixing commits rewrites removed from the ref, with how each was decided, oldest first:
    EARLIER_FIXES, then WAS_FIXED (decided as FIXED_HOW says: reopening keeps it)."""
    extra = record.get("database_specific")
    if not isinstance(extra, Mapping):
        return []
    earlier = extra.get(EARLIER_FIXES)
    out = [
        (Sha(str(e["fixed"])), str(e.get("how") or ""))
        for e in (earlier if isinstance(earlier, list) else [])
        if isinstance(e, Mapping) and is_full_sha(str(e.get("fixed")))
    ]
    was = extra.get(WAS_FIXED)
    if isinstance(was, str) and is_full_sha(was):
        out.append((Sha(was), fixed_how(record)))
    return out


def fixed_how(record: Mapping[str, JSONValue]) -> str:
    """How the record's fix was decided (FIXED_HOW): "", FINDINGS or RENDERED."""
    extra = record.get("database_specific")
    how = extra.get(FIXED_HOW) if isinstance(extra, Mapping) else None
    return how if isinstance(how, str) else ""


def fixed_advice(record: Mapping[str, JSONValue], sha: str) -> str:
    """What to do about a fixed advisory: take the fixing revision (named whole)."""
    url = _repo_url(record)
    extra = record.get("database_specific")
    why = (
        "no value its base model left is there any more"
        if isinstance(extra, Mapping) and "lineage" in extra  # a stale derivative (`stale`)
        else {
            FINDINGS: "the consistency findings this advisory is about are resolved there",
            RENDERED: "its chat template renders every conversation this advisory is about as "
            "before the introducing commit",
        }.get(
            fixed_how(record),
            "every value this advisory is about is back there to what it was before the "
            "introducing commit",
        )
    )
    return (
        f"Upgrade to the fixing revision [`{sha[:12]}`]({commit_url(url, Sha(sha))}) "
        f'(`revision="{sha}"` in `from_pretrained`) or later: {why}. Revisions from the '
        "introducing commit up to it are affected (the versions listed); do not pin one of them."
    )


WITHDRAWN_ADVICE = (
    "Nothing: this advisory is withdrawn (its status above says why), so what it described is not "
    "in the repo's history as tracker sees it now."
)


def regenerate_advice(record: dict[str, JSONValue]) -> None:
    """Rewrite `record`'s "What to do" for its state, in place: open, the advice it was published
    with; fixed, take the fixing revision; withdrawn, nothing. The open advice is kept in
    `database_specific` (OPEN_ADVICE) while the record is not open."""
    details = record.get("details")
    if not isinstance(details, str):
        return
    extra = record.setdefault("database_specific", {})
    assert isinstance(extra, dict)
    current = advice_of(details)
    if OPEN_ADVICE not in extra and current is not None:
        extra[OPEN_ADVICE] = current
    state = state_of(record)
    if state is AdvisoryState.OPEN:
        text = extra.pop(OPEN_ADVICE, None)
        if not isinstance(text, str):
            return
    elif state is AdvisoryState.FIXED:
        text = fixed_advice(record, str(extra.get("fixed")))
    else:
        text = WITHDRAWN_ADVICE
    record["details"] = with_advice(details, text)


def _repo_url(record: Mapping[str, JSONValue]) -> str:
    try:
        return str(record["affected"][0]["ranges"][0]["repo"]).rstrip("/")  # type: ignore[index]
    except (KeyError, IndexError, TypeError):
        return ""


def fixed_paragraph(record: Mapping[str, JSONValue], sha: Sha, fix: Commit | None) -> str:
    """The status of a fixed advisory: the fixing commit (sha, title, author, date) and what to do."""
    url = _repo_url(record)
    versions = record.get("affected", [{}])[0].get("versions") or []  # type: ignore[index, union-attr]
    n = len(versions) if isinstance(versions, list) else 0
    by = (
        commit_line(fix, url)
        if fix is not None and fix.sha == sha
        else f"[`{sha[:12]}`]({commit_url(url, sha)})"
    )
    extra = record.get("database_specific")
    what = (
        "it no longer has any value its base model left (re-converted or re-derived)"
        if isinstance(extra, Mapping) and "lineage" in extra  # a stale derivative (`stale`)
        else "it resolves every consistency finding this advisory is about"
        if isinstance(extra, Mapping) and "first_seen" in extra  # a findings advisory (`broken`)
        else "it resolves every consistency finding this advisory is about (the defect is gone, "
        "although not every value it changed is back to the one before)"
        if fixed_how(record) == FINDINGS
        else "its chat template renders every conversation this advisory is about as before "
        "(its source text differs)"
        if fixed_how(record) == RENDERED
        else "it sets every value this advisory is about back to what it was before"
    )
    return (
        f"**Fixed** by commit {by}: {what}. Revisions from the introducing commit up to it "
        f"({n} ingested) are affected; upgrade to `{sha[:12]}` or later to leave them."
    )


def mark_fixed(
    record: Mapping[str, JSONValue],
    sha: Sha,
    now: datetime,
    fix: Commit | None = None,
    *,
    how: str = "",
) -> dict[str, JSONValue]:
    """A copy of `record` with a `fixed` event at `sha`, a FIX reference, `modified = now`, and
    a status paragraph in `details` naming the fixing commit (`fix`: its title, authors and date
    when known). `how` (`cured`): the fix was decided by the advisory's consistency findings being
    resolved, or its template's renders being back, not every value returning (FIXED_HOW; the
    texts say so).

    The versions list is closed: it keeps the affected commits and never includes `sha`.
    """
    if not is_full_sha(sha):
        raise AdvisoryError(f"fixed {sha!r} is not a full 40-hex sha")
    out = copy.deepcopy(dict(record))
    _, rng = _affected_range(out)
    if not is_open(out):
        raise AdvisoryError(f"{out.get('id')!r} is not open")
    rng["events"].append({"fixed": sha})
    refs = out.setdefault("references", [])
    refs.append({"type": "FIX", "url": commit_url(str(rng["repo"]), sha)})
    out["modified"] = rfc3339(now)
    extra = out.setdefault("database_specific", {})
    extra["fixed"] = sha
    earlier = [e for e in removed_fixes(out) if e[0] != sha]
    extra.pop(WAS_FIXED, None)
    extra.pop(EARLIER_FIXES, None)
    if earlier:
        extra[EARLIER_FIXES] = [{"fixed": f, "how": h} for f, h in earlier]
    extra.pop(FIXED_HOW, None)
    if how:
        extra[FIXED_HOW] = how
    details = _details(out, fixed_paragraph(out, sha, fix))
    if details is not None:
        out["details"] = details
    regenerate_advice(out)
    return out


def withdraw(record: Mapping[str, JSONValue], now: datetime, reason: str) -> dict[str, JSONValue]:
    """A copy of `record` with `withdrawn = modified = now` and the reason in database_specific."""
    out = copy.deepcopy(dict(record))
    if out.get("withdrawn"):
        return out
    stamp = rfc3339(now)
    out["withdrawn"] = stamp
    out["modified"] = stamp
    out.setdefault("database_specific", {})["withdrawn_reason"] = reason
    details = _details(out, f"**Withdrawn** on {stamp}: {reason}.")
    if details is not None:
        out["details"] = details
    regenerate_advice(out)
    return out


def reopen(record: Mapping[str, JSONValue], now: datetime, reason: str) -> dict[str, JSONValue]:
    """A copy of a fixed `record` without its `fixed` event and FIX reference, `modified = now`.

    For a fix whose commit a history rewrite removed: the change it undid is live again.
    """
    out = copy.deepcopy(dict(record))
    _, rng = _affected_range(out)
    fixed = {str(ev["fixed"]) for ev in rng["events"] if "fixed" in ev}
    rng["events"] = [ev for ev in rng["events"] if "fixed" not in ev]
    urls = {commit_url(str(rng["repo"]), Sha(sha)) for sha in fixed}
    out["references"] = [
        r
        for r in out.get("references") or []
        if not (r.get("type") == "FIX" and r.get("url") in urls)
    ]
    extra = out.setdefault("database_specific", {})
    extra.pop("fixed", None)
    if fixed:
        extra[WAS_FIXED] = sorted(fixed)[0]
    extra["reopened_reason"] = reason
    out["modified"] = rfc3339(now)
    details = _details(out, f"**Open again** since {out['modified']}: {reason}.")
    if details is not None:
        out["details"] = details
    regenerate_advice(out)
    return out


def reopened_pending(pending: Sequence[PendingChange]) -> tuple[PendingChange, ...]:
    """Pending entries of a reopened advisory: every change counts as live again (current = after).

    Approximation: a partial restore between the introducing commit and the surviving fork point
    is not remembered (pending state is kept per advisory, not per commit).
    """
    return tuple(
        PendingChange(p.artifact, p.file, p.key, p.before, p.after or p.current, p.after)
        for p in pending
    )


def unwithdraw(record: Mapping[str, JSONValue], now: datetime, reason: str) -> dict[str, JSONValue]:
    """A copy of a withdrawn `record` made live again (`withdrawn` removed, `modified = now`).

    For an advisory withdrawn because a rewrite dropped its introducing commit, when a later
    push brings that commit back onto the ref.
    """
    out = copy.deepcopy(dict(record))
    out.pop("withdrawn", None)
    extra = out.setdefault("database_specific", {})
    extra.pop("withdrawn_reason", None)
    extra["restored_reason"] = reason
    out["modified"] = rfc3339(now)
    fixed = extra.get("fixed")
    details = _details(
        out,
        f"**Live again** since {out['modified']}: {reason}."
        + (f" It stays fixed by `{str(fixed)[:12]}`." if fixed else ""),
    )
    if details is not None:
        out["details"] = details
    regenerate_advice(out)
    return out
