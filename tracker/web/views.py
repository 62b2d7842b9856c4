"""What each page shows, read from the App's stores into plain values (no HTML here).

`home(app)`, `repo(app, repo_id, rev)` and `advisory(app, advisory_id)` return the view values the
templates render. Every number comes from the stored estimate (`tracker.estimate`, ESTIMATES.md);
nothing is recomputed here. A revision whose estimate is missing, failed or unverified says so.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from tracker.advisories.details import GROUP_LABELS
from tracker.advisories.lifecycle import state_of
from tracker.settings import Settings
from tracker.shared.domain import (
    Advisory,
    AdvisoryState,
    Artifact,
    Change,
    ChangeKind,
    Estimate,
    Fit,
    RepoId,
    Severity,
    Sha,
    parse_rfc3339,
)
from tracker.shared.errors import StoreNotFoundError, TrackerError
from tracker.store import Store
from tracker.store.advisories import AdvisoryStore
from tracker.store.advisories.values import id_key
from tracker.store.analysis import AnalysisStore, StoredEstimate
from tracker.store.preflight import PreflightStore, StoredPreflight
from tracker.store.values import RepoState, RepoStatus, StoredRevision
from tracker.watchlist import Watchlist

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
SEVERITIES = (Severity.CRITICAL, Severity.HIGH, Severity.MODERATE, Severity.LOW)
SETUPS = ("full_finetune", "lora", "serve")
LATEST = 20
ARTIFACT_ORDER = tuple(Artifact)


class PagesApp(Protocol):
    """What the pages read from `tracker.app.App`."""

    @property
    def settings(self) -> Settings: ...

    @property
    def store(self) -> Store: ...

    @property
    def advisories(self) -> AdvisoryStore: ...

    @property
    def analysis(self) -> AnalysisStore: ...

    @property
    def preflight(self) -> PreflightStore: ...

    def load_watchlist(self) -> Watchlist: ...


class PageNotFound(LookupError):
    """A repo, revision or advisory the store does not hold (the page answers 404)."""


# -- advisories ------------------------------------------------------------------------------


@dataclass(frozen=True)
class AdvisoryRow:
    """One advisory as lists show it."""

    id: str
    repo_id: str
    introduced: str
    group: str
    severity: str
    state: str
    summary: str
    modified: datetime | None
    fixed: tuple[str, ...]


def advisory_row(a: Advisory) -> AdvisoryRow:
    rec = a.record
    fixed: list[str] = []
    for aff in rec.get("affected") or []:
        for rng in aff.get("ranges") or []:
            fixed += [str(ev["fixed"]) for ev in rng.get("events") or [] if "fixed" in ev]
    modified = rec.get("modified")
    return AdvisoryRow(
        id=a.id,
        repo_id=a.repo_id,
        introduced=a.introduced,
        group=GROUP_LABELS.get(a.group, a.group.value),
        severity=a.severity.value,
        state=state_of(rec).value,
        summary=str(rec.get("summary") or ""),
        modified=parse_rfc3339(modified) if isinstance(modified, str) else None,
        fixed=tuple(fixed),
    )


# -- home ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RepoLine:
    """A watched repo on the home page."""

    repo_id: str
    status: str
    last_error: str | None
    last_poll_at: datetime | None
    consecutive_failures: int
    revisions: int
    head: StoredRevision | None
    open_by_severity: tuple[tuple[str, int], ...]
    watched: bool
    in_store: bool


@dataclass(frozen=True)
class HomeView:
    repos: tuple[RepoLine, ...]
    latest: tuple[AdvisoryRow, ...]
    watchlist_error: str | None
    total_open: int


def home(app: PagesApp, watchlist: Sequence[str] | None, watchlist_error: str | None) -> HomeView:
    """Every repo the store holds or the watchlist names, with its state and open advisories."""
    states = {s.repo_id: s for s in app.store.repo_states()}
    rows = [advisory_row(a) for a in app.advisories.list_advisories()]
    open_counts: dict[str, Counter[str]] = defaultdict(Counter)
    for r in rows:
        if r.state == AdvisoryState.OPEN.value:
            open_counts[r.repo_id][r.severity] += 1
    names = list(watchlist or [])
    names += sorted(set(states) - set(names))
    lines: list[RepoLine] = []
    for name in names:
        st = states.get(RepoId(name))
        head = _head(app, st) if st is not None else None
        counts = open_counts.get(name, Counter())
        lines.append(
            RepoLine(
                repo_id=name,
                status=st.status.value if st else RepoStatus.NEW.value,
                last_error=st.last_error if st else None,
                last_poll_at=st.last_poll_at if st else None,
                consecutive_failures=st.consecutive_failures if st else 0,
                revisions=st.revisions if st else 0,
                head=head,
                open_by_severity=tuple((s.value, counts[s.value]) for s in SEVERITIES),
                watched=watchlist is None or name in watchlist,
                in_store=st is not None,
            )
        )
    latest = sorted(rows, key=lambda r: (r.modified or _EPOCH, id_key(r.id)), reverse=True)
    total_open = sum(sum(c.values()) for c in open_counts.values())
    return HomeView(tuple(lines), tuple(latest[:LATEST]), watchlist_error, total_open)


def _head(app: PagesApp, st: RepoState) -> StoredRevision | None:
    if st.cursor is None:
        return None
    try:
        return app.store.revision(st.repo_id, st.cursor)
    except StoreNotFoundError:
        return None


# -- repo page -------------------------------------------------------------------------------


@dataclass(frozen=True)
class ChangeGroupView:
    artifact: str
    label: str
    changes: tuple[Change, ...]


@dataclass(frozen=True)
class TimelineEntry:
    """One ingested revision in "What changed upstream"."""

    revision: StoredRevision
    groups: tuple[ChangeGroupView, ...]
    analysed: bool
    diffed: bool
    advisories: tuple[AdvisoryRow, ...]
    fixes: tuple[AdvisoryRow, ...]
    estimate_error: str | None
    selected: bool


@dataclass(frozen=True)
class ChartPoint:
    """One revision's numbers for the charts (None: no estimate for it)."""

    sha: str
    label: str
    estimate: Estimate | None
    error: str | None


