"""The snapshots stage: ingest every new revision of a watched repo from its source into the store.

Per repo: `resolve_ref` (one request); equal to the cursor → done. Otherwise list commits, take
every commit after the cursor on the first-parent chain (oldest first; the first poll backfills
all, or the last N), and for each: list the tree, compare it with the previous ingested tree by
identity (blob id / LFS oid), fetch only tracked files that changed (headers only for
`.safetensors` and `.gguf`), and store the revision in one transaction. Force-pushes, deleted refs/repos,
gated/private repos and source errors set the repo's state; other repos are unaffected.
"""

from __future__ import annotations

import ast
import io
import time
import tokenize
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

import structlog

from tracker.ingest.integrity import content_mismatch
from tracker.shared.artifacts import AUTO_MAP_FILES, Fetch, Limits, fetch_mode, is_tracked
from tracker.shared.bounded import DOCUMENT, BoundsError, load_json
from tracker.shared.domain import Commit, GGUFHeader, RepoId, SafetensorsHeader, Sha, TreeEntry
from tracker.shared.errors import (
    AccessDeniedError,
    ArtifactError,
    DeadlineError,
    FetchAbandonedError,
    IntegrityError,
    NotFoundError,
    OversizedArtifactError,
    RateBudgetWait,
    RepoNotFoundError,
    RevisionNotFoundError,
    SourceError,
    StoreError,
    StoreNotFoundError,
    TransientSourceError,
)
from tracker.sources import RepoSource
from tracker.store import EventKind, FileKind, FileVersion, RepoStatus, Store
from tracker.watchlist import WatchedRepo

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class PollReport:
    """What one poll of one repo did.

    `status` is the repo's state after the poll; `error` the reason when it is not OK;
    `retry_after`: seconds the source asked us to wait, longer than the cap on honoured waits
    (the daemon reschedules the repo that far ahead instead of sleeping);
    `budget_wait`: the shared rate budget allows the next request only that many seconds later,
    beyond the cap on waits: not a poll outcome (nothing recorded, the revisions stored so far are
    complete), the daemon polls the repo again when the budget allows;
    `stopped`: the daemon began to stop (SIGTERM) and the poll ended between two revisions, the
    revisions stored so far complete and the rest left for the next poll;
    `requests`/`bytes_fetched` come from the source's counters when it keeps them (the Hub
    source counts every request of huggingface_hub's shared client, so the count is exact for
    sequential polls and approximate while daemon jobs overlap); `rewritten` counts revisions a
    force-push dropped from the ref.
    """

    repo_id: RepoId
    status: RepoStatus
    head: Sha | None
    revisions_ingested: int = 0
    files_fetched: int = 0
    bytes_fetched: int = 0
    requests: int | None = None
    rewritten: int = 0
    error: str | None = None
    new_revisions: tuple[Sha, ...] = field(default_factory=tuple)
    seconds: float = 0.0
    retry_after: float | None = None
    stopped: bool = False  # the daemon is stopping: revisions left for the next poll
    budget_wait: float | None = None  # the rate budget allows the next request only this late


def auto_map_modules(files: Mapping[str, bytes]) -> set[str]:
    """Repo paths of the `*.py` files that `auto_map` names in config.json / tokenizer_config.json.

    Values look like `"modeling_x.XModel"`, `["tokenization_x.XTok", null]` or
    `"other/repo--modeling_x.XModel"` (cross-repo: skipped). Malformed JSON, or JSON over
    `tracker.shared.bounded.DOCUMENT`, names nothing.
    """
    modules: set[str] = set()
    for name in AUTO_MAP_FILES:
        raw = files.get(name)
        if raw is None:
            continue
        try:
            obj = load_json(
                raw, name, DOCUMENT, nonfinite=True
            )  # bounded, Infinity as transformers
        except BoundsError:
            continue
        auto_map = obj.get("auto_map") if isinstance(obj, dict) else None
        if not isinstance(auto_map, dict):
            continue
        for value in auto_map.values():
            for ref in value if isinstance(value, list) else [value]:
                if not isinstance(ref, str) or "--" in ref or "." not in ref:
                    continue
                module = ref.rsplit(".", 1)[0]
                modules.add(module.replace(".", "/") + ".py")
    return modules


