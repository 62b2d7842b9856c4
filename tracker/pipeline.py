"""Where the stages meet: poll (sources → snapshots), then per new revision diff, estimate, advisories.

One poll cycle = `Pipeline.run_cycle`: ingest every watched repo (`tracker.ingest.snapshots`), withdraw advisories
whose introducing commits a history rewrite dropped, then analyse every ingested revision that is not
yet analysed, oldest first. Analysing a revision: diff it against the revision ingested before it,
rerun the estimate from its config.json (and safetensors headers), diff the estimates, store both in
the revision diff store, publish its advisories exactly once, and only then mark it analysed. A crash
anywhere leaves the revision pending; the next cycle redoes it, and every write on the way is
idempotent (diffs/estimates replace, advisories are unique per revision and group).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import structlog

from tracker.advisories.classify import Overrides, parse_overrides
from tracker.advisories.effects import Context
from tracker.advisories.execute import Executor
from tracker.advisories.loading import loads
from tracker.advisories.service import (
    Judgement,
    judge,
    publish,
    restore_revived,
    withdraw_rewritten,
)
from tracker.diff import diff_snapshots
from tracker.diff.sandbox import RenderLimits
from tracker.estimate import (
    EstimateSettings,
    estimate,
    estimate_delta,
    highest_token_id_from_files,
    parse_config,
)
from tracker.estimate.checkpoint import CensusCache, count_shards, index_total_size
from tracker.estimate.gguf import gguf_snapshot_delta
from tracker.ingest.snapshots import PollReport, poll_all
from tracker.lineage.check import Lineage, fixed_by, record_links
from tracker.preflight import (
    Preflight,
    PreflightSettings,
    ShardCache,
    TableSource,
    preflight_snapshot,
)
from tracker.preflight.delta import Since, preflight_delta
from tracker.sandbox.analysis_worker import (
    AnalysisHandedBackError,
    AnalysisLimits,
    AnalysisOverrunError,
    AnalysisWorker,
)
from tracker.sandbox.render_backstop import render_batch
from tracker.settings import Settings
from tracker.shared.domain import (
    Change,
    Clock,
    Diff,
    Estimate,
    RepoId,
    Severity,
    Sha,
    Snapshot,
    rfc3339,
)
from tracker.shared.errors import EstimateError, RetryLaterError, StoreNotFoundError, TrackerError
from tracker.sources import RepoSource
from tracker.store import AnalysisOverrun, EventKind, RepoStatus, Store
from tracker.store.advisories import AdvisoryStore
from tracker.store.analysis import AnalysisStore, StoredEstimate
from tracker.store.lineage import LineageStore
from tracker.store.outage import unreachable
from tracker.store.preflight import PreflightStore, StoredPreflight
from tracker.teams.audience import TeamAudience
from tracker.teams.facts import store_audience
from tracker.watchlist import WatchedRepo, Watchlist

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class RevisionAnalysis:
    """What analysing one revision produced."""

    sha: Sha
    changes: int
    advisories: tuple[str, ...]
    severities: tuple[Severity, ...]
    estimate_error: str | None


@dataclass(frozen=True)
class RepoCycle:
    """One repo's part of a poll cycle: its poll report and the revisions analysed after it."""

    poll: PollReport
    analysed: tuple[RevisionAnalysis, ...] = ()
    withdrawn: tuple[str, ...] = ()
    error: str | None = None  # why analysis stopped (the revisions left stay pending)
    could_not_analyse: tuple[tuple[Sha, str], ...] = ()  # (sha, reason) recorded this cycle
    stopped: bool = False  # the daemon is stopping: ended between two revisions, the rest pending

    @property
    def advisories(self) -> tuple[str, ...]:
        return tuple(a for r in self.analysed for a in r.advisories)

    @property
    def clean(self) -> bool:
        """Polled OK and every revision analysed (none recorded as could not analyse)."""
        return (
            self.poll.status is RepoStatus.OK and self.error is None and not self.could_not_analyse
        )

    @property
    def state(self) -> str:
        """`ok`, the poll status (`failing`, `gone`, `gated`), `analysis incomplete` (failed or
        deferred: `error` says which) or `could not analyse N revisions` (over the budget)."""
        if self.poll.status is RepoStatus.OK and self.error is not None:
            return "analysis incomplete"
        if self.poll.status is RepoStatus.OK and self.could_not_analyse:
            n = len(self.could_not_analyse)
            return f"could not analyse {n} revision{'s' if n > 1 else ''}"
        return self.poll.status.value


