"""Advisories of a repaired repo (`tracker repair`): the store's advisories made equal to what a
clean analysis of the same revisions publishes, without losing an id a reader may hold.

`reconcile` matches each advisory by what it is about, (introducing commit, group), which is
unique per repo in both stores:
- published before and not by the clean analysis: withdrawn, with the reason (a fault of the
  transport produced it), and never restored (`WithdrawnBy.REPAIR`);
- published by the clean analysis and not before: published now under a new id;
- both: kept under its id; when the clean record differs in more than its times (its text,
  severity, state, versions), it becomes the clean one, `published` kept, `modified` now, and
  `database_specific.repaired_reason` says why it changed (`rewrite_reason`).
Ids the clean analysis wrote into records (a fix that restores another advisory names it) are
mapped to the store's. One transaction, which queues the webhook deliveries through the
pipeline's own paths (`tracker.advisories.service`), team-filtered subscriptions judged by the
`audience` like the pipeline's: withdrawn advisories an `advisory.withdrawn` delivery per
revision with the reason; advisories published now, and rewritten ones (the clean record under
the id delivered before, `modified` later: a receiver replaces its copy), a `revision.advisories`
delivery per revision.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from tracker.advisories.osv import advisory_id
from tracker.advisories.schema import validate_record
from tracker.advisories.service import (
    _enqueue_lifecycle,
    _package_url,
    enqueue_revision,
    withdraw_stored,
)
from tracker.shared.domain import Advisory, AdvisoryState, RepoId, Sha, WithdrawnBy, rfc3339
from tracker.store.advisories import AdvisoryStore, StoredAdvisory, SuppressedChange
from tracker.webhooks.events import WITHDRAWN, Audience

_TIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?Z")
_STATES = (AdvisoryState.OPEN, AdvisoryState.FIXED, AdvisoryState.WITHDRAWN)


@dataclass(frozen=True)
class Reconciled:
    """What `reconcile` changed: ids withdrawn (with the reason), published, and rewritten."""

    withdrawn: tuple[tuple[str, str], ...]
    published: tuple[str, ...]
    updated: tuple[str, ...]


def all_of(store: AdvisoryStore, repo_id: RepoId) -> list[StoredAdvisory]:
    """Every advisory of `repo_id`, in any state."""
    with store.transaction() as tx:
        return [s for state in _STATES for s in tx.in_state(repo_id, state)]


def _masked(value: Any) -> str:
    return _TIME.sub("<time>", json.dumps(value, sort_keys=True))


def _mapped(value: Any, pattern: re.Pattern[str], ids: Mapping[str, str]) -> Any:
    return json.loads(pattern.sub(lambda m: ids[m.group(0)], json.dumps(value)))


def reconcile(
    store: AdvisoryStore,
    repo_id: RepoId,
    *,
    live: Sequence[Sha],
    clean: Sequence[StoredAdvisory],
    clean_prefix: str,
    clean_suppressed: Mapping[Sha, Sequence[SuppressedChange]],
    previous: Mapping[Sha, Sha | None],
    prefix: str,
    now: datetime,
    reason: str,
    rewrite_reason: str,
    audience: Audience | None = None,
) -> Reconciled:
    """Make `repo_id`'s advisories introduced at the `live` revisions those of `clean` (the
    advisories a clean analysis of the repo published, ids under `clean_prefix`; see the module
    docstring). `reason`: why what only the old analysis published is withdrawn;
    `rewrite_reason`: why a record the clean analysis publishes otherwise is rewritten;
    `previous`: each live revision's previous one (the `revision.advisories` deliveries name it);
    `audience`: which advisories affect a watchlist team (`tracker.teams.facts.store_audience`),
    for the team-filtered subscriptions; without it those get nothing of the repair."""
    live_set = set(live)
    stamp = rfc3339(now)
    withdrawn: list[tuple[str, str]] = []
    published: list[str] = []
    updated: list[str] = []
    with store.transaction() as tx:
        have = {
            (s.advisory.introduced, s.advisory.group): s
            for state in _STATES
            for s in tx.in_state(repo_id, state)
            if s.advisory.introduced in live_set
        }
        want = {(s.advisory.introduced, s.advisory.group): s for s in clean}
        ids: dict[str, str] = {}
        for key, s in sorted(want.items(), key=lambda kv: kv[1].advisory.id):
            old = have.get(key)
            if old is not None:
                ids[s.advisory.id] = old.advisory.id
            else:
                ids[s.advisory.id] = advisory_id(prefix, now.year, tx.allocate(prefix, now.year))
        pattern = re.compile(rf"x_{re.escape(clean_prefix)}-\d{{4}}-\d+\b")
        lifecycle: list[tuple[Sha, Advisory, str]] = []
        new_at: dict[Sha, list[Advisory]] = {}
        for key, old in sorted(have.items(), key=lambda kv: kv[1].advisory.id):
            if key in want or old.state is AdvisoryState.WITHDRAWN:
                continue
            new = withdraw_stored(tx, old, reason, WithdrawnBy.REPAIR, now)
            withdrawn.append((new.id, reason))
            lifecycle.append((new.introduced, new, reason))
        for key, s in sorted(want.items(), key=lambda kv: ids[kv[1].advisory.id]):
            record: dict[str, Any] = _mapped(s.advisory.record, pattern, ids)
            pending = _mapped(list(s.pending), pattern, ids)
            old = have.get(key)
            by = WithdrawnBy.REPAIR if s.state is AdvisoryState.WITHDRAWN else None
            if old is None:
                record["published"] = record["modified"] = stamp
            elif (
                _masked(record) == _masked(old.advisory.record)
                and s.state is old.state
                and list(pending) == list(old.pending)
            ):
                continue
            else:
                record["published"] = old.advisory.record["published"]
                record["modified"] = stamp
                record.setdefault("database_specific", {})["repaired_reason"] = rewrite_reason
            validate_record(record)
            a = s.advisory
            adv = Advisory(ids[a.id], repo_id, a.introduced, a.group, a.severity, record)
            if old is None:
                tx.insert(adv, package_name=_package_url(adv), pending=pending)
                published.append(adv.id)
            else:
                updated.append(adv.id)
            tx.overwrite(adv, state=s.state, pending=pending, withdrawn_by=by)
            if s.state is AdvisoryState.WITHDRAWN:
                if old is None or old.state is not AdvisoryState.WITHDRAWN:
                    lifecycle.append((adv.introduced, adv, rewrite_reason))
            else:  # subscribers get the record they never had, or its corrected form
                new_at.setdefault(adv.introduced, []).append(adv)
        for sha in live:
            tx.replace_suppressed(repo_id, sha, clean_suppressed.get(sha, ()))
        _enqueue_lifecycle(tx, WITHDRAWN, lifecycle, now, audience)
        for sha, advs in new_at.items():
            url = _package_url(advs[0])
            enqueue_revision(tx, repo_id, url, sha, previous.get(sha), advs, now, audience)
    return Reconciled(tuple(withdrawn), tuple(published), tuple(updated))


__all__ = ["Reconciled", "all_of", "reconcile"]