AST_MAX_BYTES = 1_000_000
"""The longest remote-code file `relative_imports` parses into a tree (real modeling files are
under 300 KB); a longer one is read token by token."""


def relative_imports(path: str, source: bytes) -> set[str]:
    """Repo paths of the modules a remote-code file imports relatively (`from .x import y`,
    `from . import x`, `from ..pkg.x import y`), which transformers downloads and runs with it.

    This runs in the poller's own process, outside the analysis budget: a file up to
    AST_MAX_BYTES is parsed with `ast` (never imported; ~190 bytes of tree per source byte, so
    at most ~190 MiB); a longer one (up to the 64 MB fetch cap) is read token by token
    (`tokenize`: the memory of one line, slower), with the same answer. A file that does not
    parse (or tokenize) names nothing.
    """
    if len(source) <= AST_MAX_BYTES:
        return _relative_imports_ast(path, source)
    here = [p for p in path.split("/")[:-1]]
    out: set[str] = set()
    skip = (tokenize.COMMENT, tokenize.NL, tokenize.ENCODING)
    try:
        tokens = (t for t in tokenize.tokenize(io.BytesIO(source).readline) if t.type not in skip)
        for tok in tokens:
            if tok.type != tokenize.NAME or tok.string != "from":
                continue
            parts: list[str] = []
            level, nxt = 0, next(tokens, None)
            while nxt is not None and nxt.type == tokenize.OP and nxt.string in (".", "..."):
                level += len(nxt.string)
                nxt = next(tokens, None)
            if level == 0:
                continue
            while nxt is not None and nxt.type == tokenize.NAME and nxt.string != "import":
                parts.append(nxt.string)
                nxt = next(tokens, None)
                if nxt is not None and nxt.type == tokenize.OP and nxt.string == ".":
                    nxt = next(tokens, None)
            if nxt is None or nxt.string != "import":
                continue
            names: list[str] = []
            expect_name = True
            for t in tokens:
                if t.type in (tokenize.NEWLINE, tokenize.ENDMARKER) or t.string == ";":
                    break
                if t.string in ("(", ")"):
                    continue
                if t.string == ",":
                    expect_name = True
                elif expect_name and (t.type == tokenize.NAME or t.string == "*"):
                    names.append(t.string)
                    expect_name = False
            if level - 1 > len(here):
                continue  # climbs out of the repo
            base = here[: len(here) - (level - 1)]
            if parts:
                full = [*base, *parts]
                out.add("/".join(full) + ".py")
                out.add("/".join([*full, "__init__.py"]))
            else:
                out.update("/".join([*base, name]) + ".py" for name in names)
    except (tokenize.TokenError, SyntaxError, UnicodeDecodeError):
        return set()
    return out


