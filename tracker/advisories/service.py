"""The advisory stage's I/O edge: classify, group, build, validate and save a revision's advisories exactly once.

`publish` runs in one store transaction: lifecycle of the repo's open advisories, new records,
suppressions and the per-revision marker commit together or not at all, so a crash before the
caller's `mark_analysed` leaves either nothing or everything, and re-publishing returns what exists.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import assert_never

from tracker.advisories import broken
from tracker.advisories.advice import Restore
from tracker.advisories.classify import (
    SEVERITY_RANK,
    Classified,
    Context,
    Overrides,
    classify,
    parse_overrides,
)
from tracker.advisories.consistency import HISTORY_CHECKS, Finding, assign
from tracker.advisories.consistency import introduced as introduced_findings
from tracker.advisories.consistency import resolved as resolved_findings
from tracker.advisories.generation import Generation, effective_generation
from tracker.advisories.groups import ChangeGroup, Subject, group_changes
from tracker.advisories.lifecycle import (
    PendingChange,
    advance,
    cured,
    initial_pending,
    mark_fixed,
    removed_fixes,
    reopen,
    reopened_pending,
    same_place,
    state_of,
    unwithdraw,
    value_digest,
    withdraw,
)
from tracker.advisories.loading import why_not_loading
from tracker.advisories.osv import advisory_id, build_record, change_json
from tracker.advisories.schema import validate_record
from tracker.shared.domain import (
    Advisory,
    AdvisoryState,
    Artifact,
    Change,
    Commit,
    Estimate,
    JSONValue,
    RepoId,
    Sha,
    WithdrawnBy,
    is_full_sha,
)
from tracker.shared.errors import AdvisoryError
from tracker.store.advisories import (
    AdvisoryConflictError,
    AdvisoryStore,
    AdvisoryTx,
    OpenCandidate,
    StoredAdvisory,
    SuppressedChange,
)
from tracker.store.webhooks import Subscription
from tracker.webhooks.events import (
    EVENT,
    REOPENED,
    RESTORED,
    WITHDRAWN,
    Audience,
    Filter,
    LifecycleEvent,
    RevisionEvent,
    lifecycle_body,
    matching,
)

_ATTEMPTS = 3


def _overrides(raw: Overrides | Mapping[str, JSONValue] | None) -> Overrides:
    if isinstance(raw, Overrides):
        return raw
    return parse_overrides(raw)


@dataclass(frozen=True)
class Judgement:
    """Everything publishing reads of a revision's upstream files, computed ahead (`judge`): each
    change classified (by position in the changes), and the consistency findings the revision
    introduced and resolved. The pipeline computes it in the analysis worker, under the budget,
    so that `publish` itself handles only these values and the store."""

    classified: tuple[Classified, ...]
    introduced: tuple[Finding, ...]
    resolved: tuple[Finding, ...]
    generation: tuple[Generation | None, Generation | None] = (None, None)
    """The effective generation defaults before and after (`tracker.advisories.generation`;
    None: not known), from which generation advice names the values that restore the old ones."""
    previous_loads: bool = True
    """Whether the previous revision loads (`tracker.advisories.loading`: a readable config.json
    and the weights it needs), so that advice may pin it."""
    loadable: tuple[Sha, frozenset[tuple[str, str]]] | None = None
    """When the previous revision does not load: the newest earlier one that does, and the
    (file, key) of every change between it and this revision (`Analyst.compute`)."""
    previous_lacks: str = ""
    """Why the previous revision does not load (empty when it does)."""


def judge(
    changes: Sequence[Change],
    overrides: Overrides | Mapping[str, JSONValue] | None,
    context: Context | None,
    loadable: tuple[Sha, Sequence[Change]] | None = None,
) -> Judgement:
    """Classify `changes` under `overrides` and find the revision's consistency findings: the
    part of publishing that parses the revision's files (config, generation config, tokenizer
    files, chat templates, through `context`) and runs the estimate on configs (the
    `estimate_moves` check). `loadable`: when the previous revision has no readable config.json,
    the newest earlier revision that loads and its changes to this revision. Pure."""
    rules = _overrides(overrides)
    generation: tuple[Generation | None, Generation | None] = (None, None)
    if context is not None:
        generation = tuple(  # type: ignore[assignment]
            effective_generation(side.snapshot if side else None, context.knowledge)
            for side in (context.before, context.after)
        )
    before = context.before if context is not None else None
    lacks = None if before is None else why_not_loading(before.snapshot)
    loads = lacks is None
    return Judgement(
        tuple(classify(c, rules, context) for c in changes),
        tuple(introduced_findings(context, first_code=rules.unlisted_code is None)),
        tuple(resolved_findings(context)),
        generation,
        loads,
        None
        if loads or loadable is None
        else (loadable[0], frozenset((c.file, c.key) for c in loadable[1])),
        lacks or "",
    )


def publish(
    store: AdvisoryStore,
    *,
    repo_id: RepoId,
    commit: Commit,
    previous: Sha | None,
    changes: Sequence[Change],
    estimate_before: Estimate | None,
    estimate_after: Estimate | None,
    repo_url: str,
    overrides: Overrides | Mapping[str, JSONValue] | None,
    prefix: str,
    now: datetime,
    context: Context | None = None,
    judgement: Judgement | None = None,
    audience: Audience | None = None,
    lineage_fixed: frozenset[str] = frozenset(),
) -> list[Advisory]:
    """Publish the advisories of one analysed revision; idempotent per (repo, commit).

    Inputs: the revision's `changes` against `previous` (None for the first revision), the
    estimate reports before/after, the repo's watchlist `advisories:` mapping (or parsed
    Overrides), the id prefix, `now` and the classification `context` (the revision's two
    snapshots; None: only what the changes themselves say). Output: the advisories introduced at `commit`, ordered by
    id (existing ones if this revision was published before; nothing is allocated or written then).
    Side effects, in the same transaction: open advisories of the repo get `commit` added to their
    versions, or a `fixed` event when its changes restore every earlier value (changes that directly
    undo a fixed advisory's changes make no new advisory; a partial restore, a change from a third
    value, or one more severe than the advisory it undoes, does); suppressed changes are recorded. Raises AdvisoryError when a record fails
    the OSV schema (nothing is written), ConfigError for invalid overrides.

    `judgement`: `judge(changes, overrides, context)` computed ahead (the pipeline's analysis
    worker does, under the analysis budget); `context` is then unused. Without it, it is computed
    here. Either way, what publishing does after it reads no upstream file: it builds records
    from the classified changes (values over `osv.MAX_VALUE_CHARS` compacted to a digest, mass
    tensor changes as patterns), validates them and queues webhook deliveries, in time and
    memory proportional to the changes the analysis returned.

    `audience`: which advisories affect a watchlist team, for the subscriptions filtered to one
    (`tracker.teams.audience`); without it those subscriptions receive nothing of this revision.

    `lineage_fixed`: the open stale-derivative advisories this revision fixes
    (`tracker.lineage.check.fixed_by`: it no longer holds the values its base left), fixed here like
    any other, in the same transaction.
    """
    rules = _overrides(overrides)
    if judgement is None:
        judgement = judge(changes, rules, context)
    elif len(judgement.classified) != len(changes):
        raise AdvisoryError(
            f"a judgement of {len(judgement.classified)} changes for {len(changes)} changes"
        )
    subject = Subject(
        repo_id,
        repo_url,
        commit.sha,
        previous,
        estimate_before,
        estimate_after,
        commit,
        *judgement.generation,
    )

    def once() -> list[Advisory]:
        with store.transaction() as tx:
            return _publish(tx, subject, changes, prefix, now, judgement, audience, lineage_fixed)

    return _retried(once)


def _publish(
    tx: AdvisoryTx,
    subject: Subject,
    changes: Sequence[Change],
    prefix: str,
    now: datetime,
    judgement: Judgement,
    audience: Audience | None,
    lineage_fixed: frozenset[str] = frozenset(),
) -> list[Advisory]:
    repo_id, sha, previous = subject.repo_id, subject.introduced, subject.previous
    if tx.revision_done(repo_id, sha):
        return tx.introduced_at(repo_id, sha)
    restoring: set[int] = set()
    fixed_here: list[Advisory] = []
    extend: list[tuple[OpenCandidate, str | None]] = []
    for cand in tx.open_candidates(repo_id, previous, sha) if previous is not None else []:
        pending = [PendingChange.from_json(p) for p in cand.pending]
        if cand.id in lineage_fixed:  # a stale derivative re-converted (`tracker.lineage.check`)
            fixed_here.append(_fix_stale(tx, cand.id, subject, sha, now))
            continue
        step = advance(pending, changes)
        # findings advisories (`broken`): their entries move with the findings, not the changes
        # (and the findings a change advisory carries: its defect, which decides its fix)
        after, settled = broken.settle(step.pending, judgement.introduced, judgement.resolved)
        gone, how = cured(after)
        touched = step.fixed or settled or step.pending != tuple(pending)
        step = replace(step, pending=after, fixed=touched and gone)
        if not step.fixed:
            moved = step.pending != tuple(pending)
            extend.append((cand, _dump_pending(step.pending) if moved else None))
            continue
        stored = tx.get(cand.id)
        if stored is None:  # pragma: no cover - the candidate was read in this transaction
            raise AdvisoryError(f"advisory {cand.id} vanished")
        if stored.state is not AdvisoryState.OPEN:  # another writer fixed it since (PostgreSQL)
            raise AdvisoryConflictError(f"advisory {cand.id} is no longer open")
        # A change that undoes this advisory's is absorbed by its fix, unless it is more severe
        # than the advisory: undoing a low "answer found" or "card now fits" loses the answer or
        # the fit (high), which is published as an advisory of its own, not only as a fix.
        rank = SEVERITY_RANK[stored.advisory.severity]
        restoring |= {
            i for i in step.restoring if SEVERITY_RANK[judgement.classified[i].severity] <= rank
        }
        # A findings advisory's fix absorbs the changes at the keys its findings are about, at
        # any severity: they set a value that contradicted the rest of the revision (a broken
        # model has no working behaviour to lose), and the fix names their commit.
        places = broken.places(pending) if broken.findings_only(pending) else set()
        absorbed = {
            i for i, c in enumerate(judgement.classified) if (c.change.file, c.change.key) in places
        }
        estimate = {
            i for i, c in enumerate(judgement.classified) if c.change.artifact is Artifact.ESTIMATE
        }
        if absorbed and absorbed | estimate == set(range(len(changes))):
            absorbed |= estimate  # the estimate moved because of them alone
        restoring |= absorbed
        record = mark_fixed(stored.advisory.record, sha, now, subject.commit, how=how)
        validate_record(record)
        old = stored.advisory
        fixed = Advisory(old.id, repo_id, old.introduced, old.group, old.severity, record)
        tx.update(
            fixed,
            state=AdvisoryState.FIXED,
            pending=[p.to_json() for p in step.pending],
            expect=AdvisoryState.OPEN,
        )
        fixed_here.append(fixed)
    # Extending is appending one full sha (checked) to each versions list and moving `modified`:
    # stored as one row per advisory, without rewriting (or re-validating) whole records.
    if not is_full_sha(sha):
        raise AdvisoryError(f"commit {sha!r} is not a full 40-hex sha")
    tx.extend(extend, sha, now)

    classified = [c for i, c in enumerate(judgement.classified) if i not in restoring]
    ride_along = [
        c for c in classified if c.change.artifact is Artifact.ESTIMATE and c.suppressed is None
    ]
    out: list[Advisory] = []
    groups = group_changes(classified)
    group_keys = [
        {k for c in g.published for k in (c.change.key, c.change.key.split(".")[-1])}
        for g in groups
    ]
    # A finding of the first ingested revision, or of a revision with no published change, is an
    # advisory of its own (`broken`); otherwise it rides on the advisory of the change it concerns.
    alone = judgement.introduced if previous is None or not groups else ()
    carried = assign([] if alone else judgement.introduced, group_keys)
    # a finding whose check needs history to stand (`consistency.HISTORY_CHECKS`) is fix evidence
    # only where an open advisory of the repo carries it
    published = (
        {
            f
            for s in tx.in_state(repo_id, AdvisoryState.OPEN)
            for f in _findings_of(s.advisory.record)
        }
        if any(f.check in HISTORY_CHECKS for f in judgement.resolved)
        else set()
    )
    resolving = assign(
        [
            f
            for f in judgement.resolved
            if f.check not in HISTORY_CHECKS or (f.check, f.text) in published
        ],
        group_keys,
    )
    earlier = (
        [*tx.in_state(repo_id, AdvisoryState.OPEN), *tx.in_state(repo_id, AdvisoryState.FIXED)]
        if groups and previous is not None
        else []
    )
    # open advisories with findings this revision does not resolve: the previous revision has
    # their defects and so does this one, so no advice of this revision pins it
    resolved_here = {(f.check, f.text) for f in judgement.resolved}
    subject = replace(
        subject,
        fixed_here=tuple(a.id for a in fixed_here if _has_findings(a.record)),
        broken_before=tuple(
            s.advisory.id
            for s in earlier
            if s.state is AdvisoryState.OPEN
            and _has_findings(s.advisory.record)
            and not _findings_of(s.advisory.record) <= resolved_here
        ),
    )
    if alone:
        n = tx.allocate(prefix, now.year)
        adv_id = advisory_id(prefix, now.year, n)
        record = broken.build_record(
            advisory_id=adv_id, subject=subject, findings=alone, now=now, first=previous is None
        )
        validate_record(record)
        adv = Advisory(
            adv_id, repo_id, sha, broken.group_of(alone), broken.severity_of(alone), record
        )
        first = broken.initial_pending(alone)
        tx.insert(adv, package_name=subject.url, pending=[p.to_json() for p in first])
        out.append(adv)
    for group, findings, solved in zip(groups, carried, resolving, strict=True):
        n = tx.allocate(prefix, now.year)
        adv_id = advisory_id(prefix, now.year, n)
        extra = [c for c in ride_along if c not in group.published]
        kept, none = _pin(group, judgement)
        record = build_record(
            advisory_id=adv_id,
            subject=replace(
                subject,
                kept=kept,
                nothing_to_pin=none,
                previous_lacks=judgement.previous_lacks or subject.previous_lacks,
            ),
            group=group,
            estimate_changes=extra,
            now=now,
            restores=_restores(group, earlier, sha),
            findings=findings,
            resolved=solved,
        )
        validate_record(record)
        adv = Advisory(adv_id, repo_id, sha, group.name, group.severity, record)
        # the findings it carries are its defect: entries of their own (`lifecycle.cured`)
        first = initial_pending([c.change for c in group.published]) + broken.initial_pending(
            findings
        )
        tx.insert(adv, package_name=subject.url, pending=[p.to_json() for p in first])
        out.append(adv)
    for c in classified:
        if c.suppressed is not None:
            tx.record_suppressed(_suppressed(repo_id, sha, c, now))
    _enqueue_deliveries(tx, subject, out, fixed_here, now, audience)
    tx.mark_revision(repo_id, sha, now)
    return out


def _fix_stale(tx: AdvisoryTx, adv_id: str, subject: Subject, sha: Sha, now: datetime) -> Advisory:
    """Mark the open stale-derivative advisory `adv_id` fixed at `sha` (its pending kept)."""
    stored = tx.get(adv_id)
    if stored is None:  # pragma: no cover - the candidate was read in this transaction
        raise AdvisoryError(f"advisory {adv_id} vanished")
    if stored.state is not AdvisoryState.OPEN:  # another writer fixed it since (PostgreSQL)
        raise AdvisoryConflictError(f"advisory {adv_id} is no longer open")
    old = stored.advisory
    record = mark_fixed(old.record, sha, now, subject.commit)
    validate_record(record)
    fixed = Advisory(old.id, old.repo_id, old.introduced, old.group, old.severity, record)
    tx.update(
        fixed, state=AdvisoryState.FIXED, pending=list(stored.pending), expect=AdvisoryState.OPEN
    )
    return fixed


def _pin(group: ChangeGroup, judgement: Judgement) -> tuple[Sha | None, bool]:
    """(the revision advice pins when not the previous one, whether none can be pinned): the
    previous revision when it loads; else the newest earlier one that loads, if none of the
    group's changes holds there (it lacks the advisory's effect); else none."""
    if judgement.previous_loads:
        return None, False
    if judgement.loadable is None:
        return None, True
    sha, differs = judgement.loadable
    if all((c.change.file, c.change.key) in differs for c in group.published):
        return sha, False
    return None, True


def _enqueue_deliveries(
    tx: AdvisoryTx,
    subject: Subject,
    introduced: Sequence[Advisory],
    fixed: Sequence[Advisory],
    now: datetime,
    audience: Audience | None,
) -> None:
    """The webhook outbox, in the publish transaction: one delivery per subscription that wants
    something of this revision (a crash after the commit delays a delivery, never loses it)."""
    if not introduced and not fixed:
        return
    outbox = tx.outbox
    subscriptions = outbox.subscriptions()
    if not subscriptions:
        return
    event = RevisionEvent(
        subject.repo_id,
        subject.url,
        subject.introduced,
        subject.previous,
        tuple(introduced),
        tuple(fixed),
        now,
    )
    for sub_id, body in matching(_filters(subscriptions), event, audience):
        outbox.enqueue(sub_id, subject.repo_id, subject.introduced, EVENT, body, now)


def enqueue_introduced(
    tx: AdvisoryTx,
    repo_id: RepoId,
    repo_url: str,
    sha: Sha,
    advisory: Advisory,
    now: datetime,
    audience: Audience | None = None,
) -> None:
    """The webhook outbox for one advisory published outside a revision's own publishing (a
    stale derivative, `tracker.lineage.check`), in its transaction: a `revision.advisories` delivery
    of the revision it is introduced at, for every subscription that wants it."""
    enqueue_revision(tx, repo_id, repo_url, sha, None, [advisory], now, audience)


def enqueue_revision(
    tx: AdvisoryTx,
    repo_id: RepoId,
    repo_url: str,
    sha: Sha,
    previous: Sha | None,
    introduced: Sequence[Advisory],
    now: datetime,
    audience: Audience | None = None,
) -> None:
    """The webhook outbox for advisories of the revision `sha` (after `previous`) published or
    rewritten outside its own publishing (a stale derivative; `tracker repair`), in their
    transaction: one `revision.advisories` delivery carrying them (`advisories`), for every
    subscription that wants any of them, team-filtered ones judged by `audience`."""
    subject = Subject(repo_id, repo_url, sha, previous, None, None)
    _enqueue_deliveries(tx, subject, introduced, [], now, audience)


def _filters(subscriptions: Sequence[Subscription]) -> list[tuple[int, Filter]]:
    return [
        (s.id, Filter(s.repos, s.min_severity, tuple(k.value for k in s.kinds), s.events, s.team))
        for s in subscriptions
    ]


def _enqueue_lifecycle(
    tx: AdvisoryTx,
    kind: str,
    changed: Sequence[tuple[Sha, Advisory, str]],
    now: datetime,
    audience: Audience | None,
) -> None:
    """The webhook outbox, in the transaction that changed the advisories' state: per revision
    (`sha`: the one dropped or restored), one `kind` delivery per subscription that wants any of
    its advisories. `changed`: (sha, advisory, reason)."""
    if not changed:
        return
    subscriptions = tx.outbox.subscriptions()
    if not subscriptions:
        return
    filters = _filters(subscriptions)
    by_sha: dict[Sha, list[tuple[Advisory, str]]] = {}
    for sha, adv, reason in changed:
        by_sha.setdefault(sha, []).append((adv, reason))
    for sha, items in by_sha.items():
        first = items[0][0]
        event = LifecycleEvent(
            kind,
            first.repo_id,
            _package_url(first),
            sha,
            tuple(a for a, _ in items),
            items[0][1],
            now,
        )
        for sub_id, f in filters:
            body = lifecycle_body(event, f, audience)
            if body is not None:
                tx.outbox.enqueue(sub_id, first.repo_id, sha, kind, body, now)


def _package_url(adv: Advisory) -> str:
    """The repo's URL as the advisory's record names it (its affected package)."""
    affected = adv.record.get("affected")
    if isinstance(affected, list) and affected and isinstance(affected[0], dict):
        package = affected[0].get("package")
        if isinstance(package, dict) and isinstance(package.get("name"), str):
            return str(package["name"])
    return f"https://huggingface.co/{adv.repo_id}"  # pragma: no cover - every record has one


def _restores(
    group: ChangeGroup, earlier: Sequence[StoredAdvisory], sha: Sha
) -> tuple[Restore, ...]:
    """The changes of `group` that set a value back to what it was before an earlier (open or
    fixed) advisory of the repo changed it, with that advisory's id. Undoing a less severe
    advisory's change is no fix of it (a low "answer found" undone is the answer lost)."""
    out: list[Restore] = []
    for c in group.published:
        ch = c.change
        place = same_place((ch.artifact.value, ch.file, ch.key))
        now_digest = value_digest(ch.after)
        for stored in earlier:
            if stored.advisory.introduced == sha:
                continue
            if SEVERITY_RANK[c.severity] > SEVERITY_RANK[stored.advisory.severity]:
                continue
            for p in stored.pending:
                entry = PendingChange.from_json(p)
                if (
                    same_place(entry.location) == place
                    and entry.before == now_digest != entry.after
                ):
                    out.append(Restore(stored.advisory.id, ch.key or ch.file, ch.file))
                    break
    return tuple(dict.fromkeys(out))


