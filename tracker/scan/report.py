"""Match the pins a scan found with the store: is the repo watched, which stored revision does the
pin name, how far behind HEAD it is, and which advisories affect it (those whose versions hold the
pinned revision) or come with the next upgrade (introduced between the pin and HEAD and still
open there)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from tracker.advisories.lifecycle import state_of
from tracker.domain import Advisory, AdvisoryState, JSONValue, RepoId, Severity, Sha
from tracker.errors import StoreError, StoreNotFoundError
from tracker.scan.pins import Found, Pin
from tracker.store.advisories import AdvisoryStore
from tracker.store.store import Store

SEVERITY_RANK = {Severity.LOW: 0, Severity.MODERATE: 1, Severity.HIGH: 2, Severity.CRITICAL: 3}


class Relation(StrEnum):
    """How an advisory bears on a pin."""

    AT_PIN = "affects the pinned revision"
    AFTER_PIN = "between the pin and HEAD"


class PinState(StrEnum):
    """What the store knows of a pin."""

    CURRENT = "current"  # the pin is HEAD (or follows the watched ref)
    STALE = "stale"  # HEAD has moved past the pinned revision
    NOT_WATCHED = "not watched"  # the watchlist does not list the repo
    NOT_INGESTED = "not ingested"  # watched, but nothing of it is in the store yet
    UNKNOWN_REVISION = "unknown revision"  # the store has no revision by that name
    NO_STORE = "no store"


@dataclass(frozen=True)
class Hit:
    """One advisory bearing on one pin."""

    id: str
    severity: Severity
    state: AdvisoryState
    relation: Relation
    introduced: Sha
    summary: str


@dataclass(frozen=True)
class PinReport:
    """One pin with what the store says of it."""

    pin: Pin
    state: PinState
    watched: bool
    pinned: Sha | None
    head: Sha | None
    behind: int | None
    note: str
    hits: tuple[Hit, ...]


@dataclass(frozen=True)
class ScanReport:
    """Everything `tracker scan` prints."""

    found: Found
    pins: tuple[PinReport, ...]

    def at_or_above(self, threshold: Severity) -> list[tuple[PinReport, Hit]]:
        """Every (pin, advisory) at `threshold` or worse."""
        rank = SEVERITY_RANK[threshold]
        return [(p, h) for p in self.pins for h in p.hits if SEVERITY_RANK[h.severity] >= rank]


def _versions(record: Mapping[str, JSONValue]) -> set[str]:
    out: set[str] = set()
    affected = record.get("affected")
    for aff in affected if isinstance(affected, list) else []:
        versions = aff.get("versions") if isinstance(aff, dict) else None
        out.update(v for v in versions or () if isinstance(v, str))
    return out


def _hit(a: Advisory, relation: Relation) -> Hit:
    summary = str(a.record.get("summary", ""))
    return Hit(
        id=a.id,
        severity=a.severity,
        state=state_of(a.record),
        relation=relation,
        introduced=a.introduced,
        summary=summary.removeprefix(f"{a.repo_id}: "),
    )


class Matcher:
    """Matches pins with one store; each repo's history and advisories are read once."""

    def __init__(
        self, store: Store | None, advisories: AdvisoryStore | None, watched: Mapping[RepoId, str]
    ) -> None:
        self._store = store
        self._advisories = advisories
        self._watched = watched
        self._history: dict[RepoId, tuple[list[Sha], Sha] | None] = {}
        self._advs: dict[RepoId, list[Advisory]] = {}

    def _repo(self, repo_id: RepoId) -> tuple[list[Sha], Sha] | None:
        if repo_id not in self._history:
            assert self._store is not None
            try:
                order = [r.sha for r in self._store.revisions(repo_id, include_rewritten=False)]
                head = self._store.resolve(repo_id, "HEAD")
                self._history[repo_id] = (order, head)
            except StoreNotFoundError:
                self._history[repo_id] = None
        return self._history[repo_id]

    def advisories_of(self, repo_id: RepoId) -> list[Advisory]:
        if repo_id not in self._advs:
            assert self._advisories is not None
            self._advs[repo_id] = self._advisories.list_advisories(
                repo_id=repo_id, include_withdrawn=False
            )
        return self._advs[repo_id]

    def resolve(self, repo_id: RepoId, revision: str | None) -> tuple[Sha, Sha, int] | str:
        """(pinned sha, HEAD, revisions behind) or why the pin cannot be placed."""
        history = self._repo(repo_id)
        if history is None:
            return "nothing of it is in the store yet"
        order, head = history
        assert self._store is not None
        if revision is None:
            pinned = head
        else:
            try:
                pinned = self._store.resolve(repo_id, revision)
            except (StoreNotFoundError, StoreError) as exc:
                return str(exc).removeprefix(f"{repo_id}: ")
        if pinned not in order:
            return f"{pinned[:12]} was rewritten away from the ref's history"
        return pinned, head, order.index(head) - order.index(pinned)

    def hits(self, repo_id: RepoId, pinned: Sha, head: Sha) -> tuple[Hit, ...]:
        """Advisories affecting `pinned`, then those introduced after it up to `head` and still
        open: what pinning there runs today, and what upgrading to HEAD brings."""
        history = self._repo(repo_id)
        assert history is not None
        order = history[0]
        seq = {sha: i for i, sha in enumerate(order)}
        at, after = [], []
        for a in self.advisories_of(repo_id):
            state = state_of(a.record)
            if pinned in _versions(a.record):
                at.append(_hit(a, Relation.AT_PIN))
            elif (
                state is AdvisoryState.OPEN
                and a.introduced in seq
                and seq[pinned] < seq[a.introduced] <= seq[head]
            ):
                after.append(_hit(a, Relation.AFTER_PIN))
        return tuple(at + after)

    def report(self, pin: Pin) -> PinReport:
        ref = self._watched.get(pin.repo_id)
        watched = ref is not None
        if self._store is None:
            return PinReport(pin, PinState.NO_STORE, watched, None, None, None, "no store", ())
        placed = self.resolve(pin.repo_id, pin.revision)
        if isinstance(placed, str):
            if not watched:
                state, note = PinState.NOT_WATCHED, "tracker does not watch this repo"
            elif self._repo(pin.repo_id) is None:
                state, note = PinState.NOT_INGESTED, placed
            else:
                state, note = PinState.UNKNOWN_REVISION, placed
            return PinReport(pin, state, watched, None, None, None, note, ())
        pinned, head, behind = placed
        if pin.revision is None:
            note = f"no revision pinned: follows {ref or 'the default branch'}"
        elif behind == 0:
            note = "at HEAD"
        else:
            note = f"stale: {behind} revision{'s' if behind != 1 else ''} behind HEAD"
        state = PinState.STALE if behind else PinState.CURRENT
        if not watched:
            note += " (tracker no longer watches this repo: its history stops there)"
        return PinReport(
            pin, state, watched, pinned, head, behind, note, self.hits(pin.repo_id, pinned, head)
        )


def match(found: Found, matcher: Matcher) -> ScanReport:
    """The report of every pin `found` holds."""
    return ScanReport(found, tuple(matcher.report(p) for p in found.pins))


def worst(hits: Sequence[Hit]) -> Severity | None:
    """The most severe of `hits`."""
    return max((h.severity for h in hits), key=SEVERITY_RANK.__getitem__, default=None)