def _relative_imports_ast(path: str, source: bytes) -> set[str]:
    """`relative_imports` by `ast.parse`."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return set()
    here = [p for p in path.split("/")[:-1]]
    out: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom) or node.level == 0:
            continue
        if node.level - 1 > len(here):
            continue  # climbs out of the repo
        base = here[: len(here) - (node.level - 1)]
        if node.module:
            parts = [*base, *node.module.split(".")]
            out.add("/".join(parts) + ".py")
            out.add("/".join([*parts, "__init__.py"]))
        else:
            out.update("/".join([*base, alias.name]) + ".py" for alias in node.names)
    return out


def first_parent_chain(commits: Sequence[Commit], head: Sha) -> list[Commit]:
    """The first-parent chain from `head` through `commits`, newest first (stops at a gap)."""
    by_sha = {c.sha: c for c in commits}
    chain: list[Commit] = []
    sha: Sha | None = head
    seen: set[Sha] = set()
    while sha is not None and sha in by_sha and sha not in seen:
        seen.add(sha)
        commit = by_sha[sha]
        chain.append(commit)
        sha = commit.parents[0] if commit.parents else None
    return chain


INTEGRITY_READS = 3
"""How many times a read whose outcome disagrees with the tree (bytes that do not match, more
bytes than the tree's size, "not found" for a file the tree lists) is tried before the revision
gives up (an IntegrityError: the revision is not stored this poll, and the next poll tries again)."""


def _not_listed(exc: NotFoundError) -> bool:
    """A not-found answer about the file itself (not the repo or the ref being gone)."""
    return not isinstance(exc, RepoNotFoundError | RevisionNotFoundError)


def read_content(source: RepoSource, rid: RepoId, sha: Sha, entry: TreeEntry, cap: int) -> bytes:
    """The bytes of `entry` at `sha`, checked against the tree (git blob id or LFS sha256).

    The caller has checked the tree's size against `cap`, so at most the tree's size is read: an
    answer longer than that (a `Content-Length` over it, a longer body, a gzip body that expands
    past it) is the transport's fault, as is a "not found" for a file the tree lists (a CDN
    serves that for a moment after a push). Like bytes that do not match, each is read again up
    to INTEGRITY_READS times in all; the last becomes an IntegrityError (never a stored or
    analysed file, never "could not read").
    """
    what = f"{rid}@{sha}:{entry.path}"
    why = ""
    for attempt in range(1, INTEGRITY_READS + 1):
        try:
            data = source.read_file(rid, sha, entry.path, min(cap, entry.size))
        except OversizedArtifactError as exc:
            why = f"the answer is longer than the tree's {entry.size:,} bytes ({exc})"
        except NotFoundError as exc:
            if not _not_listed(exc):
                raise
            why = f"not found, but the tree lists it ({exc})"
        else:
            found = content_mismatch(entry, data)
            if found is None:
                return data
            why = found
        log.warning("fetch.integrity_mismatch", file=what, attempt=attempt, why=why)
    raise IntegrityError(f"{what}: integrity check failed {INTEGRITY_READS} times: {why}")


def _listed_header(
    source: RepoSource, rid: RepoId, sha: Sha, entry: TreeEntry, cap: int
) -> SafetensorsHeader | GGUFHeader:
    """One header read (safetensors or GGUF, by the file's fetch mode); a "not found" for the
    listed file is read again up to INTEGRITY_READS times in all, then an IntegrityError (as in
    `read_content`)."""
    what = f"{rid}@{sha}:{entry.path}"
    why = ""
    gguf = fetch_mode(entry.path) is Fetch.GGUF
    for attempt in range(1, INTEGRITY_READS + 1):
        try:
            if gguf:
                return source.read_gguf_header(rid, sha, entry.path, cap, expect=entry)
            return source.read_safetensors_header(rid, sha, entry.path, cap, expect=entry)
        except NotFoundError as exc:
            if not _not_listed(exc):
                raise
            why = f"not found, but the tree lists it ({exc})"
        log.warning("fetch.integrity_mismatch", file=what, attempt=attempt, why=why)
    raise IntegrityError(f"{what}: integrity check failed {INTEGRITY_READS} times: {why}")


def read_header(
    source: RepoSource, rid: RepoId, sha: Sha, entry: TreeEntry, cap: int
) -> SafetensorsHeader | GGUFHeader:
    """The safetensors or GGUF header of `entry` at `sha`, read by Range and checked against the
    pointer (size, oid where the server declares it; `RepoSource.read_safetensors_header`,
    `RepoSource.read_gguf_header`).

    Only the header is read, so its bytes cannot be hashed against the LFS oid: a header that
    cannot be read is read once more, and two different reasons mean a read was damaged in
    transit (IntegrityError: transient), the same reason twice that the file itself is broken
    (the ArtifactError propagates and is recorded as "could not read"). A "not found" for the
    listed file is never a reason of the file: it is read again, and persisting it is an
    IntegrityError.
    """
    what = f"{rid}@{sha}:{entry.path}"
    try:
        return _listed_header(source, rid, sha, entry, cap)
    except ArtifactError as first:
        try:
            again = _listed_header(source, rid, sha, entry, cap)
        except ArtifactError as second:
            if str(second) == str(first) and type(second) is type(first):
                raise
            raise IntegrityError(
                f"{what}: integrity check failed: two reads of the header disagree "
                f"({first}; then {second})"
            ) from second
        log.warning("fetch.integrity_mismatch", file=what, attempt=1, why=str(first))
        return again


class PollDeadline:
    """The overall deadline of one repo's poll: checked before every fetch."""

    def __init__(self, rid: RepoId, seconds: float) -> None:
        self.rid = rid
        self.seconds = seconds
        self.until = time.monotonic() + seconds

    def check(self) -> None:
        if time.monotonic() > self.until:
            raise DeadlineError(
                f"{self.rid}: poll ran past its deadline of {self.seconds:g} s; the revisions "
                "stored so far are kept and the rest is fetched next poll"
            )


class _Counters:
    def __init__(self, source: RepoSource) -> None:
        self.source = source
        self.requests0 = getattr(source, "request_count", None)
        self.bytes0 = getattr(source, "bytes_received", None)
        self.files = 0
        self.bytes = 0

    def requests(self) -> int | None:
        now = getattr(self.source, "request_count", None)
        return None if now is None or self.requests0 is None else now - self.requests0

    def bytes_fetched(self) -> int:
        now = getattr(self.source, "bytes_received", None)
        return self.bytes if now is None or self.bytes0 is None else now - self.bytes0


def _fetch_revision(
    source: RepoSource,
    store: Store,
    watched: WatchedRepo,
    commit: Commit,
    tree: Sequence[TreeEntry],
    prev_tree: Mapping[str, TreeEntry],
    prev_files: Mapping[str, FileVersion],
    limits: Limits,
    counters: _Counters,
    deadline: PollDeadline | None = None,
) -> dict[str, FileVersion]:
    """File versions of every tracked path of `tree`: carried when unchanged, else fetched
    (every fetched byte checked against the tree first: `read_content`, `read_header`)."""
    rid = watched.repo_id
    out: dict[str, FileVersion] = {}
    # Names the Hub lists more than once: its JSON gives each byte that is not UTF-8 as U+FFFD,
    # so two such names in one tree read as one, and a read by that name answers for only one of
    # them (which then fails its blob-id check for good). The tree's own property: recorded.
    shared = Counter(e.path for e in tree)

    def unchanged(entry: TreeEntry) -> FileVersion | None:
        before = prev_tree.get(entry.path)
        fv = prev_files.get(entry.path)
        if before is not None and fv is not None and before.identity == entry.identity:
            return fv.carried()
        return None

    def fetch(entry: TreeEntry) -> FileVersion:
        if shared[entry.path] > 1:
            return FileVersion.unreadable(
                f"name collision: {shared[entry.path]} files of the tree are listed under this "
                "name (names that are not UTF-8 listed with U+FFFD), so none can be read by it"
            )
        carried = unchanged(entry)
        if carried is not None:
            return carried
        mode = fetch_mode(entry.path)
        cap = limits.cap(mode)
        if deadline is not None:
            deadline.check()
        try:
            if mode in (Fetch.HEADER, Fetch.GGUF):
                header = read_header(source, rid, commit.sha, entry, cap)
                fv = (
                    FileVersion.gguf(header)
                    if isinstance(header, GGUFHeader)
                    else FileVersion.header(header)
                )
            else:
                if entry.size > cap:
                    return FileVersion.unreadable(
                        f"{entry.size} bytes, over the cap of {cap} bytes"
                    )
                data = read_content(source, rid, commit.sha, entry, cap)
                fv = FileVersion.content(data)
                counters.bytes += len(data)
        except ArtifactError as exc:  # bytes that match the tree, or a header twice the same
            return FileVersion.unreadable(f"{exc.__class__.__name__}: {exc}")
        counters.files += 1
        return fv

    by_path = {e.path: e for e in tree}
    for entry in tree:
        if entry.path.endswith(".py") or fetch_mode(entry.path) is Fetch.IDENTITY:
            continue  # *.py only when auto_map names it (below); pickles by tree identity only
        if is_tracked(entry.path, watched.tracked):
            out[entry.path] = fetch(entry)
    contents: dict[str, bytes] = {}
    for name in AUTO_MAP_FILES:
        fv = out.get(name)
        if fv is None or fv.kind is not FileKind.CONTENT:
            continue
        contents[name] = fv.data if fv.data is not None else store.read_blob(fv.blob_sha256 or "")
    named = auto_map_modules(contents)
    for path in sorted(named | {p for p in by_path if p.endswith(".py")}):
        code = by_path.get(path)
        if code is not None and (path in named or is_tracked(path, watched.tracked)):
            out[path] = fetch(code)
    # The remote code's own relative imports run too: follow them to a closure (bounded by the
    # number of .py files in the tree, since each is fetched at most once).
    todo = sorted(p for p in out if p.endswith(".py"))
    while todo:
        path = todo.pop()
        fv = out[path]
        if fv.kind is not FileKind.CONTENT:
            continue
        data = fv.data if fv.data is not None else store.read_blob(fv.blob_sha256 or "")
        for dep in sorted(relative_imports(path, data)):
            if dep in by_path and dep not in out:
                out[dep] = fetch(by_path[dep])
                todo.append(dep)
    return out


def poll_repo(
    store: Store,
    source: RepoSource,
    watched: WatchedRepo,
    *,
    limits: Limits | None = None,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
    stop: Callable[[], bool] | None = None,
) -> PollReport:
    """Poll one repo: ingest every new revision on its ref; never raises a SourceError.

    `stop` is asked before each revision: once it says True, no further revision is fetched
    (each stored revision is its own transaction, so the stored ones are complete) and the report
    says `stopped`. Returns a PollReport; the store's state for the repo (status, failures, last
    error) is updated. StoreError propagates (the database itself failed, or the store misses a row it
    should hold: StoreNotFoundError, which is never taken for the repo being gone upstream).
    """
    limits = limits or Limits()
    rid = watched.repo_id
    started = time.perf_counter()
    counters = _Counters(source)
    # old_ref None: first poll, the store had never seen the repo
    old_ref, before = store.start_poll(
        rid, source_kind="git" if watched.git else "hub", url=watched.git, ref=watched.ref
    )
    cursor = before.cursor
    ingested: list[Sha] = []
    rewritten = 0
    head: Sha | None = None
    bound = log.bind(repo=rid, ref=watched.ref)
    deadline = PollDeadline(rid, limits.poll_deadline_s)
    retry_after: float | None = None
    left: int | None = None  # revisions not fetched because the daemon is stopping
    new: list[Commit] = []  # the revisions this poll ingests, oldest first (once listed)

    def reported(
        status: RepoStatus, error: str | None, *, stopped: bool, retry_after: float | None = None
    ) -> PollReport:
        """What this poll did, as of now."""
        return PollReport(
            repo_id=rid,
            status=status,
            head=head,
            revisions_ingested=len(ingested),
            files_fetched=counters.files,
            bytes_fetched=counters.bytes_fetched(),
            requests=counters.requests(),
            rewritten=rewritten,
            error=error,
            new_revisions=tuple(ingested),
            seconds=time.perf_counter() - started,
            retry_after=retry_after,
            stopped=stopped,
        )

    def finish(status: RepoStatus, error: str | None, event: EventKind | None = None) -> PollReport:
        """Record the poll; an event when the repo enters GONE/GATED (or leaves them)."""
        store.record_poll(
            rid, status=status, error=error, now=now(), seconds=time.perf_counter() - started
        )
        if status is not before.status and event is not None:
            store.record_event(rid, event, {"error": error, "ref": watched.ref}, now=now())
        elif status is RepoStatus.OK and before.status in (RepoStatus.GONE, RepoStatus.GATED):
            store.record_event(rid, EventKind.RECOVERED, {"was": before.status.value}, now=now())
        report = reported(status, error, stopped=left is not None, retry_after=retry_after)
        bound.info(
            "repo.polled",
            status=status.value,
            revisions=len(ingested),
            files=counters.files,
            error=error,
            **({"stopped": True, "left": left} if left is not None else {}),
        )
        if status is not RepoStatus.OK:  # what an operator alerts on: repo.failing/gone/gated
            bound.warning(f"repo.{status.value}", error=error)
        return report

    try:
        head = source.resolve_ref(rid, watched.ref)
        if head == cursor:
            return finish(RepoStatus.OK, None)
        chain = first_parent_chain(source.list_commits(rid, head), head)
        if not chain or chain[0].sha != head:
            return finish(RepoStatus.FAILING, f"commit listing does not contain the head {head}")
        chain_shas = {c.sha for c in chain}
        base: Sha | None = cursor
        if cursor is not None and cursor not in chain_shas:
            live = store.revisions(rid, include_rewritten=False)
            survivors = [r for r in live if r.sha in chain_shas]
            dropped = [r.sha for r in live if r.sha not in chain_shas]
            base = survivors[-1].sha if survivors else None
            if old_ref is not None and old_ref != watched.ref:
                # The watchlist follows another ref now: the old line was not rewritten upstream,
                # so nothing is marked rewritten-away (and no advisory withdrawn).
                store.rewrite(
                    rid,
                    dropped=[],
                    cursor=base,
                    details={"old_ref": old_ref, "ref": watched.ref, "old_head": cursor,
                             "new_head": head},
                    kind=EventKind.REF_CHANGED,
                    now=now(),
                    only_from=cursor,
                )  # fmt: skip
                bound.warning("repo.ref_changed", old_ref=old_ref, old_head=cursor, new_head=head)
            else:
                applied = store.rewrite(
                    rid,
                    dropped=dropped,
                    cursor=base,
                    details={"old_head": cursor, "new_head": head, "ref": watched.ref},
                    now=now(),
                    only_from=cursor,  # a concurrent poller may have recorded it already
                )
                rewritten = len(dropped) if applied else 0
                bound.warning(
                    "repo.force_pushed", old_head=cursor, new_head=head, dropped=len(dropped)
                )
        for c in chain:
            if c.sha == base:
                break
            new.append(c)
        if base is None and watched.backfill is not None:
            new = new[: watched.backfill]
        new.reverse()
        # What the first new revision is compared with: the fork point; or, when a rewrite left no
        # ingested revision alive (a squash, a new root), the head tracker saw last, so that the
        # new line's first revision is diffed against the last known state, not treated as new.
        previous = base if base is not None else cursor
        prev_tree: dict[str, TreeEntry] = {}
        prev_files: dict[str, FileVersion] = {}
        if previous is not None:
            prev_tree = {e.path: e for e in store.tree(rid, previous)}
            prev_files = store.file_versions(rid, previous)
        for c in new:
            if stop is not None and stop():
                left = len(new) - len(ingested)
                break
            deadline.check()
            tree = source.list_tree(rid, c.sha)
            files = _fetch_revision(
                source, store, watched, c, tree, prev_tree, prev_files, limits, counters, deadline
            )
            store.store_revision(rid, c, tree, files, previous=previous, now=now())
            ingested.append(c.sha)
            bound.info("revision.stored", sha=c.sha, files=len(files))
            previous = c.sha
            if c is not new[-1]:  # what the next revision is compared with
                prev_tree = {e.path: e for e in tree}
                prev_files = store.file_versions(rid, c.sha)
        if not new and base is not None and base != head:  # pragma: no cover - defensive
            return finish(RepoStatus.FAILING, f"head {head} is not reachable from {base}")
        return finish(RepoStatus.OK, None)
    except RateBudgetWait as exc:  # not the repo's failure: nothing recorded, polled again later
        bound.info(
            "repo.budget_wait", wait_s=round(exc.retry_after or 0.0, 3), revisions=len(ingested)
        )
        return PollReport(
            repo_id=rid,
            status=before.status,
            head=head,
            revisions_ingested=len(ingested),
            files_fetched=counters.files,
            bytes_fetched=counters.bytes_fetched(),
            requests=counters.requests(),
            rewritten=rewritten,
            error=f"waiting for the rate budget: {exc}",
            new_revisions=tuple(ingested),
            seconds=time.perf_counter() - started,
            budget_wait=exc.retry_after or 0.0,
        )
    except FetchAbandonedError as exc:  # SIGTERM mid-fetch: not the repo's failure
        left = len(new) - len(ingested)
        bound.info("repo.fetch_abandoned", reason=str(exc), revisions=len(ingested), left=left)
        if before.status in (RepoStatus.NEW, RepoStatus.OK):  # as a stop between two revisions
            return finish(RepoStatus.OK, None)
        # its state stays the one it had: nothing was learned about it
        return reported(before.status, None, stopped=True)
    except RevisionNotFoundError as exc:
        return finish(
            RepoStatus.GONE, f"ref {watched.ref!r} not found: {exc}", EventKind.REF_DELETED
        )
    except RepoNotFoundError as exc:
        return finish(
            RepoStatus.GONE,
            f"repo not found (deleted, renamed or private): {exc}",
            EventKind.REPO_GONE,
        )
    except AccessDeniedError as exc:
        return finish(
            RepoStatus.GATED, f"access denied (gated or private): {exc}", EventKind.ACCESS_DENIED
        )
    except (SourceError, ArtifactError) as exc:
        if isinstance(exc, TransientSourceError):
            retry_after = exc.retry_after if isinstance(exc, DeadlineError) else None
        return finish(RepoStatus.FAILING, f"{exc.__class__.__name__}: {exc}")


def poll_all(
    store: Store,
    repos: Iterable[WatchedRepo],
    source_for: Callable[[WatchedRepo], RepoSource],
    *,
    limits: Limits | None = None,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
    stop: Callable[[], bool] | None = None,
) -> list[PollReport]:
    """Poll each repo in turn; one repo's failure never stops the others (StoreError does).
    `stop`: see `poll_repo` (a repo not yet begun when it says True is still polled, and stops
    before its first revision).

    A source error, or any unexpected exception while polling a repo (a bug, or content no
    typed check caught), marks that repo failing with the reason and the loop goes on.
    """
    reports = []
    for watched in repos:

        def failed(error: str, watched: WatchedRepo = watched) -> PollReport:
            store.ensure_repo(
                watched.repo_id,
                source_kind="git" if watched.git else "hub",
                url=watched.git,
                ref=watched.ref,
            )
            store.record_poll(
                watched.repo_id, status=RepoStatus.FAILING, error=error, now=now(), seconds=0.0
            )
            log.warning("repo.failing", repo=watched.repo_id, error=error)
            return PollReport(watched.repo_id, RepoStatus.FAILING, None, error=error)

        try:
            source = source_for(watched)
        except SourceError as exc:
            reports.append(failed(str(exc)))
            continue
        try:
            reports.append(poll_repo(store, source, watched, limits=limits, now=now, stop=stop))
        except StoreNotFoundError as exc:  # this repo's rows are inconsistent, not the database
            log.error("repo.store_inconsistent", repo=watched.repo_id, error=str(exc))
            reports.append(failed(f"store: {exc}"))
        except StoreError:
            raise
        except Exception as exc:  # the daemon keeps going; the reason is on the repo
            log.exception("repo.poll_crashed", repo=watched.repo_id)
            reports.append(failed(f"unexpected {exc.__class__.__name__}: {exc}"))
    return reports


__all__ = ["PollReport", "StoreError", "auto_map_modules", "poll_all", "poll_repo"]
