"""The lineage stage: link each watched derivative to its base models, and warn when one is left behind.

After a derivative's revision is analysed, the base models it names (card `base_model`, GGUF
`general.base_model.*`: `tracker.diff.lineage.read_links`) are stored as its links. At the end of
every poll cycle (`check`), each link is brought up to its base's newest revision: a watched base
is read from the store revision by revision, an unwatched one is fetched at its ref's head through
the base's source (the Hub source takes every request from the shared rate budget): the ref, the
tree, and the few small files that decide the inherited values (and, when a stale value is found,
the base's commit, whose title the advisory quotes). For each base revision that
changed a value, a derivative unit still holding the value the base just left is a stale
derivative advisory on the derivative (`tracker.advisories.stale`), published in one transaction
with its webhook deliveries (`enqueue_introduced`: the team-filtered subscriptions judged by the
pipeline's audience, as a revision's own advisories are).
A base that cannot be read (gone, gated, a transport fault, the budget spent) is recorded on the
link with why, and compared again on the next cycle: never a property of the base.

After the comparison, a GGUF unit of the derivative whose embedded template or bos/eos/pad id
(MATTERS) differs from its base's at the newest base revision compared, where no open lineage
advisory of the derivative names that value already, is a "differs from its base" advisory
(`tracker.advisories.stale.find_differs`): what `tracker lineage` shows, published.

A stale advisory is fixed by publishing (`tracker.advisories.service.publish`, `lineage_fixed`)
at the derivative's first revision whose units hold none of its left values (`fixed_by`); a
"differs" advisory likewise, at the first revision that no longer holds the differing values.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

import structlog

from tracker.advisories.osv import advisory_id
from tracker.advisories.schema import validate_record
from tracker.advisories.service import enqueue_introduced
from tracker.advisories.stale import (
    ARTIFACT,
    Stale,
    StaleSubject,
    build_record,
    find_differs,
    find_stale,
    initial_pending,
    resolved,
    top_severity,
)
from tracker.diff import base_values, effective_units, read_links
from tracker.ingest.snapshots import read_content
from tracker.shared.artifacts import Limits
from tracker.shared.domain import (
    Advisory,
    AdvisoryState,
    Artifact,
    Commit,
    JSONValue,
    RepoId,
    Severity,
    Sha,
    Snapshot,
)
from tracker.shared.errors import TrackerError
from tracker.sources import RepoSource
from tracker.store import Store
from tracker.store.advisories import AdvisoryStore
from tracker.store.lineage import LineageStore, Link
from tracker.webhooks.events import Audience

log = structlog.get_logger(__name__)

BASE_FILES = (
    "config.json",
    "generation_config.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "chat_template.jinja",
    "chat_template.json",
    "tokenizer.json",
)
"""What an unwatched base is read for: the files that decide its inherited values."""


@dataclass(frozen=True)
class BaseStep:
    """One base revision compared: its values, those of the base revision before it (None: the
    first compared), and its commit when known."""

    sha: Sha
    values: dict[str, JSONValue]
    before: dict[str, JSONValue] | None
    commit: Commit | None


def record_links(lineage: LineageStore, rid: RepoId, snapshot: Snapshot, now: datetime) -> None:
    """Store the base models `snapshot` (the derivative's newest analysed revision) names."""
    links = [(link.base, link.relation, link.via) for link in read_links(snapshot)]
    lineage.set_links(rid, links, snapshot.sha, now)


def open_stale(
    advisories: AdvisoryStore, rid: RepoId
) -> list[tuple[str, tuple[dict[str, str], ...]]]:
    """The open stale-derivative advisories of `rid`: (id, pending entries)."""
    with advisories.transaction() as tx:
        return [
            (s.advisory.id, tuple(s.pending))
            for s in tx.in_state(rid, AdvisoryState.OPEN)
            if s.advisory.group is Artifact.LINEAGE
        ]


def fixed_by(advisories: AdvisoryStore, rid: RepoId, snapshot: Snapshot) -> frozenset[str]:
    """The open stale-derivative advisories of `rid` that its revision `snapshot` fixes."""
    found = open_stale(advisories, rid)
    if not found:
        return frozenset()
    units = effective_units(snapshot)
    return frozenset(i for i, pending in found if resolved(pending, units))


def fetch_base(source: RepoSource, base: RepoId, ref: str, limits: Limits) -> tuple[Sha, Snapshot]:
    """The head of an unwatched base's `ref` and a snapshot of the files that decide its values
    (each within `limits.max_file_bytes`, checked against the tree)."""
    sha = source.resolve_ref(base, ref)
    tree = tuple(source.list_tree(base, sha))
    files: dict[str, bytes] = {}
    unreadable: dict[str, str] = {}
    for entry in tree:
        if entry.path not in BASE_FILES:
            continue
        if entry.size > limits.max_file_bytes:
            unreadable[entry.path] = f"{entry.size:,} bytes, over the {limits.max_file_bytes:,} cap"
            continue
        files[entry.path] = read_content(source, base, sha, entry, limits.max_file_bytes)
    return sha, Snapshot(base, sha, tree, files, unreadable=unreadable)


class Lineage:
    """Links and stale-derivative checks over the stores (built by the Pipeline)."""

    def __init__(
        self,
        *,
        store: Store,
        advisories: AdvisoryStore,
        lineage: LineageStore,
        base_source: Callable[[RepoId], RepoSource],
        watched: Callable[[], set[RepoId]],
        repo_url: Callable[[RepoId], str],
        limits: Limits,
        prefix: str,
        clock: Callable[[], datetime],
        audience: Callable[[], Audience] | None = None,
    ) -> None:
        self.store = store
        self.advisories = advisories
        self.lineage = lineage
        self.base_source = base_source
        self.watched = watched
        self.repo_url = repo_url
        self.limits = limits
        self.prefix = prefix
        self.clock = clock
        # which advisories affect each watchlist team: the team-filtered webhook subscriptions
        # receive a stale advisory as they receive a revision's own (the same outbox path)
        self.audience = audience

    def check(self, only: Iterable[RepoId] | None = None) -> list[str]:
        """Bring every link (those whose derivative or base is in `only`, when given) up to its
        base's newest revision; returns the ids of the stale-derivative advisories published.
        An unwatched base is fetched once per cycle however many derivatives name it."""
        wanted = set(only) if only is not None else None
        watched = self.watched()
        fetched: dict[RepoId, tuple[Sha, Snapshot] | str] = {}
        out: list[str] = []
        for link in self.lineage.links():
            if link.repo_id not in watched:
                continue
            if wanted is not None and link.repo_id not in wanted and link.base_id not in wanted:
                continue
            try:
                out += self._check_link(link, watched, fetched)
            except TrackerError as exc:  # one link's failure must not stop the others
                log.warning(
                    "lineage.check_failed", repo=link.repo_id, base=link.base_id, error=str(exc)
                )
        return out

    def _derivative_head(self, rid: RepoId) -> Snapshot | None:
        """The derivative's newest revision, when every ingested revision is analysed."""
        if self.store.pending_analysis(rid):
            return None
        revs = [r for r in self.store.revisions(rid, include_rewritten=False)]
        return self.store.snapshot(rid, revs[-1].sha) if revs else None

    def _steps(
        self, link: Link, watched: set[RepoId], fetched: dict[RepoId, tuple[Sha, Snapshot] | str]
    ) -> list[BaseStep] | str:
        """The base revisions to compare after `link.base_sha` (a watched base: every ingested
        revision after it, or all on the first check; an unwatched one: its head, when it moved),
        or why the base could not be read."""
        base = link.base_id
        if base in watched:
            try:
                revs = [r for r in self.store.revisions(base, include_rewritten=False)]
            except TrackerError as exc:
                return f"could not read {base} from the store: {exc}"
            if not revs:
                return f"{base} has no ingested revision yet"
            shas = [r.sha for r in revs]
            start = shas.index(link.base_sha) if link.base_sha in shas else None
            steps: list[BaseStep] = []
            before = link.base_values if start is not None else None
            for r in revs[(start + 1) if start is not None else 0 :]:
                values = base_values(self.store.snapshot(base, r.sha))
                steps.append(BaseStep(r.sha, values, before, r.commit))
                before = values
            return steps
        got = fetched.get(base)
        if got is None:
            try:
                got = fetch_base(self.base_source(base), base, "main", self.limits)
            except TrackerError as exc:
                got = f"could not read {base}: {exc}"
            fetched[base] = got
        if isinstance(got, str):
            return got
        sha, snap = got
        if sha == link.base_sha:
            return []
        return [BaseStep(sha, base_values(snap), link.base_values, None)]

    def _check_link(
        self, link: Link, watched: set[RepoId], fetched: dict[RepoId, tuple[Sha, Snapshot] | str]
    ) -> list[str]:
        now = self.clock()
        head = self._derivative_head(link.repo_id)
        if head is None:
            return []  # analysed later in this cycle or the next: compared then
        steps = self._steps(link, watched, fetched)
        if isinstance(steps, str):
            log.warning(
                "lineage.base_unreadable", repo=link.repo_id, base=link.base_id, error=steps
            )
            self.lineage.compared(link.repo_id, link.base_id, None, None, steps, now)
            return []
        if not steps:
            if link.base_error is not None:
                self.lineage.compared(
                    link.repo_id, link.base_id, link.base_sha, link.base_values, None, now
                )
            if link.base_sha is None or link.base_values is None:
                return []
            step = BaseStep(link.base_sha, dict(link.base_values), None, None)
            found = self._differs_finding(link, head, step, watched, now)
            return [found] if found is not None else []
        units = effective_units(head)
        top = steps[-1].values
        out: list[str] = []
        covered = {
            (p["file"], p["key"], p["current"])
            for _, pending in open_stale(self.advisories, link.repo_id)
            for p in pending
            if p.get("artifact") == ARTIFACT
        }
        for step in steps:
            if step.before is None:
                continue
            stale = [
                s
                for s in find_stale(step.before, step.values, top, units)
                if (s.file, s.key, s.to_json()["left"]) not in covered
            ]
            if stale:
                if step.commit is None:  # an unwatched base: its commit read only now
                    step = replace(step, commit=self._base_commit(link.base_id, step.sha))
                adv = self._publish(link, head.sha, step, stale, now)
                if adv is not None:
                    out.append(adv.id)
                    covered |= {(s.file, s.key, str(s.to_json()["left"])) for s in stale}
        last = steps[-1]
        self.lineage.compared(link.repo_id, link.base_id, last.sha, last.values, None, now)
        found = self._differs_finding(link, head, last, watched, now)
        return out + ([found] if found is not None else [])

    def _differs_finding(
        self, link: Link, head: Snapshot, step: BaseStep, watched: set[RepoId], now: datetime
    ) -> str | None:
        """A "differs from its base" advisory (`tracker.advisories.stale.find_differs`) for the
        GGUF units of the derivative's `head` whose template or ids (MATTERS) differ from the
        base's at `step`, the newest base revision compared; none for a value an open
        lineage advisory of the derivative already names. Returns its id when published."""
        covered = {
            (p["file"], p["key"], p["current"])
            for _, pending in open_stale(self.advisories, link.repo_id)
            for p in pending
            if p.get("artifact") == ARTIFACT
        }
        differs = [
            d
            for d in find_differs(step.values, effective_units(head), MATTERS)
            if (d.file, d.key, d.to_json()["left"]) not in covered
        ]
        if not differs:
            return None
        with self.advisories.transaction() as tx:  # one per derivative revision (`_publish`)
            if any(a.group is Artifact.LINEAGE for a in tx.introduced_at(link.repo_id, head.sha)):
                return None
        if step.commit is None:  # read only when it is to be published
            step = replace(step, commit=self._commit_of(link.base_id, step.sha, watched))
        adv = self._publish(link, head.sha, step, differs, now, differs=True)
        return adv.id if adv is not None else None

    def _commit_of(self, base: RepoId, sha: Sha, watched: set[RepoId]) -> Commit | None:
        """The base's commit `sha`: from the store when the base is watched, else read."""
        if base in watched:
            try:
                return self.store.revision(base, sha).commit
            except TrackerError:
                return None
        return self._base_commit(base, sha)

    def _base_commit(self, base: RepoId, sha: Sha) -> Commit | None:
        """The commit `sha` of an unwatched base (its title names the fix in the advisory), read
        through the base's source within the rate budget when a stale value is found; None when
        it cannot be read (the advisory then names the commit by its id alone)."""
        try:
            commits = self.base_source(base).list_commits(base, sha)
        except TrackerError as exc:
            log.warning("lineage.base_commit_unreadable", base=base, sha=sha, error=str(exc))
            return None
        return next((c for c in commits if c.sha == sha), None)

    def _publish(
        self,
        link: Link,
        sha: Sha,
        step: BaseStep,
        stale: Sequence[Stale],
        now: datetime,
        *,
        differs: bool = False,
    ) -> Advisory | None:
        """One stale-derivative advisory (`differs`: a "differs from its base" one) introduced at
        the derivative's `sha` (None when a lineage advisory is already introduced there: one per
        derivative revision, its first base change named)."""
        subject = StaleSubject(
            link.repo_id,
            self.repo_url(link.repo_id),
            sha,
            link.base_id,
            self.repo_url(link.base_id),
            step.sha,
            step.commit,
            link.relation,
        )
        with self.advisories.transaction() as tx:
            if any(a.group is Artifact.LINEAGE for a in tx.introduced_at(link.repo_id, sha)):
                log.info("lineage.already_advised", repo=link.repo_id, sha=sha, base=link.base_id)
                return None
            n = tx.allocate(self.prefix, now.year)
            adv_id = advisory_id(self.prefix, now.year, n)
            record = build_record(
                advisory_id=adv_id, subject=subject, stale=stale, now=now, differs=differs
            )
            validate_record(record)
            severity = Severity.MODERATE if differs else top_severity(stale)
            adv = Advisory(adv_id, link.repo_id, sha, Artifact.LINEAGE, severity, record)
            tx.insert(
                adv,
                package_name=subject.url,
                pending=[p.to_json() for p in initial_pending(stale)],
            )
            audience = self.audience() if self.audience is not None else None
            enqueue_introduced(tx, link.repo_id, subject.url, sha, adv, now, audience)
        log.info(
            "lineage.differs" if differs else "lineage.stale",
            repo=link.repo_id,
            base=link.base_id,
            advisory=adv_id,
        )
        return adv


def _stale_of(advisories: AdvisoryStore, rid: RepoId) -> list[Advisory]:
    """Every stale-derivative advisory of `rid` (open, fixed or withdrawn), by id."""
    return [a for a in advisories.list_advisories(repo_id=rid) if a.group is Artifact.LINEAGE]


def _about(adv: Advisory, base: RepoId) -> bool:
    extra = adv.record.get("database_specific")
    lineage = extra.get("lineage") if isinstance(extra, dict) else None
    return isinstance(lineage, dict) and lineage.get("base") == base


def _kind(adv: Advisory) -> str:
    """`stale`, or `differs` for a "differs from its base" finding."""
    extra = adv.record.get("database_specific")
    lineage = extra.get("lineage") if isinstance(extra, dict) else None
    kind = lineage.get("kind") if isinstance(lineage, dict) else None
    return kind if kind == "differs" else "stale"


def _head(store: Store, rid: RepoId) -> Sha | None:
    try:
        revs = store.revisions(rid, include_rewritten=False)
    except TrackerError:
        return None
    return revs[-1].sha if revs else None


MATTERS = ("chat_template", "bos_token_id", "eos_token_id", "pad_token_id")
"""What a derivative's unit and its base at the newest compared revision may not differ in
without a finding (`differs_from_base`): the prompt it renders and the ids it starts, stops and
pads with. Generation defaults and tokenizers may differ on purpose (a fine-tune's own)."""


def _differs(store: Store, link: Link) -> list[JSONValue]:
    """Each (unit file, key) where the derivative at its head has another value than its base at
    the newest revision compared (`link.base_values`), for the keys that matter (MATTERS); a key
    one side does not say is not compared."""
    head = _head(store, link.repo_id)
    if head is None or link.base_values is None:
        return []
    base = link.base_values
    out: list[JSONValue] = []
    for unit in effective_units(store.snapshot(link.repo_id, head)):
        for key in MATTERS:
            if key in unit.values and key in base and unit.values[key] != base[key]:
                out.append({"file": unit.file, "key": key})
    return out


def _node(
    store: Store,
    advisories: AdvisoryStore,
    link: Link,
    rid: RepoId,
    watched: set[RepoId],
) -> dict[str, JSONValue]:
    """One link as a node of the tree (`rid`: the node's repo, the derivative or the base)."""
    from tracker.advisories.lifecycle import state_of

    advs = [a for a in _stale_of(advisories, link.repo_id) if _about(a, link.base_id)]
    states = {a.id: state_of(a.record).value for a in advs}
    open_ids = [i for i, s in states.items() if s == AdvisoryState.OPEN.value]
    kinds = {_kind(a) for a in advs if a.id in open_ids}
    if "stale" in kinds:
        state = "stale"
    elif kinds:
        state = "differs from base"
    elif link.base_error is not None:
        state = "base unreadable"
    elif link.base_sha is None:
        state = "not compared yet"
    else:
        state = "up to date"
    return {
        "repo": rid,
        "watched": rid in watched,
        "head": _head(store, rid),
        "differs_from_base": _differs(store, link),
        "relation": link.relation,
        "via": link.via,
        "state": state,
        "base_compared_at": link.base_sha,
        "base_error": link.base_error,
        "advisories": [
            {
                "id": a.id,
                "state": states[a.id],
                "severity": a.severity.value,
                "summary": str(a.record.get("summary", "")),
            }
            for a in advs
        ],
    }


def lineage_tree(
    store: Store,
    advisories: AdvisoryStore,
    lineage: LineageStore,
    rid: RepoId,
    watched: set[RepoId],
    depth: int = 4,
) -> dict[str, JSONValue]:
    """The lineage tracker knows around `rid`: its bases (and theirs, while stored) and its
    derivatives (and theirs), each with its state; at most `depth` levels either way."""
    links = lineage.links()

    def up(repo: RepoId, left: int, seen: frozenset[RepoId]) -> list[JSONValue]:
        out: list[JSONValue] = []
        for link in (x for x in links if x.repo_id == repo and x.base_id not in seen):
            node = _node(store, advisories, link, link.base_id, watched)
            if left > 1:
                node["bases"] = up(link.base_id, left - 1, seen | {link.base_id})
            out.append(node)
        return out

    def down(repo: RepoId, left: int, seen: frozenset[RepoId]) -> list[JSONValue]:
        out: list[JSONValue] = []
        for link in (x for x in links if x.base_id == repo and x.repo_id not in seen):
            node = _node(store, advisories, link, link.repo_id, watched)
            if left > 1:
                node["derivatives"] = down(link.repo_id, left - 1, seen | {link.repo_id})
            out.append(node)
        return out

    return {
        "repo": rid,
        "watched": rid in watched,
        "head": _head(store, rid),
        "bases": up(rid, depth, frozenset({rid})),
        "derivatives": down(rid, depth, frozenset({rid})),
    }


__all__ = [
    "BASE_FILES",
    "BaseStep",
    "Lineage",
    "fetch_base",
    "fixed_by",
    "lineage_tree",
    "open_stale",
    "record_links",
]