@dataclass(frozen=True)
class CycleReport:
    """A whole poll cycle, per repo in watchlist order."""

    repos: tuple[RepoCycle, ...] = field(default_factory=tuple)
    lineage: tuple[str, ...] = ()  # stale-derivative advisories published after the repos

    @property
    def revisions_ingested(self) -> int:
        return sum(r.poll.revisions_ingested for r in self.repos)

    @property
    def advisories(self) -> tuple[str, ...]:
        return tuple(a for r in self.repos for a in r.advisories)

    @property
    def unclean(self) -> tuple[RepoCycle, ...]:
        """The repos that failed, are gone or gated, or whose analysis failed."""
        return tuple(r for r in self.repos if not r.clean)

    def unclean_line(self) -> str:
        """One line for stderr: '2 of 9 repos did not poll cleanly: a/b (gated), c/d (failing)'."""
        bad = self.unclean
        which = ", ".join(f"{r.poll.repo_id} ({r.state})" for r in bad)
        return f"{len(bad)} of {len(self.repos)} repos did not poll cleanly: {which}"


def repo_url(watched: WatchedRepo, hub_public_url: str) -> str:
    """The URL advisories name as the repo (OSV `affected[].ranges[].repo`)."""
    if watched.git:
        # OSV wants a URI (`format: uri`): a local path becomes a file:// URL.
        if "://" in watched.git or watched.git.startswith("git@"):
            return watched.git
        return Path(watched.git).expanduser().resolve().as_uri()
    return f"{hub_public_url.rstrip('/')}/{watched.repo_id}"


def render_limits(settings: Settings) -> RenderLimits:
    """The chat-template render limits under `settings` (only the backstop is configurable: the
    step budget decides outcomes, and must be the same for every worker)."""
    return RenderLimits(
        backstop_cpu_s=settings.render_backstop_cpu_s,
        backstop_wall_s=settings.render_backstop_wall_s,
    )


def backstop_diff(settings: Settings) -> Callable[[Snapshot | None, Snapshot], Sequence[Change]]:
    """`diff_snapshots` with chat templates rendered in the backstop worker (`tracker.sandbox.render_backstop`)
    under `settings`' limits: the differ a Pipeline runs unless its stages say otherwise."""
    limits = render_limits(settings)

    def diff(before: Snapshot | None, after: Snapshot) -> Sequence[Change]:
        return diff_snapshots(before, after, render_limits=limits, renderer=render_batch)

    return diff


def estimate_snapshot(
    snapshot: Snapshot, settings: EstimateSettings
) -> tuple[Estimate | None, str | None]:
    """The estimate of a snapshot from its config.json and headers, or (None, why not)."""
    if "config.json" in snapshot.unreadable:
        return None, f"could not read config.json: {snapshot.unreadable['config.json']}"
    data = snapshot.files.get("config.json")
    if data is None:
        return None, "no config.json at this revision"
    try:
        config = parse_config(data)
        max_token_id = highest_token_id_from_files(dict(snapshot.files))
        report = estimate(
            config,
            dict(snapshot.headers) or None,
            settings,
            max_token_id=max_token_id,
            total_size=index_total_size(snapshot.files),
        )
        return report, None
    except EstimateError as exc:
        return None, str(exc)
    except RecursionError as exc:  # a recorded state, never a stuck revision
        return None, f"could not analyse the estimate: {exc.__class__.__name__}"
    # A MemoryError goes up to the analysis budget (`tracker.sandbox.analysis_worker`): no property of
    # the revision, the whole revision is recorded as could not analyse.


@dataclass(frozen=True)
class Stages:
    """The analysis stages a Pipeline runs, passed in: the real ones by default, fakes in tests.

    `diff` None: `backstop_diff` under the pipeline's settings (chat templates render in the
    killable worker); `diff_snapshots` itself renders in this process.
    """

    diff: Callable[[Snapshot | None, Snapshot], Sequence[Change]] | None = None
    estimate: Callable[[Snapshot, EstimateSettings], tuple[Estimate | None, str | None]] = (
        estimate_snapshot
    )
    estimate_delta: Callable[[Estimate, Estimate], Sequence[Change]] = estimate_delta
    gguf_delta: Callable[[Snapshot, Snapshot, EstimateSettings], Sequence[Change]] = (
        gguf_snapshot_delta
    )
    preflight: Callable[
        [Snapshot, PreflightSettings, TableSource | None, EstimateSettings, ShardCache | None],
        Preflight,
    ] = preflight_snapshot
    preflight_delta: Callable[[Preflight, Preflight, Since | None], Sequence[Change]] = (
        preflight_delta
    )