@dataclass(frozen=True)
class GGUFRow:
    """One GGUF model of the shown revision on the repo page: its estimate from the stored header
    (`tracker.estimate.gguf`, as `tracker estimate ORG/NAME` gives it) and, per card in the
    estimate's card order, the longest context it holds at batch 1 (None: not even the
    shortest)."""

    path: str
    quant: str
    weight_bytes: int
    kv_bytes_per_token: int
    context_length: int
    held: tuple[str | None, ...]


@dataclass(frozen=True)
class GGUFTable:
    """The repo page's per-quant fit table: the cards (columns), the rows, and each model that
    could not be estimated with why."""

    cards: tuple[str, ...]
    rows: tuple[GGUFRow, ...]
    unreadable: tuple[tuple[str, str], ...]


def gguf_table(app: PagesApp, rid: RepoId, sha: str) -> GGUFTable | None:
    """The GGUF fit table of a revision with GGUF models and no config.json (None otherwise),
    under the watched repo's `estimate:` settings (defaults when it is no longer watched)."""
    from tracker.estimate import EstimateSettings
    from tracker.estimate.gguf import context_label, estimate_gguf
    from tracker.shared.errors import EstimateError

    snap = app.store.snapshot(rid, Sha(sha))
    if "config.json" in snap.files or not snap.gguf_models:
        return None
    mapping = next((w.estimate for w in app.load_watchlist().repos if w.repo_id == rid), {})
    settings = EstimateSettings.from_mapping(mapping)
    rows: list[GGUFRow] = []
    cards: tuple[str, ...] = ()
    unreadable: list[tuple[str, str]] = []
    for _, model in sorted(snap.gguf_models.items()):
        try:
            est = estimate_gguf(model, settings)
        except EstimateError as exc:
            unreadable.append((model.path, str(exc)))
            continue
        cards = tuple(est.fits)
        held = tuple(
            next((context_label(f.context) for f in reversed(fits) if f.fits), None)
            for fits in est.fits.values()
        )
        rows.append(
            GGUFRow(est.path, est.quant, est.weight_bytes, est.kv_bytes_per_token,
                    est.context_length, held)
        )  # fmt: skip
    return GGUFTable(cards, tuple(rows), tuple(unreadable))