def _has_findings(record: Mapping[str, JSONValue]) -> bool:
    """Whether an advisory's record carries consistency findings (of its revision's own)."""
    extra = record.get("database_specific")
    return isinstance(extra, Mapping) and bool(extra.get("findings"))


def _findings_of(record: Mapping[str, JSONValue]) -> set[tuple[str, str]]:
    """(check, text) of the consistency findings an advisory's record carries."""
    extra = record.get("database_specific")
    found = extra.get("findings") if isinstance(extra, Mapping) else None
    return {
        (str(f.get("check")), str(f.get("text")))
        for f in (found if isinstance(found, list) else [])
        if isinstance(f, Mapping)
    }


def _dump_pending(pending: Sequence[PendingChange]) -> str:
    return json.dumps([p.to_json() for p in pending], sort_keys=True, separators=(",", ":"))


def _suppressed(repo_id: RepoId, sha: Sha, c: Classified, now: datetime) -> SuppressedChange:
    return SuppressedChange(
        repo_id, sha, c.change.artifact, c.severity, c.suppressed or "", change_json(c), now
    )


def withdraw_rewritten(
    store: AdvisoryStore,
    repo_id: RepoId,
    dropped_shas: Sequence[Sha],
    now: datetime,
    rewrites: Mapping[str, str] | None = None,
    audience: Audience | None = None,
) -> list[Advisory]:
    """Withdraw every advisory of `repo_id` whose introducing commit is in `dropped_shas`.

    Dropped commits are those a history rewrite (force-push) removed from the ref. Returns the
    advisories withdrawn by this call (already-withdrawn ones are left unchanged and not returned).
    Nothing is deleted: the records stay, with `withdrawn` and `modified` set to `now`. In the
    same transaction, advisories fixed at a dropped commit are reopened (the fix is gone), and
    the webhook outbox gets, per dropped revision, an `advisory.withdrawn` delivery (the
    advisories it introduced) or `advisory.reopened` (those it fixed) for every subscription
    that wants any of them.
    `rewrites` maps a dropped sha to a description of the rewrite that dropped it (the force-push
    event: when, the ref, old head → new head), which the reason and the details name.
    """
    return _retried(
        lambda: _withdraw_rewritten(store, repo_id, dropped_shas, now, rewrites or {}, audience)
    )