@dataclass(frozen=True)
class Computed:
    """The pure part of analysing a revision (`Analyst.compute`): what the pipeline then stores,
    publishes and marks. `judgement`: the changes classified and the consistency findings (the
    part of publishing that reads the revision's files), so that `publish` reads none."""

    changes: tuple[Change, ...]
    estimated: tuple[Estimate | None, str | None]
    estimate_before: Estimate | None
    preflight: tuple[Preflight | None, str | None]
    judgement: Judgement


# How far back `Pipeline._since` looks for the last revision with a preflight answer.
SINCE_LOOKBACK = 32
ANSWERS = ("capacity", "lora")
Known = dict[str, tuple[Sha, int] | None]
"""Where each preflight answer was last had, as of one revision R: (that revision, how many
revisions before R along the ingested chain: 0 for R itself), or None when no revision within
SINCE_LOOKBACK before R had it; an answer not listed is not known (the store is walked for it)."""


def _has(preflight: Preflight, answer: str) -> bool:
    """Whether `preflight` has `answer`: capacity; LoRA with every target resolved (a target the
    remote code leaves unresolved, `gate` built by a function it does not show, is one to look
    back for as much as a LoRA answer lost with config.json)."""
    if answer == "lora":
        return preflight.lora is not None and not preflight.lora.unresolved
    return preflight.capacity is not None


def _known_after(known: Known, sha: Sha, preflight: Preflight | None) -> Known:
    """`known` (as of the revision before `sha`) as of `sha`, whose preflight is `preflight`."""
    out: Known = {}
    for a in ANSWERS:
        if preflight is not None and _has(preflight, a):
            out[a] = (sha, 0)
        elif a in known:
            had = known[a]
            out[a] = (had[0], had[1] + 1) if had is not None and had[1] < SINCE_LOOKBACK else None
    return out