@dataclass(frozen=True)
class RepoView:
    state: RepoState
    revisions: tuple[StoredRevision, ...]
    selected: StoredRevision | None
    is_head: bool
    stored: StoredEstimate | None
    estimate: Estimate | None
    timeline: tuple[TimelineEntry, ...]
    points: tuple[ChartPoint, ...]
    advisories: tuple[AdvisoryRow, ...]
    repo_url: str | None
    open_by_severity: tuple[tuple[str, int], ...] = field(default=())
    preflight: StoredPreflight | None = None
    gguf: GGUFTable | None = None


def change_groups(changes: Sequence[Change]) -> tuple[ChangeGroupView, ...]:
    """`changes` grouped by artifact, in the pages' artifact order, each group labelled."""
    grouped: dict[Artifact, list[Change]] = defaultdict(list)
    for c in changes:
        grouped[c.artifact].append(c)
    return tuple(
        ChangeGroupView(art.value, GROUP_LABELS.get(art, art.value), tuple(grouped[art]))
        for art in ARTIFACT_ORDER
        if grouped.get(art)
    )


def repo_url(app: PagesApp, st: RepoState) -> str | None:
    """The public URL of the repo (commit links hang off it); None for a local git source."""
    if st.source_kind == "git":
        url = st.url or ""
        return url.rstrip("/") if url.startswith(("https://", "http://")) else None
    return f"{app.settings.hub_public_url.rstrip('/')}/{st.repo_id}"


def repo(app: PagesApp, repo_id: str, rev: str | None) -> RepoView:
    """The repo page at `rev` (a sha, short sha, `HEAD~n`; None: the head)."""
    try:
        st = app.store.repo_state(RepoId(repo_id))
    except StoreNotFoundError as exc:
        raise PageNotFound(str(exc)) from exc
    revisions = tuple(app.store.revisions(st.repo_id))
    selected: StoredRevision | None = None
    if rev:
        try:
            selected = app.store.revision(st.repo_id, app.store.resolve(st.repo_id, rev))
        except StoreNotFoundError as exc:
            raise PageNotFound(str(exc)) from exc
    elif st.cursor is not None:
        selected = app.store.revision(st.repo_id, st.cursor)
    stored = app.analysis.estimate(st.repo_id, selected.sha) if selected else None
    diffs = {d.after: d for d in app.analysis.diffs_of(st.repo_id)}
    adv = [advisory_row(a) for a in app.advisories.list_advisories(repo_id=repo_id)]
    by_intro: dict[str, list[AdvisoryRow]] = defaultdict(list)
    by_fix: dict[str, list[AdvisoryRow]] = defaultdict(list)
    for a in adv:
        by_intro[a.introduced].append(a)
        for sha in a.fixed:
            by_fix[sha].append(a)
    timeline: list[TimelineEntry] = []
    points: list[ChartPoint] = []
    for r in revisions:
        est = app.analysis.estimate(st.repo_id, r.sha)
        diff = diffs.get(r.sha)
        timeline.append(
            TimelineEntry(
                revision=r,
                groups=change_groups(diff.changes) if diff is not None else (),
                analysed=r.analysed,
                diffed=diff is not None,
                advisories=tuple(by_intro.get(r.sha, ())),
                fixes=tuple(by_fix.get(r.sha, ())),
                estimate_error=est.error if est is not None else None,
                selected=selected is not None and r.sha == selected.sha,
            )
        )
        if not r.rewritten_away:
            points.append(
                ChartPoint(
                    sha=r.sha,
                    label=f"{r.seq}: {r.sha[:7]}",
                    estimate=est.estimate if est else None,
                    error=est.error if est else None,
                )
            )
    counts = Counter(a.severity for a in adv if a.state == AdvisoryState.OPEN.value)
    return RepoView(
        state=st,
        revisions=revisions,
        selected=selected,
        is_head=selected is not None and selected.sha == st.cursor,
        stored=stored,
        estimate=stored.estimate if stored else None,
        timeline=tuple(reversed(timeline)),
        points=tuple(points),
        advisories=tuple(adv),
        repo_url=repo_url(app, st),
        open_by_severity=tuple((s.value, counts[s.value]) for s in SEVERITIES),
        preflight=app.preflight.get(st.repo_id, selected.sha) if selected else None,
        # a GGUF repo has no config.json: its estimate is per quant file, from the headers
        gguf=gguf_table(app, st.repo_id, selected.sha)
        if selected is not None and stored is not None and stored.estimate is None
        else None,
    )