def _retried(run: Callable[[], list[Advisory]]) -> list[Advisory]:
    """`run` (one transaction), run again on a write conflict: the retry reads what the other
    writer committed (up to _ATTEMPTS runs in all)."""
    for attempt in range(_ATTEMPTS):
        try:
            return run()
        except AdvisoryConflictError:
            if attempt == _ATTEMPTS - 1:
                raise
    raise AssertionError("unreachable")  # pragma: no cover


def _withdraw_rewritten(
    store: AdvisoryStore,
    repo_id: RepoId,
    dropped_shas: Sequence[Sha],
    now: datetime,
    which: Mapping[str, str],
    audience: Audience | None,
) -> list[Advisory]:
    out: list[Advisory] = []
    withdrawn: list[tuple[Sha, Advisory, str]] = []
    reopened: list[tuple[Sha, Advisory, str]] = []
    dropped = set(dropped_shas)
    with store.transaction() as tx:
        for stored in tx.not_withdrawn_introduced_in(repo_id, dropped_shas):
            adv = stored.advisory
            reason = f"introducing commit {adv.introduced} was removed by a history rewrite" + (
                f" ({which[adv.introduced]})" if adv.introduced in which else ""
            )
            new = withdraw_stored(tx, stored, reason, WithdrawnBy.REWRITE, now)
            out.append(new)
            withdrawn.append((adv.introduced, new, reason))
        # A fix whose commit the rewrite removed no longer fixes anything: reopen the advisory.
        for stored in tx.fixed_of(repo_id):
            adv = stored.advisory
            fixed_at = (adv.record.get("database_specific") or {}).get("fixed")
            if fixed_at not in dropped or adv.introduced in dropped:
                continue
            reason = f"fixing commit {fixed_at} was removed by a history rewrite" + (
                f" ({which[fixed_at]})" if fixed_at in which else ""
            )
            record = reopen(adv.record, now, reason)
            validate_record(record)
            new = Advisory(adv.id, adv.repo_id, adv.introduced, adv.group, adv.severity, record)
            pending = reopened_pending([PendingChange.from_json(p) for p in stored.pending])
            tx.update(
                new,
                state=AdvisoryState.OPEN,
                pending=[p.to_json() for p in pending],
                expect=stored.state,
            )
            reopened.append((Sha(fixed_at), new, reason))
        _enqueue_lifecycle(tx, WITHDRAWN, withdrawn, now, audience)
        _enqueue_lifecycle(tx, REOPENED, reopened, now, audience)
    return out


