"""Response models of the `/v1` read API: they make the OpenAPI schema exact (the routes serve
bytes through `tracker.api.caching`, so these document and the schemathesis run checks them)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from tracker.shared.domain import AdvisoryState, Artifact, Severity

Order = Literal["oldest", "newest"]


class AdvisoryCounts(BaseModel):
    open: int
    fixed: int
    withdrawn: int


class RepoLinks(BaseModel):
    self: str
    revisions: str
    history: str
    estimates: str
    advisories: str


class AnalysisLimitsOut(BaseModel):
    timeout_s: float = Field(description="TRACKER_ANALYSIS_TIMEOUT_S when it was recorded.")
    memory_mib: int = Field(description="TRACKER_ANALYSIS_MEMORY_MIB when it was recorded.")


class CouldNotAnalyse(BaseModel):
    """A revision whose analysis overran its budget: nothing was published for it; it is tried
    again only once a limit is raised over the ones it ran under."""

    kind: Literal["time", "memory", "died"] = Field(
        description="time: over the wall-clock budget; memory: over the memory budget; died: "
        "the analysis worker died otherwise."
    )
    reason: str
    limits: AnalysisLimitsOut
    at: str = Field(description="When it was recorded (RFC 3339).")


class CouldNotAnalyseItem(CouldNotAnalyse):
    sha: str


class RepoOut(BaseModel):
    """A repo: on the watchlist and/or in the store, with its ingestion state."""

    repo: str = Field(description="ORG/NAME.")
    watched: bool = Field(description="Whether the watchlist lists it now.")
    state: Literal["new", "ok", "failing", "gone", "gated"] = Field(
        description="new: never polled; ok: last poll succeeded; failing: it failed (see "
        "last_error); gone: the repo or its ref no longer exists; gated: no access."
    )
    source_kind: str | None
    url: str | None
    ref: str | None
    head: str | None = Field(description="The last ingested revision of the ref (full sha).")
    last_poll_at: str | None
    last_success_at: str | None
    consecutive_failures: int
    last_error: str | None
    revisions: int = Field(description="Ingested revisions (rewritten-away ones included).")
    could_not_analyse: list[CouldNotAnalyseItem] = Field(
        description="Live revisions whose analysis overran its budget, oldest first."
    )
    advisories: AdvisoryCounts
    links: RepoLinks


class ReposOut(BaseModel):
    repos: list[RepoOut]


class RevisionOut(BaseModel):
    """One ingested revision (the rows of `tracker history --json`)."""

    seq: int
    sha: str
    date: str
    title: str
    authors: list[str]
    previous: str | None
    analysed: bool
    rewritten_away: bool
    could_not_analyse: CouldNotAnalyse | None = Field(
        description="Set when its analysis overran the budget (it is then not analysed)."
    )


class RevisionPage(BaseModel):
    repo: str
    order: Order
    items: list[RevisionOut]
    next: str | None = Field(description="The cursor of the next page (null: last page).")


class EventOut(BaseModel):
    at: str
    kind: str
    details: dict[str, Any]


class HistoryOut(BaseModel):
    """`tracker history --json`."""

    repo: str
    revisions: list[RevisionOut]
    events: list[EventOut]


class ChangeOut(BaseModel):
    artifact: str
    kind: str
    file: str
    key: str
    before: Any
    after: Any
    summary: str
    detail: str
    facts: dict[str, Any] | None = None


class DiffOut(BaseModel):
    """`tracker diff REPO A B --json`."""

    repo_id: str
    before: str | None
    after: str
    count: int
    changes: list[ChangeOut]


class EstimateSource(BaseModel):
    target: str
    settings_from: str


class EstimateReport(BaseModel):
    """`tracker estimate ORG/NAME@REV --json`: the ESTIMATES.md §5 report and its source."""

    model_config = ConfigDict(extra="allow")

    architecture: str
    model_type: str
    family: str
    params: dict[str, Any]
    memory_gb: dict[str, Any]
    cards: list[dict[str, Any]]
    verification: dict[str, Any]
    settings: dict[str, Any]
    source: EstimateSource


class EstimatePoint(BaseModel):
    """The stored estimate of one revision and what moved since the previous one that had one."""

    seq: int
    sha: str
    estimate: dict[str, Any] | None = Field(description="The §5 report (null: none, see error).")
    error: str | None = Field(description="Why there is no estimate (null when there is one).")
    analysed: bool = Field(description="False: not analysed yet, so no estimate yet.")
    compared_to: str | None = Field(description="The revision the delta is taken against.")
    delta: list[ChangeOut] = Field(description="Estimate changes against compared_to.")


class EstimatesOut(BaseModel):
    repo: str
    items: list[EstimatePoint]


class AdvisoryItem(BaseModel):
    """One advisory in a list; the full OSV record is at `link`."""

    id: str
    repo: str
    introduced: str
    kind: Artifact = Field(description="The change kind (the advisory's group).")
    severity: Severity
    state: AdvisoryState
    published: str
    modified: str
    summary: str
    link: str


class AdvisoryPage(BaseModel):
    items: list[AdvisoryItem]
    next: str | None = Field(description="The cursor of the next page (null: last page).")