# -- compare page ----------------------------------------------------------------------------


class BadCompare(ValueError):
    """A compare query that names no revision, or one no revision can have (the page answers
    400)."""


@dataclass(frozen=True)
class CompareView:
    """The diff between two stored revisions of one repo, as the API's `/diff` computes it."""

    state: RepoState
    revisions: tuple[StoredRevision, ...]
    base: StoredRevision
    head: StoredRevision
    groups: tuple[ChangeGroupView, ...]
    count: int
    repo_url: str | None


def _compare_arg(name: str, value: str | None) -> str:
    if value is None or not value.strip():
        raise BadCompare(f"Choose two revisions to compare: {name} is missing.")
    if len(value) > 200:
        raise BadCompare(f"{name}: a revision is at most 200 characters.")
    return value.strip()


def compare(app: PagesApp, repo_id: str, a: str | None, b: str | None) -> CompareView:
    """The diff from revision `a` to `b` (each a full or short sha, `HEAD`, the ref, `~n`), made
    by `tracker.store.queries.diff_revisions` as `GET /v1/repos/ORG/NAME/diff` makes it. BadCompare
    for a missing or malformed revision, PageNotFound for a repo or revision not stored."""
    from tracker.shared.errors import InvalidRevisionError
    from tracker.store.queries import diff_revisions

    base, head = _compare_arg("from", a), _compare_arg("to", b)
    try:
        st = app.store.repo_state(RepoId(repo_id))
        found = diff_revisions(app.store, app.settings, st.repo_id, base, head)
    except InvalidRevisionError as exc:
        raise BadCompare(str(exc)) from exc
    except StoreNotFoundError as exc:
        raise PageNotFound(str(exc)) from exc
    return CompareView(
        state=st,
        revisions=tuple(app.store.revisions(st.repo_id)),
        base=app.store.revision(st.repo_id, found.before or found.after),
        head=app.store.revision(st.repo_id, found.after),
        groups=change_groups(found.changes),
        count=len(found.changes),
        repo_url=repo_url(app, st),
    )


# -- the headline ----------------------------------------------------------------------------


def gb_text(x: float) -> str:
    """A figure in decimal GB as every page writes it: GB with two decimals from 0.1 GB, MB
    with one below (one unit per magnitude: the headline and the tables agree)."""
    return f"{x:,.2f} GB" if x >= 0.1 or x == 0 else f"{x * 1000:,.1f} MB"


_gb = gb_text


def duration_text(seconds: float) -> str:
    """A duration in the largest unit that keeps it above 1: hours with one decimal from an
    hour, whole minutes from a minute, whole seconds below (never "0.0 hours")."""
    if seconds >= 3600:
        return f"{seconds / 3600:,.1f} hours"
    if seconds >= 60:
        return f"{round(seconds / 60):,} min"
    return f"{max(1, round(seconds)):,} s"