class Analyst:
    """Diffs, estimates and preflights of one revision against the one before it, under the
    watched repo's settings: everything of an analysis that reads only the two snapshots.

    Runs in the analysis worker under the budget (`tracker.sandbox.analysis_worker`) when the pipeline
    uses the real stages; in the pipeline's process when a test passes its own."""

    def __init__(self, stages: Stages, symbol_tables: TableSource | None) -> None:
        assert stages.diff is not None
        self.stages = stages
        self.symbol_tables = symbol_tables
        # Shard censuses by content: successive revisions share most shards (DeepSeek-R1: 163).
        self._shards: dict[
            tuple[str, str, int | None, int], tuple[dict[str, int], int, frozenset[str]]
        ] = {}
        # Shard censuses by content for the estimate and preflight (`count_shards`).
        self._censuses: CensusCache = {}
        # Runs the pinned transformers on both sides of config and generation changes (effects
        # by execution; its structures are cached across revisions).
        self.executor = Executor()

    @classmethod
    def default(cls, settings: Settings) -> Analyst:
        """The real stages under `settings` (what the analysis worker runs)."""
        from tracker.advisories.execute import EffectCache
        from tracker.preflight.wheels import SymbolTables

        stages = Stages(diff=backstop_diff(settings))
        analyst = cls(stages, SymbolTables.from_settings(settings).get)
        analyst.executor.cache = EffectCache(settings.effective_effects_cache_dir)
        return analyst

    def compute(
        self,
        *,
        before: Snapshot | None,
        after: Snapshot,
        estimate_settings: EstimateSettings,
        preflight_settings: PreflightSettings,
        estimate_before: tuple[Estimate | None] | None = None,
        overrides: Overrides | None = None,
        since: Mapping[str, tuple[Sha, Snapshot]] | None = None,
        loadable: tuple[Sha, Snapshot] | None = None,
    ) -> Computed:
        """Diff `before` → `after`, estimate both (`estimate_before`: the earlier revision's
        estimate under these settings when already known), preflight both, and the deltas; then
        classify the changes under the repo's advisory `overrides` and find the revision's
        consistency findings (`tracker.advisories.service.judge`: it parses the revision's config,
        tokenizer files and chat templates, so it runs here, under the budget). `since`: for a
        preflight answer `before` lacks and `after` may have, the last earlier revision that had
        it (`Pipeline._since`), preflighted here under today's settings. `loadable`: when `before`
        has no readable config.json, the newest earlier revision that has one
        (`Pipeline._loadable`), diffed here against `after` so that advice pins it only where it
        lacks the advisory's changes."""
        stages = self.stages
        assert stages.diff is not None
        if len(self._censuses) > 8192:
            self._censuses.clear()
        for snap in (before, after):  # the estimate and preflight read the censuses
            if snap is not None:
                count_shards(snap.headers, {e.path: e.identity for e in snap.tree}, self._censuses)
        changes = tuple(stages.diff(before, after))
        estimated = stages.estimate(after, estimate_settings)
        est_after = estimated[0]
        # The previous revision is re-estimated under today's settings (milliseconds), so that a
        # changed `estimate:` block in the watchlist never shows up as a delta of this commit.
        est_before = None
        if before is not None:
            if estimate_before is not None:
                est_before = estimate_before[0]
            else:
                est_before = stages.estimate(before, estimate_settings)[0]
        if est_before is not None and est_after is not None:
            changes = changes + tuple(stages.estimate_delta(est_before, est_after))
        elif before is not None and est_after is None:
            # a GGUF repo (no config.json): each quant file re-estimated from its header
            changes = changes + tuple(stages.gguf_delta(before, after, estimate_settings))
        # Preflight, like the estimate, re-runs the previous revision under today's settings.
        pf_after = self._preflight(after, preflight_settings, estimate_settings)
        pf_before = (
            self._preflight(before, preflight_settings, estimate_settings)[0] if before else None
        )
        if pf_before is not None and pf_after[0] is not None:
            last_known: dict[str, tuple[str, Preflight]] = {}
            for answer, (sha, snap) in (since or {}).items():  # `Pipeline._since`
                earlier = self._preflight(snap, preflight_settings, estimate_settings)[0]
                if earlier is not None:
                    last_known[answer] = (sha, earlier)
            changes = changes + tuple(stages.preflight_delta(pf_before, pf_after[0], last_known))
        against = (loadable[0], stages.diff(loadable[1], after)) if loadable is not None else None
        context = Context(before, after, executor=self.executor)
        judgement = judge(changes, overrides or Overrides(), context, against)
        return Computed(changes, estimated, est_before, pf_after, judgement)

    def _preflight(
        self, snapshot: Snapshot, settings: PreflightSettings, estimate: EstimateSettings
    ) -> tuple[Preflight | None, str | None]:
        """The preflight of `snapshot`, or (None, why): a failure of preflight is recorded with
        the revision, never a failed analysis (the diff, estimate and advisories stand without it)."""
        if len(self._shards) > 8192:
            self._shards.clear()
        try:
            result = self.stages.preflight(
                snapshot, settings, self.symbol_tables, estimate, self._shards
            )
            return result, None
        except MemoryError:
            raise  # the analysis budget's (`tracker.sandbox.analysis_worker`)
        except Exception as exc:
            if unreachable(exc):
                raise  # the store went away: no property of the revision
            log.exception("preflight.failed", repo=snapshot.repo_id, sha=snapshot.sha)
            return None, f"preflight failed: {exc.__class__.__name__}: {exc}"


def _loads(snap: Snapshot) -> bool:
    """Whether `from_pretrained` can load `snap`: a readable config.json and the weights it
    needs (`tracker.advisories.loading`)."""
    return loads(snap)


