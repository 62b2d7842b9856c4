"""`tracker repair`: stores written by releases before issue 26, mended.

Those releases recorded a fault of the transport as a property of the file: a `Content-Length`
(or a body, or a gzip expansion) over the cap on a file the tree says is small became "could not
read config.json: OversizedArtifactError", and a passing 404 for a listed file
"EntryNotFoundError"; then they analysed and published from it (a false "could not read", a
false LoRA "cannot resolve", fixes and answers lost). `tracker verify` names each such row
(`tracker.store.verify.suspects`); repairing a repo that has one:

1. reads every suspect file again from its source, checked against the tree like any ingest
   (`tracker.ingest.snapshots.read_content`, `read_header`); a read that still fails leaves the repo as
   it was (its error reported, exit 1), so nothing false is replaced by something unchecked;
2. copies the repo's analysed live revisions, with the bytes read in step 1 in place of the
   suspect rows, into a scratch SQLite store and analyses them there, oldest first, with the
   daemon's own pipeline (`tracker.pipeline.Pipeline.analyse_revision`): what a clean run
   publishes;
3. makes the store's diffs, estimates and preflights the scratch's, then its advisories those
   (`tracker.advisories.repairing.reconcile`: false ones withdrawn with the reason, missing ones
   published, altered ones rewritten under their ids with the reason they changed), queuing the
   webhook deliveries the pipeline's own paths queue, team-filtered subscriptions included;
4. last, replaces each suspect row with the bytes read (so a repair stopped half-way finds the
   same suspects and redoes the same work: every step before is idempotent).

Revisions not yet analysed (the tail a poll has still to analyse) are left to the next poll. Run
it with the poll workers stopped: an advisory a worker extends or fixes while the scratch analysis
runs is overwritten with the scratch's state of it.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import structlog

from tracker.advisories.repairing import all_of, reconcile
from tracker.app import App
from tracker.ingest.snapshots import read_content, read_header
from tracker.pipeline import Pipeline
from tracker.shared.artifacts import Fetch, fetch_mode
from tracker.shared.domain import GGUFHeader, RepoId, Sha, TreeEntry
from tracker.shared.errors import TrackerError
from tracker.store import Store
from tracker.store.advisories import AdvisoryStore, SuppressedChange
from tracker.store.analysis import AnalysisStore
from tracker.store.preflight import PreflightStore
from tracker.store.values import FileVersion
from tracker.store.verify import Suspect, suspects
from tracker.teams.facts import store_audience
from tracker.watchlist import WatchedRepo

log = structlog.get_logger(__name__)

SCRATCH_PREFIX = "REPAIRSCRATCH"
"""The advisory id prefix of the scratch analysis (mapped to the store's ids when reconciled)."""


@dataclass(frozen=True)
class RepoRepair:
    """One repo's repair: the suspect rows read again (`repo@sha:path`), the advisories
    withdrawn (id, reason), published and rewritten, or the error that left it as it was."""

    repo_id: str
    refetched: tuple[str, ...] = ()
    withdrawn: tuple[tuple[str, str], ...] = ()
    published: tuple[str, ...] = ()
    updated: tuple[str, ...] = ()
    error: str | None = None


@dataclass(frozen=True)
class RepairReport:
    repos: tuple[RepoRepair, ...] = field(default_factory=tuple)

    @property
    def ok(self) -> bool:
        return all(r.error is None for r in self.repos)


def _read_again(app: App, watched: WatchedRepo, s: Suspect) -> FileVersion:
    """The suspect file read again and checked against its tree entry; TrackerError when the
    read still fails (a fault of the transport again, or the source is down)."""
    source = app.source_for(watched)
    limits = app.settings.limits
    entry: TreeEntry = s.entry
    mode = fetch_mode(entry.path)
    if mode in (Fetch.HEADER, Fetch.GGUF):
        header = read_header(source, RepoId(s.repo_id), Sha(s.sha), entry, limits.cap(mode))
        if isinstance(header, GGUFHeader):
            return FileVersion.gguf(header)
        return FileVersion.header(header)
    data = read_content(source, RepoId(s.repo_id), Sha(s.sha), entry, limits.cap(mode))
    return FileVersion.content(data)


def repair(app: App, *, scratch_dir: Path | None = None) -> RepairReport:
    """Repair every repo with a suspect "could not read" (the module docstring)."""
    found = suspects(app.store.engine, max_file_bytes=app.settings.max_file_bytes)
    by_repo: dict[str, list[Suspect]] = {}
    for s in found:
        by_repo.setdefault(s.repo_id, []).append(s)
    out = []
    for repo_id, rows in by_repo.items():
        with tempfile.TemporaryDirectory(prefix="tracker-repair-", dir=scratch_dir) as tmp:
            out.append(_repair_repo(app, RepoId(repo_id), rows, Path(tmp)))
    return RepairReport(tuple(out))


def _repair_repo(app: App, rid: RepoId, rows: Sequence[Suspect], tmp: Path) -> RepoRepair:
    try:
        watchlist = app.load_watchlist()
        watched = watchlist.get(rid)
    except TrackerError as exc:
        return RepoRepair(rid, error=f"not repaired: {exc}")
    read: dict[tuple[str, str], FileVersion] = {}  # (sha, path) → the file read again
    by_identity: dict[tuple[str, object], FileVersion] = {}
    try:
        for s in rows:
            key = (s.path, s.entry.identity)
            if key not in by_identity:
                by_identity[key] = _read_again(app, watched, s)
            read[(s.sha, s.path)] = by_identity[key]
    except TrackerError as exc:
        log.warning("repair.read_failed", repo=rid, error=str(exc))
        return RepoRepair(rid, error=f"not repaired: read again, {exc}")
    store = app.store
    revisions = [r for r in store.revisions(rid, include_rewritten=False)]
    analysed = [r.commit.sha for r in revisions if r.analysed]
    if not analysed:
        return RepoRepair(rid, error="not repaired: no revision of it is analysed yet")
    last = max(i for i, r in enumerate(revisions) if r.analysed)
    copied = revisions[: last + 1]
    scratch = Store.open(f"sqlite:///{tmp / 'repair.db'}")
    try:
        state = store.repo_state(rid)
        scratch.ensure_repo(rid, source_kind=state.source_kind, url=state.url, ref=state.ref)
        previous: Sha | None = None
        for rev in copied:
            sha = rev.commit.sha
            files = {}
            for path, fv in store.file_versions(rid, sha).items():
                again = read.get((sha, path))
                if again is not None:
                    files[path] = again
                elif fv.blob_sha256 is not None:
                    data = store.read_blob(fv.blob_sha256)
                    files[path] = FileVersion(fv.kind, None, fv.reason, data, fv.fetched)
                else:
                    files[path] = fv
            scratch.store_revision(
                rid, rev.commit, store.tree(rid, sha), files, previous=previous, now=app.clock()
            )
            previous = sha
        settings = app.settings.model_copy(update={"advisory_prefix": SCRATCH_PREFIX})
        pipeline = Pipeline(
            settings=settings,
            store=scratch,
            advisories=AdvisoryStore(scratch.engine),
            analysis=AnalysisStore(scratch.engine),
            source_for=app.source_for,
            watchlist=app.load_watchlist,
            clock=app.clock,
            stages=app.stages,
            preflight=PreflightStore(scratch.engine),
            symbol_tables=app.symbol_tables.get,
        )
        try:
            for rev in copied:
                pipeline.analyse_revision(watched, rev.commit.sha)
        except TrackerError as exc:
            return RepoRepair(rid, error=f"not repaired: the clean analysis failed: {exc}")
        finally:
            pipeline.close()
        clean_adv = AdvisoryStore(scratch.engine)
        clean = all_of(clean_adv, rid)
        suppressed: dict[Sha, list[SuppressedChange]] = {}
        for change in clean_adv.suppressed(repo_id=rid):
            suppressed.setdefault(change.sha, []).append(change)
        faults = "; ".join(sorted({f"{s.path} at {s.sha[:12]} ({s.fault})" for s in rows}))
        transport = "published from a fault of the transport, not from the file's content: "
        reason = (
            transport
            + faults
            + "; `tracker repair` read the file again and its analysis does not publish this"
        )
        rewrite_reason = (
            "rewritten by `tracker repair`: the record was "
            + transport
            + faults
            + "; this is the record the analysis of the file read again publishes"
        )
        now = app.clock()
        # the clean diffs, estimates and preflights first: the team audience of the deliveries
        # below judges on them, as the pipeline's does on what it just saved
        clean_analysis = AnalysisStore(scratch.engine)
        clean_preflight = PreflightStore(scratch.engine)
        for rev in copied:
            sha = rev.commit.sha
            diff = clean_analysis.diff(rid, scratch.revision(rid, sha).previous, sha)
            est = clean_analysis.estimate(rid, sha)
            pf = clean_preflight.get(rid, sha)
            if diff is not None and est is not None:
                diff = type(diff)(repo_id=rid, before=rev.previous, after=sha, changes=diff.changes)
                app.analysis.save(diff, est, now)
            if pf is not None:
                app.preflight.save(pf, now)
        done = reconcile(
            app.advisories,
            rid,
            live=[Sha(s) for s in analysed],
            clean=clean,
            clean_prefix=SCRATCH_PREFIX,
            clean_suppressed=suppressed,
            previous={Sha(r.commit.sha): r.previous for r in copied},
            prefix=app.settings.advisory_prefix,
            now=now,
            reason=reason,
            rewrite_reason=rewrite_reason,
            audience=store_audience(lambda: watchlist.teams, store, app.preflight),
        )
    finally:
        scratch.close()
    for (at, path), fv in sorted(read.items()):
        store.replace_file(rid, Sha(at), path, fv)
    log.info(
        "repo.repaired",
        repo=rid,
        withdrawn=[i for i, _ in done.withdrawn],
        published=list(done.published),
        updated=list(done.updated),
    )
    return RepoRepair(
        rid,
        refetched=tuple(f"{rid}@{sha[:12]}:{path}" for sha, path in sorted(read)),
        withdrawn=done.withdrawn,
        published=done.published,
        updated=done.updated,
    )


__all__ = ["RepairReport", "RepoRepair", "repair"]