ESTIMATE_WORDS: dict[str, str] = {
    "verified": "a reader for this family counted the parameters and the checkpoint's own "
    "census (its safetensors headers) agrees within the tolerance",
    "checked": "no reader for this family, but the checkpoint census agrees with the count "
    "within the tolerance",
    "derived": "the count follows from the config alone: no checkpoint census was compared "
    "(none published, or custom code read as the nearest native type); nothing disputes it, "
    "nothing confirms it",
    "unverified": "something disputes the count (the census, or config keys the reader does "
    "not understand): the numbers are shown for reference and no card-fit verdict is given",
}
"""What each word the pages use for an estimate means (the repo page's legend)."""


def estimate_word(est: Estimate) -> str:
    """The word the pages use for `est`: "verified" only where a checkpoint census was compared
    (`census_delta_pct` set); a family reader's count with no census compared is "derived", as
    custom code read under a native type is."""
    v = est.verification
    if v.status.value == "verified" and v.census_delta_pct is None:
        return "derived"
    return v.status.value


def confident(est: Estimate) -> bool:
    """Whether the card-fit table may colour a fit as a verdict: vouched for, and not custom
    code without a checkpoint census to check the nearest-native reading against."""
    if not est.verification.vouched:
        return False
    return not (est.custom_code and est.verification.census_delta_pct is None)


@dataclass(frozen=True)
class RunnablePrice:
    """The estimate's training FLOPs priced on a listed card that holds a full fine-tune at
    batch 1, on one card or split over `cards` of them: GPU-hours = FLOPs / (bf16 peak ×
    utilization), USD = GPU-hours × price (the hours spread over the cards)."""

    card: str
    batch: int
    cards: int
    hours: float
    usd: float
    tflops: float
    utilization: float
    usd_per_hour: float


def priced_card_runs(est: Estimate) -> bool | None:
    """Whether the priced card holds a full fine-tune at batch 1 (on one card or split over
    two, as the fit table says). A card the estimate chose (settings `cost_card` null: the
    cheapest listed card that holds it, `tracker.estimate.cost`): its `gpu_cards` assumption,
    null when no listed card holds it. A card the settings name (and reports stored before the
    choice, all priced on an A10G 24 GB), from the fit table (a fit depends only on VRAM, and
    more VRAM never fits less): True when a listed card with no more VRAM holds it, False when
    one with no less does not. None when no card was priced or the table cannot say."""
    a = est.cost.assumptions
    if est.settings.get("cost_card") is None and "gpu_choice" in a:
        if a.get("gpu") is None:
            return None
        return a.get("gpu_cards") is not None
    vram = float((est.settings.get("cost_card") or {}).get("vram_gb") or 0.0)
    if vram <= 0:
        return None
    if any(c.vram_gb <= vram and c.full_finetune.batch >= 1 for c in est.cards):
        return True
    if any(c.vram_gb >= vram and c.full_finetune.batch < 1 for c in est.cards):
        return False
    return None


def priced_card_chosen(est: Estimate) -> bool:
    """Whether the estimate chose the priced card (settings `cost_card` null) rather than the
    settings naming it."""
    return est.settings.get("cost_card") is None and "gpu_choice" in est.cost.assumptions


def runnable_price(est: Estimate) -> RunnablePrice | None:
    """Where the priced card cannot hold a full fine-tune at batch 1 (`priced_card_runs`), the
    cheapest listed card (the estimate's settings `cards`, with their price and peak) that
    holds it, on one card or split over two (the fit table's), priced with the same FLOPs and
    utilization; None where the priced card can, or no listed card can, or a card has no peak
    or price."""
    fits: dict[str, tuple[int, int]] = {}
    for c in est.cards:
        f = c.full_finetune
        if f.batch >= 1:
            fits[c.name] = (f.batch, 1)
        elif f.split is not None:
            fits[c.name] = (1, f.split_cards or len(f.split))
    if priced_card_runs(est) is not False:
        return None
    utilization = float(est.cost.assumptions.get("utilization") or 0.0)
    best: RunnablePrice | None = None
    for card in est.settings.get("cards") or ():
        name, tflops = card.get("name"), float(card.get("bf16_tflops") or 0.0)
        price = float(card.get("price_per_hour") or 0.0)
        if name not in fits or tflops <= 0 or price <= 0 or utilization <= 0:
            continue
        hours = est.cost.flops / (tflops * 1e12 * utilization) / 3600
        batch, cards = fits[name]
        made = RunnablePrice(name, batch, cards, hours, hours * price, tflops, utilization, price)
        if best is None or made.usd < best.usd:
            best = made
    return best


