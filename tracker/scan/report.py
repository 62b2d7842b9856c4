"""Match the pins a scan found with the store: is the repo watched, which stored revision does the
pin name, how far behind HEAD it is, and which advisories affect it (those whose versions hold the
pinned revision) or come with the next upgrade (introduced between the pin and HEAD and still
open there).

A remote-code advisory (its group `custom_code`) is judged on the transformers versions the code
runs (`Runtime`: the team profile's where `tracker scan --team` names a team whose profile says
it, else the exact versions pinned in the requirements, pyproject and lockfiles found): the
stored preflight of the revision that introduced it says whether the remote code imports on each.
When it imports on every version the code runs, the advisory is cleared for that pin (listed
apart, with the reason; never counted by `--fail-on`), as `tracker team affected` judges it; when
it does not import on one, or the versions are unknown or were not checked, it stays, and says
why. No advisory depends on the vLLM version (nothing the store records is per vLLM version): it
is reported with its source only."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

from tracker.advisories.lifecycle import state_of
from tracker.preflight.report import RemoteCode
from tracker.scan.pins import Found, Pin
from tracker.shared.domain import (
    Advisory,
    AdvisoryState,
    Artifact,
    JSONValue,
    RepoId,
    Severity,
    Sha,
)
from tracker.shared.errors import StoreError, StoreNotFoundError
from tracker.store.advisories import AdvisoryStore
from tracker.store.store import Store
from tracker.teams.impact import import_break_versions

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
    note: str = ""  # a remote-code advisory: what the code's transformers versions say


@dataclass(frozen=True)
class Runtime:
    """The versions the scanned code runs, each with where it was read: (version, source)."""

    transformers: tuple[tuple[str, str], ...] = ()
    vllm: tuple[tuple[str, str], ...] = ()


def runtime_of(found: Found, team: str | None, profile: Mapping[str, str | None]) -> Runtime:
    """The team profile's transformers/vLLM version (`profile`, of team `team`) where it names
    one, else every distinct exact version the scan found (the first place each was read)."""
    out: dict[str, tuple[tuple[str, str], ...]] = {}
    for package in ("transformers", "vllm"):
        named = profile.get(package)
        if team is not None and named:
            out[package] = ((named, f"team {team}"),)
            continue
        seen: dict[str, str] = {}
        for v in found.versions:
            if v.package == package and v.version and v.version not in seen:
                seen[v.version] = str(v.location)
        out[package] = tuple(seen.items())
    return Runtime(out["transformers"], out["vllm"])


def import_break_verdict(versions: Sequence[str], runtime: Runtime) -> tuple[bool, str]:
    """(whether an advisory about the remote code's import on `versions` bears on the pin, why):
    only when the code runs one of them (unknown versions: it stays)."""
    on = ", ".join(versions)
    if not runtime.transformers:
        return True, (
            f"the import changed on transformers {on}; the transformers version the code runs is "
            "unknown (no team profile names it; no requirement or lockfile pins one exactly)"
        )
    hit = [(v, src) for v, src in runtime.transformers if v in versions]
    if hit:
        return True, f"the import changed on transformers {on}; the code runs {_said(hit)}"
    return False, (
        f"the import changed on transformers {on} only; the code runs {_said(runtime.transformers)}"
    )


def _said(versions: Sequence[tuple[str, str]]) -> str:
    return ", ".join(f"{v} ({src})" for v, src in versions)


def remote_code_verdict(rc: RemoteCode | None, sha: Sha, runtime: Runtime) -> tuple[bool, str]:
    """(whether a remote-code advisory introduced at `sha` still bears on the pin, why), from the
    stored preflight `rc` at `sha` and the transformers versions the code runs."""
    if not runtime.transformers:
        return True, (
            "the transformers version is unknown (no team profile names it; no requirement or "
            "lockfile pins one exactly): whether the remote code imports was not checked"
        )
    if rc is None:
        return True, f"no preflight is stored for {sha[:12]}"
    failing, unchecked = [], []
    for version, source in runtime.transformers:
        ok = rc.importable(version)
        if ok is False:
            failing.append(f"transformers {version} ({source}){rc.why_not(version)}")
        elif ok is None:
            unchecked.append((version, source))
    if failing:
        return True, "the remote code does not import on " + "; ".join(failing)
    if unchecked:
        return True, (
            f"preflight did not check transformers {_said(unchecked)} (add it to the watchlist's "
            "preflight.transformers)"
        )
    return False, (
        f"the remote code imports on transformers {_said(runtime.transformers)} (it is still "
        "new code that runs under trust_remote_code: review it)"
    )


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
    cleared: tuple[Hit, ...] = ()  # remote-code advisories that import on the code's versions


@dataclass(frozen=True)
class ScanReport:
    """Everything `tracker scan` prints."""

    found: Found
    pins: tuple[PinReport, ...]
    runtime: Runtime = Runtime()

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
        self,
        store: Store | None,
        advisories: AdvisoryStore | None,
        watched: Mapping[RepoId, str],
        *,
        runtime: Runtime | None = None,
        remote_code: Callable[[RepoId, Sha], RemoteCode | None] | None = None,
    ) -> None:
        self._store = store
        self._advisories = advisories
        self._watched = watched
        self.runtime = runtime or Runtime()
        self._remote_code = remote_code or (lambda repo_id, sha: None)
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

    def judged(
        self, repo_id: RepoId, hits: Sequence[Hit]
    ) -> tuple[tuple[Hit, ...], tuple[Hit, ...]]:
        """(the hits that bear on the pin, those cleared): each remote-code advisory judged on
        the code's transformers versions (`remote_code_verdict`), with its note."""
        kept: list[Hit] = []
        cleared: list[Hit] = []
        records = {a.id: a for a in self.advisories_of(repo_id)}
        for h in hits:
            adv = records.get(h.id)
            broken = import_break_versions(adv) if adv is not None else None
            if broken is not None:
                bears, note = import_break_verdict(broken, self.runtime)
            elif adv is not None and adv.group is Artifact.CUSTOM_CODE:
                bears, note = remote_code_verdict(
                    self._remote_code(repo_id, h.introduced), h.introduced, self.runtime
                )
            else:
                kept.append(h)
                continue
            (kept if bears else cleared).append(replace(h, note=note))
        return tuple(kept), tuple(cleared)

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
        hits, cleared = self.judged(pin.repo_id, self.hits(pin.repo_id, pinned, head))
        return PinReport(pin, state, watched, pinned, head, behind, note, hits, cleared)


def match(found: Found, matcher: Matcher) -> ScanReport:
    """The report of every pin `found` holds."""
    return ScanReport(found, tuple(matcher.report(p) for p in found.pins), matcher.runtime)


def worst(hits: Sequence[Hit]) -> Severity | None:
    """The most severe of `hits`."""
    return max((h.severity for h in hits), key=SEVERITY_RANK.__getitem__, default=None)