def withdraw_stored(
    tx: AdvisoryTx, stored: StoredAdvisory, reason: str, by: WithdrawnBy, now: datetime
) -> Advisory:
    """Withdraw one stored advisory in `tx` with `reason` (compare-and-set on its state read);
    returns the withdrawn advisory."""
    adv = stored.advisory
    record = withdraw(adv.record, now, reason)
    validate_record(record)
    new = Advisory(adv.id, adv.repo_id, adv.introduced, adv.group, adv.severity, record)
    tx.update(
        new,
        state=AdvisoryState.WITHDRAWN,
        pending=list(stored.pending),
        expect=stored.state,
        withdrawn_by=by,
    )
    return new


def restore_revived(
    store: AdvisoryStore,
    repo_id: RepoId,
    live_shas: Sequence[Sha],
    now: datetime,
    chain: Sequence[Sha] = (),
    audience: Audience | None = None,
) -> list[Advisory]:
    """Make live again the advisories withdrawn by a rewrite (`WithdrawnBy.REWRITE`) whose
    introducing commit is back on the ref (a later push restored it); returns those restored by
    this call. Advisories withdrawn for any other reason stay withdrawn. In the same transaction,
    the webhook outbox gets an `advisory.restored` delivery per revision for every subscription
    that wants any of its restored advisories.

    `chain`: the analysed revisions of the ref's history, oldest first (the head's first-parent
    line as ingested). With it, the lifecycle is re-derived from that history in the same
    transaction: an advisory reopened because a rewrite dropped its fixing commit is fixed again
    there when that commit is back after its introducing one (`lifecycle.removed_fixes`: the first
    on the line of those rewrites removed), and every
    live advisory's versions list becomes exactly the chain's revisions from its introducing
    commit up to its fixing one (or the head): commits a rewrite dropped leave it, commits a
    push brought back return."""
    return _retried(lambda: _restore_revived(store, repo_id, live_shas, now, chain, audience))