def _smallest_fit(est: Estimate, setup: str) -> tuple[str, Fit] | None:
    """The smallest card (by VRAM) that holds `setup` at batch 1 on one card, with its fit."""
    for card in sorted(est.cards, key=lambda c: c.vram_gb):
        fit = card.fit(setup)
        if fit.batch >= 1:
            return card.name, fit
    return None


def _fit_words(est: Estimate, setup: str) -> str:
    """The verdict for `setup` as a predicate (it starts with its verb: fits, is, needs)."""
    found = _smallest_fit(est, setup)
    if found is None:
        split = next((c for c in est.cards if c.fit(setup).split is not None), None)
        if split is not None:
            layers = split.fit(setup).split or ()
            return (
                f"needs 2 {split.name} cards at batch 1 "
                f"({' + '.join(str(n) for n in layers)} layers)"
            )
        return "fits no listed card, not even split over 2 cards"
    name, fit = found
    if fit.borderline:
        return f"is borderline on one {name}"
    return f"fits one {name} at batch {fit.batch}"


def headline(repo_id: str, est: Estimate) -> list[str]:
    """The headline sentences of the model page, from the estimate's own numbers, in the units
    the tables use (`gb_text`).

    An unverified estimate gets its numbers and no card-fit verdict (as its advisories do)."""
    m = est.memory
    lora_rank = est.settings.get("lora_rank", 16)
    first = (
        f"Fine-tuning {repo_id} at batch 1 and {m.train_tokens:,} tokens takes about "
        f"{_gb(m.full_finetune)} ({_gb(m.full_finetune_states)} of it weights, gradients and "
        f"AdamW state), and {_gb(m.lora)} with LoRA r={lora_rank}"
    )
    shipped = "as shipped" if m.serve_weights_source != "settings" else "as set"
    per_sequence = f"{_gb(m.kv_cache)} of KV cache"
    if m.serve_prefill:
        per_sequence += f" and a {_gb(m.serve_prefill)} prefill working set"
    serve = (
        f"Serving its {_gb(m.serve_weights)} of weights {shipped} ({m.serve_weights_format}) "
        f"with {per_sequence} per {m.serve_tokens:,}-token sequence"
    )
    if m.serve_weights_upcast is not None:
        serve += f" (upcast to bf16: {_gb(m.serve_weights_upcast)})"
    if not est.verification.vouched:
        return [first + ".", serve + ".", "No card-fit verdict: the estimate is unverified."]
    return [
        f"{first}: full fine-tuning {_fit_words(est, 'full_finetune')}, "
        f"LoRA {_fit_words(est, 'lora')}.",
        f"{serve} {_fit_words(est, 'serve')}.",
    ]


# -- diffs -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class DiffLine:
    kind: str  # "add", "del", "hunk", "file", "ctx"
    text: str


def diff_lines(detail: str) -> tuple[DiffLine, ...] | None:
    """`detail` as unified-diff lines when it holds a unified diff (a `@@` hunk), else None."""
    lines = detail.splitlines()
    if not any(line.startswith("@@") for line in lines):
        return None
    out: list[DiffLine] = []
    for line in lines:
        if line.startswith(("+++", "---")):
            out.append(DiffLine("file", line))
        elif line.startswith("@@"):
            out.append(DiffLine("hunk", line))
        elif line.startswith("+"):
            out.append(DiffLine("add", line))
        elif line.startswith("-"):
            out.append(DiffLine("del", line))
        else:
            out.append(DiffLine("ctx", line))
    return tuple(out)