class Pipeline:
    """Poll cycles over the collaborators it is given (see the module docstring).

    Built by `tracker.app.App.pipeline` from the App's settings, stores, sources and clock;
    `stages` are the analysis functions (tests pass fakes instead of patching this module).
    """

    def __init__(
        self,
        *,
        settings: Settings,
        store: Store,
        advisories: AdvisoryStore,
        analysis: AnalysisStore,
        source_for: Callable[[WatchedRepo], RepoSource],
        watchlist: Callable[[], Watchlist],
        clock: Clock,
        stages: Stages | None = None,
        preflight: PreflightStore | None = None,
        symbol_tables: TableSource | None = None,
        isolate: bool | None = None,
    ) -> None:
        self.settings = settings
        self.store = store
        self.advisories = advisories
        self.analysis = analysis
        self.source_for = source_for
        self.watchlist = watchlist
        self.clock = clock
        # The real stages run in the analysis worker under the budget (`isolate`, the default
        # then); stages a test passes run here.
        isolate = stages is None if isolate is None else isolate
        stages = stages or Stages()
        if stages.diff is None:
            stages = replace(stages, diff=backstop_diff(settings))
        self.stages = stages
        self.limits = settings.limits
        self.preflight = preflight or PreflightStore(store.engine)
        self.symbol_tables = symbol_tables
        self.analyst = Analyst(stages, symbol_tables)
        self.budget = AnalysisLimits.from_settings(settings)
        self.worker = AnalysisWorker(settings) if isolate else None
        # The last revision analysed of each repo: (sha, snapshot, estimate settings, estimate).
        # It is the next revision's "before": a snapshot never changes and an estimate is a pure
        # function of the snapshot and the settings, so a push's analysis reads, decodes and
        # estimates one revision instead of two (push latency; bench/RESULTS.md, Push mode).
        self._last: dict[
            RepoId, tuple[Sha, Snapshot, EstimateSettings, tuple[Estimate | None, str | None]]
        ] = {}
        # After the last revision analysed of each repo: for each preflight answer, where it was
        # last had (`_since`). Like `_last`, it stands only for the revision right before the next
        # one: a repo whose answer is never had (an unregistered model type) walks the store once.
        self._known: dict[RepoId, tuple[Sha, Known]] = {}
        self.lineage_store = LineageStore(store.engine)
        self.lineage = Lineage(
            store=store,
            advisories=advisories,
            lineage=self.lineage_store,
            base_source=lambda base: source_for(WatchedRepo(base)),
            watched=lambda: {w.repo_id for w in self.watchlist().repos},
            repo_url=self._repo_url,
            limits=self.limits,
            prefix=settings.advisory_prefix,
            clock=clock,
            audience=self._audience,
        )

    def _repo_url(self, rid: RepoId) -> str:
        """The URL advisories name as `rid` (watched: its own; a base not watched: on the Hub)."""
        for w in self.watchlist().repos:
            if w.repo_id == rid:
                return repo_url(w, self.settings.hub_public_url)
        return f"{self.settings.hub_public_url.rstrip('/')}/{rid}"

    def _audience(self) -> TeamAudience:
        """Which advisories affect each watchlist team, for the team-filtered webhook
        subscriptions: the watchlist read when first needed, the store's facts as of now."""
        return store_audience(lambda: self.watchlist().teams, self.store, self.preflight)

    def abandon_analysis(self) -> None:
        """The daemon stops: the analysis under way, and any later one, is handed back
        (`AnalysisWorker.abandon`); its revision stays pending."""
        if self.worker is not None:
            self.worker.abandon()

    def close(self) -> None:
        """Stop the analysis worker (a later analysis starts a new one)."""
        if self.worker is not None:
            self.worker.close()

    def analyse_revision(self, watched: WatchedRepo, sha: Sha) -> RevisionAnalysis:
        """Diff, estimate and publish one ingested revision, then mark it analysed."""
        store = self.store
        rid = watched.repo_id
        revision = store.revision(rid, sha)
        previous = revision.previous
        last = self._last.get(rid)
        if last is not None and last[0] != previous:
            last = None  # not the revision before this one (a rewrite, another process)
        before = (last[1] if last else store.snapshot(rid, previous)) if previous else None
        after = store.snapshot(rid, sha)
        settings = EstimateSettings.from_mapping(watched.estimate)
        known = (last[3][0],) if last is not None and last[2] == settings else None
        request: dict[str, Any] = {
            "before": before,
            "after": after,
            "estimate_settings": settings,
            "preflight_settings": PreflightSettings.from_mapping(watched.preflight),
            "estimate_before": known,
            "overrides": parse_overrides(watched.advisories),
        }
        had: Known = {}  # where each preflight answer was last had (`_since`)
        if previous is not None:
            request["since"], had = self._since(rid, previous, after)
            if before is not None and not _loads(before):
                request["loadable"] = self._loadable(rid, previous)
        computed: Computed
        if self.worker is not None:
            computed = self.worker.run(request)
        else:
            computed = self.analyst.compute(**request)
        changes, estimated = computed.changes, computed.estimated
        est_after, est_error = estimated
        est_before = computed.estimate_before
        pf_after, pf_error = computed.preflight

        at = self.clock()
        lineage_fixed = (
            fixed_by(self.advisories, rid, after) if previous is not None else frozenset()
        )
        self.analysis.save(
            Diff(repo_id=rid, before=previous, after=sha, changes=changes),
            StoredEstimate(repo_id=rid, sha=sha, estimate=est_after, error=est_error),
            at,
        )
        self.preflight.save(StoredPreflight(rid, sha, pf_after, pf_error), at)
        advisories = publish(
            self.advisories,
            repo_id=rid,
            commit=revision.commit,
            previous=previous,
            changes=changes,
            estimate_before=est_before,
            estimate_after=est_after,
            repo_url=repo_url(watched, self.settings.hub_public_url),
            overrides=watched.advisories,
            prefix=self.settings.advisory_prefix,
            now=at,
            judgement=computed.judgement,
            audience=self._audience(),
            lineage_fixed=lineage_fixed,
        )
        record_links(self.lineage_store, rid, after, at)
        store.mark_analysed(rid, sha, now=at)
        self._last[rid] = (sha, after, settings, estimated)
        self._known[rid] = (sha, _known_after(had, sha, pf_after))
        log.info(
            "revision.analysed",
            repo=rid,
            sha=sha,
            changes=len(changes),
            advisories=[a.id for a in advisories],
            estimate_error=est_error,
        )
        return RevisionAnalysis(
            sha=sha,
            changes=len(changes),
            advisories=tuple(a.id for a in advisories),
            severities=tuple(a.severity for a in advisories),
            estimate_error=est_error,
        )

    def _loadable(self, rid: RepoId, previous: Sha) -> tuple[Sha, Snapshot] | None:
        """The newest revision before `previous` that loads (`_loads`), with its
        snapshot, looking back at most SINCE_LOOKBACK revisions along the ingested chain (None:
        none within them). Read only when `previous` itself has no readable config.json."""
        sha = self.store.revision(rid, previous).previous
        for _ in range(SINCE_LOOKBACK):
            if sha is None:
                return None
            snap = self.store.snapshot(rid, sha)
            if _loads(snap):
                return sha, snap
            sha = self.store.revision(rid, sha).previous
        return None

    def _since(
        self, rid: RepoId, previous: Sha, after: Snapshot
    ) -> tuple[dict[str, tuple[Sha, Snapshot]], Known]:
        """For each preflight answer ("capacity": no safetensors headers; "lora": no or an
        unreadable config.json, or a target left unresolved, `_has`) that the previous revision's
        stored preflight lacks (or that has none: never stored, or failed) and `after` may have,
        the last earlier revision whose stored preflight has it, with its snapshot, looking back
        at most SINCE_LOOKBACK revisions along the ingested chain; and where each answer was last
        had as of `previous` (Known).

        What the analysis of `previous` in this process left (`_known`) answers without reading
        the store; otherwise the store is read: one read when the previous revision has both
        answers, a walk back for an answer it lacks. Without it, a repo whose LoRA answer is
        never had (a model type with no module-name table) walked 32 revisions back for each
        revision analysed: 180 queries, about as long as the rest of the analysis."""
        cached = self._known.get(rid)
        known: Known = dict(cached[1]) if cached is not None and cached[0] == previous else {}
        if any(a not in known for a in ANSWERS):
            stored = self.preflight.get(rid, previous)
            pf = stored.preflight if stored is not None else None
            for a in ANSWERS:
                if a not in known and pf is not None and _has(pf, a):
                    known[a] = (previous, 0)
        may = {"capacity": bool(after.headers), "lora": "config.json" in after.files}
        walk = [a for a in ANSWERS if a not in known]  # once: the next revision reads `_known`
        sha = self.store.revision(rid, previous).previous if walk else None
        for back in range(1, SINCE_LOOKBACK + 1):
            if sha is None or not walk:
                break
            earlier = self.preflight.get(rid, sha)
            if earlier is not None and earlier.preflight is not None:
                for a in list(walk):
                    if _has(earlier.preflight, a):
                        known[a] = (sha, back)
                        walk.remove(a)
            sha = self.store.revision(rid, sha).previous
        for a in walk:
            known[a] = None  # not had within SINCE_LOOKBACK revisions (or the chain's start)
        found: dict[str, Sha] = {}
        for a in ANSWERS:
            had = known.get(a)
            if may[a] and had is not None and had[1] > 0:
                found[a] = had[0]
        snaps = {sha: self.store.snapshot(rid, sha) for sha in set(found.values())}
        return {a: (sha, snaps[sha]) for a, sha in found.items()}, known

    def _rewrites(self, rid: RepoId) -> dict[str, str]:
        """Each rewritten-away sha → the force-push that dropped it, as advisories name it."""
        out: dict[str, str] = {}
        for ev in self.store.events(rid):
            if ev.kind is not EventKind.FORCE_PUSH:
                continue
            d = ev.details
            text = (
                f"the force-push to `{d.get('ref')}` seen {rfc3339(ev.at)}: head "
                f"`{str(d.get('old_head'))[:12]}` → `{str(d.get('new_head'))[:12]}`, "
                + (
                    f"history kept up to `{str(d.get('fork_point'))[:12]}`"
                    if d.get("fork_point")
                    else "no earlier revision kept"
                )
            )
            for sha in d.get("dropped") or []:
                out[str(sha)] = text
        return out

    def analyse_repo(
        self,
        watched: WatchedRepo,
        *,
        new_revisions: bool = True,
        stop: Callable[[], bool] | None = None,
    ) -> tuple[
        tuple[RevisionAnalysis, ...], tuple[str, ...], str | None, tuple[tuple[Sha, str], ...]
    ]:
        """Withdraw advisories of rewritten-away commits, then analyse every pending revision.

        When the poll brought `new_revisions`, advisories withdrawn by an earlier rewrite whose
        introducing commit is back on the ref are restored. Returns (analysed, withdrawn ids,
        error, could not analyse). A revision whose analysis overruns its budget
        (`tracker.sandbox.analysis_worker`) is recorded as could not analyse and skipped, and the next one
        is analysed; it is tried again only once `analysis_timeout_s` or `analysis_memory_mib` is
        raised over the limits it overran. Revisions are analysed oldest first; the first one that fails stops the repo's
        analysis there (later ones depend on it: estimate deltas, fixed events), stays pending
        for the next cycle, and marks the repo failing with the reason, so the failure is
        visible in `tracker watch list` while the other repos go on. A RetryLaterError (a
        chat-template render hit its backstop) is recorded the same way, as "deferred (retry
        later)": nothing about the revision was published. `stop` is asked before each revision:
        once it says True the rest stay pending (the daemon is stopping).
        """
        rid = watched.repo_id
        try:
            marks = self.store.revision_marks(rid)  # (sha, analysed, rewritten away)
        except StoreNotFoundError:  # never polled successfully enough to be created
            return (), (), None, ()
        done: list[RevisionAnalysis] = []
        overran: list[tuple[Sha, str]] = []
        withdrawn: tuple[str, ...] = ()
        sha: Sha | None = None
        try:
            dropped = [m for m, _, away in marks if away]
            if dropped:
                withdrawn = tuple(
                    a.id
                    for a in withdraw_rewritten(
                        self.advisories,
                        rid,
                        dropped,
                        self.clock(),
                        self._rewrites(rid),
                        self._audience(),
                    )
                )
            if new_revisions:
                # A push can bring dropped commits back: their advisories are live again.
                live = [m for m, _, away in marks if not away]
                restore_revived(
                    self.advisories,
                    rid,
                    live,
                    self.clock(),
                    self._chain(rid, marks),
                    self._audience(),
                )
                # (restore_revived changes no revision: `marks` still says what is pending)
            pending = [m for m, analysed, away in marks if not analysed and not away]
            recorded = self.store.could_not_analyse(rid) if pending else {}
            for sha in pending:
                if stop is not None and stop():
                    break
                earlier = recorded.get(sha)
                if earlier is not None and not self.budget.raised_over(
                    AnalysisLimits(earlier.timeout_s, earlier.memory_mib)
                ):
                    continue  # overran this budget already: tried again once a limit is raised
                try:
                    done.append(self.analyse_revision(watched, sha))
                except AnalysisOverrunError as exc:
                    self._record_overrun(rid, sha, exc)
                    overran.append((sha, str(exc)))
                except AnalysisHandedBackError:  # SIGTERM: pending, for the next run
                    log.info("revision.analysis_handed_back", repo=rid, sha=sha)
                    break
        except Exception as exc:  # one repo's bad revision must not stop the daemon or other repos
            if unreachable(exc):  # the store went away: nothing about the repo can be recorded
                raise  # (the daemon's `StoreOutage` logs it once per backoff step)
            where = f"analysis of {sha}" if sha else "analysis"
            if isinstance(exc, RetryLaterError):  # not a property of the revision
                error = f"{where} deferred (retry later): {exc}"
                log.warning("repo.analysis_deferred", repo=rid, sha=sha, reason=str(exc))
            else:
                error = f"{where} failed: {exc.__class__.__name__}: {exc}"
                log.exception("repo.analysis_failed", repo=rid, sha=sha)
            try:
                self.store.record_poll(
                    rid, status=RepoStatus.FAILING, error=error, now=self.clock()
                )
            except TrackerError:
                log.exception("repo.analysis_failure_not_recorded", repo=rid)
            return tuple(done), withdrawn, error, tuple(overran)
        return tuple(done), withdrawn, None, tuple(overran)

    def _chain(self, rid: RepoId, marks: Sequence[tuple[Sha, bool, bool]]) -> list[Sha]:
        """The analysed revisions of the ref's line, oldest first: from the newest analysed live
        revision back along `previous` (what advisories' versions are re-derived from)."""
        live = [sha for sha, analysed, away in marks if analysed and not away]
        if not live:
            return []
        # one query for the repo's revisions, then the walk in memory (not a read per revision)
        previous = {r.sha: r.previous for r in self.store.revisions(rid)}
        out: list[Sha] = []
        sha: Sha | None = live[-1]
        seen: set[Sha] = set()
        while sha is not None and sha not in seen:
            out.append(sha)
            seen.add(sha)
            sha = previous.get(sha)
        analysed = set(live)
        return [s for s in reversed(out) if s in analysed]

    def _record_overrun(self, rid: RepoId, sha: Sha, exc: AnalysisOverrunError) -> None:
        """Record a revision whose analysis overran its budget: nothing about it is published,
        `tracker watch list` and the API show it, the next revisions go on."""
        overrun = AnalysisOverrun(
            kind=exc.kind,
            reason=str(exc),
            timeout_s=exc.limits.timeout_s,
            memory_mib=exc.limits.memory_mib,
            at=self.clock(),
        )
        self.store.record_could_not_analyse(rid, sha, overrun)
        self._last.pop(rid, None)
        self._known.pop(rid, None)
        log.warning("revision.could_not_analyse", repo=rid, sha=sha, kind=exc.kind, reason=str(exc))

    def _pending(self, rid: RepoId) -> bool:
        try:
            return bool(self.store.pending_analysis(rid))
        except StoreNotFoundError:
            return False

    def run_cycle(
        self, repos: Iterable[WatchedRepo] | None = None, *, stop: Callable[[], bool] | None = None
    ) -> CycleReport:
        """One full poll cycle over `repos` (default: the whole watchlist).

        A source failure marks that repo failing and the cycle goes on; so does an analysis
        failure (see `analyse_repo`): it is logged, recorded on the repo, and its revisions
        stay pending. `stop` (the daemon's SIGTERM) is asked before every revision, ingested or
        analysed: once it says True the cycle ends between two revisions, each repo's report
        `stopped` where revisions were left for the next cycle.
        """
        watched = tuple(repos) if repos is not None else self.watchlist().repos
        polls = poll_all(
            self.store, watched, self.source_for, limits=self.limits, now=self.clock, stop=stop
        )
        out: list[RepoCycle] = []
        for w, poll in zip(watched, polls, strict=True):
            analysed, withdrawn, error, overran = self.analyse_repo(
                w, new_revisions=poll.revisions_ingested > 0 or poll.rewritten > 0, stop=stop
            )
            stopped = poll.stopped or (
                stop is not None and stop() and error is None and self._pending(w.repo_id)
            )
            out.append(
                RepoCycle(
                    poll=poll,
                    analysed=analysed,
                    withdrawn=withdrawn,
                    error=error,
                    could_not_analyse=overran,
                    stopped=stopped,
                )
            )
        lineage: list[str] = []
        if not any(r.stopped for r in out):  # a stopping daemon compares on its next start
            only = None if repos is None else [w.repo_id for w in watched]
            try:
                lineage = self.lineage.check(only)
            except Exception as exc:  # lineage must not stop the cycle's own report
                if unreachable(exc):
                    raise
                log.exception("lineage.check_failed")
        return CycleReport(repos=tuple(out), lineage=tuple(lineage))


def cycle_json(report: CycleReport) -> str:
    """The cycle report as stable JSON (for `--json`): each repo's poll report plus its analysis."""
    out = []
    for r in report.repos:
        data = asdict(r.poll)
        data["status"] = r.poll.status.value
        data["new_revisions"] = list(r.poll.new_revisions)
        data["seconds"] = round(r.poll.seconds, 3)
        data["analysed"] = [
            {
                "sha": a.sha,
                "changes": a.changes,
                "advisories": list(a.advisories),
                "estimate_error": a.estimate_error,
            }
            for a in r.analysed
        ]
        data["advisories"] = list(r.advisories)
        data["withdrawn"] = list(r.withdrawn)
        data["analysis_error"] = r.error
        data["could_not_analyse"] = [
            {"sha": sha, "reason": why} for sha, why in r.could_not_analyse
        ]
        out.append(data)
    return json.dumps(out, indent=2)


__all__ = [
    "Analyst",
    "Computed",
    "CycleReport",
    "Pipeline",
    "RepoCycle",
    "RevisionAnalysis",
    "Stages",
    "backstop_diff",
    "cycle_json",
    "estimate_snapshot",
    "render_limits",
    "repo_url",
]