def _rederive(
    tx: AdvisoryTx, repo_id: RepoId, chain: Sequence[Sha], live: set[Sha], now: datetime
) -> None:
    """Re-fix reopened advisories whose fixing commit is back on `chain`, then set every open or
    fixed advisory's versions to the revisions of `chain` where it holds (see restore_revived).

    A version already listed that is on the ref (`live`) but not in `chain` stays, after the
    chain's: `chain` is the analysed line as this process read it before this transaction, and
    another poller may have published a later revision since (two `poll --once` at once); only
    revisions a rewrite dropped leave."""
    at: dict[str, int] = {sha: i for i, sha in enumerate(chain)}
    for stored in tx.in_state(repo_id, AdvisoryState.OPEN):
        adv = stored.advisory
        if adv.introduced not in at:
            continue
        # the first fixing commit on the line (each of them fixed it on this very line)
        back = sorted(
            (at[sha], sha, how)
            for sha, how in removed_fixes(adv.record)
            if at.get(sha, -1) > at[adv.introduced]
        )
        if not back:
            continue
        _, was, how = back[0]
        record = mark_fixed(adv.record, was, now, None, how=how)
        record["database_specific"]["refixed_reason"] = (  # type: ignore[index]
            f"fixing commit {was} is on the ref again"
        )
        validate_record(record)
        fixed = Advisory(adv.id, adv.repo_id, adv.introduced, adv.group, adv.severity, record)
        restored = [PendingChange.from_json(p) for p in stored.pending]
        tx.update(
            fixed,
            state=AdvisoryState.FIXED,
            pending=[
                PendingChange(p.artifact, p.file, p.key, p.before, p.before, p.after).to_json()
                for p in restored
            ],
            expect=AdvisoryState.OPEN,
        )
    for state in (AdvisoryState.OPEN, AdvisoryState.FIXED):
        for stored in tx.in_state(repo_id, state):
            adv = stored.advisory
            if adv.introduced not in at:
                continue  # not on this line (another ref's, or not analysed yet)
            extra = adv.record.get("database_specific")
            fixed_at = extra.get("fixed") if isinstance(extra, Mapping) else None
            end = at.get(str(fixed_at), -1) if fixed_at else len(chain)
            if end <= at[adv.introduced]:
                continue  # its fix is not on this line: reopening is the rewrite's to decide
            versions = list(chain[at[adv.introduced] : end])
            have = adv.record["affected"][0].get("versions")  # type: ignore[index, union-attr]
            if end == len(chain) and isinstance(have, list):
                versions += [v for v in have if v in live and v not in at]  # published since
            if have != versions:
                tx.replace_versions(adv.id, versions, now)