@dataclass(frozen=True)
class SideRow:
    """One row of a side-by-side diff: a hunk header (`hunk` set), or a line on each side that
    has one (`before`: a `del` or `ctx` line, `after`: an `add` or `ctx` line; None: blank)."""

    hunk: str | None = None
    before: DiffLine | None = None
    after: DiffLine | None = None


def side_by_side(lines: Sequence[DiffLine]) -> tuple[SideRow, ...]:
    """A unified diff's lines (`diff_lines`) as before | after rows, aligned by the line diff:
    a context line on both sides; within a hunk each run of removed lines is paired, in order,
    with the run of added lines that follows it (the longer run's extra lines face a blank);
    file headers are dropped (the columns say before and after)."""
    rows: list[SideRow] = []
    dels: list[DiffLine] = []
    adds: list[DiffLine] = []

    def flush() -> None:
        for i in range(max(len(dels), len(adds))):
            rows.append(
                SideRow(
                    before=dels[i] if i < len(dels) else None,
                    after=adds[i] if i < len(adds) else None,
                )
            )
        dels.clear()
        adds.clear()

    for line in lines:
        if line.kind == "del":
            if adds:  # a removal after additions starts a new run
                flush()
            dels.append(line)
        elif line.kind == "add":
            adds.append(line)
        else:
            flush()
            if line.kind == "hunk":
                rows.append(SideRow(hunk=line.text))
            elif line.kind == "ctx":
                rows.append(SideRow(before=line, after=line))
    flush()
    return tuple(rows)


def is_rendered(change: Change) -> bool:
    return change.kind is ChangeKind.RENDERED


# -- advisory page ---------------------------------------------------------------------------


@dataclass(frozen=True)
class AdvisoryView:
    advisory: Advisory
    row: AdvisoryRow
    record: Mapping[str, Any]
    repo_url: str | None
    introduced: tuple[str, ...]
    fixed: tuple[str, ...]
    versions: tuple[str, ...]
    range_repo: str | None
    withdrawn: str | None
    withdrawn_reason: str | None
    details: str


def advisory(app: PagesApp, advisory_id: str) -> AdvisoryView:
    a = app.advisories.get(advisory_id)
    if a is None:
        raise PageNotFound(f"no advisory {advisory_id!r}")
    rec = a.record
    introduced: list[str] = []
    fixed: list[str] = []
    versions: list[str] = []
    range_repo: str | None = None
    for aff in rec.get("affected") or []:
        versions += [str(v) for v in aff.get("versions") or []]
        for rng in aff.get("ranges") or []:
            range_repo = range_repo or rng.get("repo")
            for ev in rng.get("events") or []:
                if "introduced" in ev:
                    introduced.append(str(ev["introduced"]))
                if "fixed" in ev:
                    fixed.append(str(ev["fixed"]))
    extra = rec.get("database_specific") or {}
    url = range_repo if isinstance(range_repo, str) else None
    if url is not None and not url.startswith(("https://", "http://")):
        url = None
    return AdvisoryView(
        advisory=a,
        row=advisory_row(a),
        record=rec,
        repo_url=url.rstrip("/") if url else None,
        introduced=tuple(introduced),
        fixed=tuple(fixed),
        versions=tuple(versions),
        range_repo=range_repo,
        withdrawn=rec.get("withdrawn"),
        withdrawn_reason=extra.get("withdrawn_reason") if isinstance(extra, Mapping) else None,
        details=str(rec.get("details") or ""),
    )


def watchlist_names(load: Callable[[], Watchlist]) -> tuple[list[str] | None, str | None]:
    """The watchlist's repo ids, or None and the reason it could not be read."""
    try:
        wl = load()
    except TrackerError as exc:
        return None, str(exc).splitlines()[0]
    return [r.repo_id for r in wl.repos], None


def team_names(load: Callable[[], Watchlist]) -> list[str]:
    """The watchlist's team names (none where it cannot be read: the home page says why)."""
    try:
        return [t.name for t in load().teams]
    except TrackerError:
        return []


def sha_list(shas: Sequence[Sha]) -> list[str]:
    return [str(s) for s in shas]