def _restore_revived(
    store: AdvisoryStore,
    repo_id: RepoId,
    live_shas: Sequence[Sha],
    now: datetime,
    chain: Sequence[Sha] = (),
    audience: Audience | None = None,
) -> list[Advisory]:
    live = set(live_shas)
    out: list[Advisory] = []
    with store.transaction() as tx:
        for stored in tx.in_state(repo_id, AdvisoryState.WITHDRAWN):
            adv = stored.advisory
            if adv.introduced not in live or not _revivable(stored.withdrawn_by):
                continue
            reason = f"introducing commit {adv.introduced} is on the ref again"
            record = unwithdraw(adv.record, now, reason)
            validate_record(record)
            new = Advisory(adv.id, adv.repo_id, adv.introduced, adv.group, adv.severity, record)
            tx.update(
                new, state=state_of(record), pending=list(stored.pending), expect=stored.state
            )
            out.append(new)
        _enqueue_lifecycle(
            tx,
            RESTORED,
            [
                (a.introduced, a, f"introducing commit {a.introduced} is on the ref again")
                for a in out
            ],
            now,
            audience,
        )
        if chain:
            _rederive(tx, repo_id, chain, live, now)
    return out


def _revivable(withdrawn_by: WithdrawnBy | None) -> bool:
    """Whether an advisory withdrawn by `withdrawn_by` comes back with its introducing commit."""
    match withdrawn_by:
        case WithdrawnBy.REWRITE:
            return True
        case WithdrawnBy.REPAIR:  # what a fault of the transport produced never comes back
            return False
        case None:  # withdrawn before withdrawn_by was recorded, not by a rewrite
            return False
        case _:
            assert_never(withdrawn_by)
