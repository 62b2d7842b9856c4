"""The one error tree of tracker; every failure the project raises on purpose is a TrackerError.

    TrackerError
    ├── ConfigError                 settings or watchlist.yaml are invalid (all problems reported at once)
    │   └── WatchlistError
    ├── NotWatchedError             a repo the watchlist does not list (`watch remove`, `poll REPO`)
    ├── InvalidRepoIdError          a repo id that is not ORG/NAME (`..`, extra `/`, bad characters)
    ├── SourceError                 anything that went wrong talking to a repo source (Hub, git)
    │   ├── TransientSourceError    timeouts, connection errors, 408/429/5xx: retried at the edge
    │   │   ├── IntegrityError      fetched bytes differ from what the tree says (blob id, LFS oid,
    │   │   │                       size): retried, never stored, never analysed
    │   │   └── DeadlineError       a request or poll ran past its deadline (stall, long Retry-After)
    │   │       └── RateBudgetWait  the shared rate budget allows the next request too late
    │   ├── NotFoundError           the thing does not exist (typed by `what`)
    │   │   ├── RepoNotFoundError
    │   │   ├── RevisionNotFoundError
    │   │   └── EntryNotFoundError
    │   ├── AccessDeniedError       gated or private: a clear state, not a crash
    │   │   └── GatedRepoError
    │   ├── BadResponseError        the source answered, but not with what the protocol promises
    │   └── PackageIndexError       a wheel for a preflight symbol table could not be fetched or read
    ├── ArtifactError               a file we fetched cannot be read as what it claims to be
    │   ├── UnreadableArtifactError malformed JSON, wrong types, binary where text was expected
    │   ├── OversizedArtifactError  over a hard cap (e.g. a safetensors header declaring 10 GB)
    │   └── TemplateError           a chat template that does not parse, escapes or exceeds its bounds
    ├── EstimateError               a config the estimator cannot read at all
    ├── StoreError                  the database refused or is inconsistent
    │   └── StoreNotFoundError      a repo, revision or advisory the store does not hold (a store
    │       │                       miss: never a statement about the source)
    │       └── NoStoreError        a read-only command found no store (and created none)
    ├── RetryLaterError             work stopped for a reason outside its input (a render backstop):
    │                               the revision stays pending and is retried next cycle
    └── AdvisoryError               an advisory that is invalid (e.g. fails the OSV schema)

Third-party exceptions are translated into this tree in exactly one place per adapter
(`sources/hub.py`, `sources/git.py`, `store/`).
"""

from __future__ import annotations


class TrackerError(Exception):
    """Root of every error tracker raises on purpose."""


class ConfigError(TrackerError):
    """Settings or the watchlist are invalid; `problems` lists every one found."""

    def __init__(self, message: str, problems: tuple[str, ...] = ()) -> None:
        self.problems = problems
        if problems:
            message = message + "\n" + "\n".join(f"  - {p}" for p in problems)
        super().__init__(message)


class WatchlistError(ConfigError):
    """watchlist.yaml is invalid."""


class NotWatchedError(TrackerError):
    """A repo the watchlist does not list: not found (exit 3), not a bad watchlist."""


class InvalidRepoIdError(TrackerError):
    """A repo id that is not a safe ORG/NAME."""


class SourceError(TrackerError):
    """A repo source (Hub or git) failed."""


class TransientSourceError(SourceError):
    """A failure worth retrying: timeout, connection error, 408, 429, 5xx."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class IntegrityError(TransientSourceError):
    """Fetched bytes are not what the revision's tree says they are (git blob id, LFS sha256,
    pointer size): a broken transfer, proxy or server. Transient for that revision: retried, and
    the revision is never stored or analysed from those bytes."""


class DeadlineError(TransientSourceError):
    """A request or a poll ran past its deadline: a stalled or trickling body, the total time of a
    request, or a `Retry-After` longer than the cap (`retry_after` then says when to come back)."""


class FetchAbandonedError(DeadlineError):
    """The worker is stopping (SIGTERM): the Hub call under way was abandoned at its next request
    or body chunk. Not retried; the revision it was fetching stays pending (not stored, the repo
    due again), never "could not read"."""


class RateBudgetWait(DeadlineError):
    """The shared rate budget allows the next request only after `retry_after` seconds, longer
    than the cap on waits: not a failure of the repo. The daemon keeps the repo's place in the
    queue (its due time unchanged) and claims nothing until the budget allows."""


class NotFoundError(SourceError):
    """Something asked for does not exist at the source."""


class RepoNotFoundError(NotFoundError):
    """The repo does not exist (or is hidden from us)."""


class RevisionNotFoundError(NotFoundError):
    """The ref or commit does not exist in the repo."""


class EntryNotFoundError(NotFoundError):
    """The file does not exist at that revision."""


class AccessDeniedError(SourceError):
    """The repo is private or we lack the rights."""


class GatedRepoError(AccessDeniedError):
    """The repo is gated and our token has not been granted access."""


class BadResponseError(SourceError):
    """The source answered with something the protocol does not allow (HTML for JSON, truncation)."""


class PackageIndexError(SourceError):
    """A package version's wheel (preflight symbol tables) could not be fetched or read."""


class ArtifactError(TrackerError):
    """A fetched file cannot be read as what it claims to be."""


class UnreadableArtifactError(ArtifactError):
    """Malformed or mistyped content; recorded as a 'could not read' state."""


class OversizedArtifactError(ArtifactError):
    """Content over a hard cap."""


class TemplateError(ArtifactError):
    """A chat template that cannot be parsed or rendered within bounds."""


class EstimateError(TrackerError):
    """A config the estimator cannot read at all."""


class StoreError(TrackerError):
    """The store refused an operation or found itself inconsistent."""


class WorkerConflictError(StoreError):
    """Another `tracker poll` daemon already works on this SQLite store (SQLite takes one worker;
    several workers share a PostgreSQL database)."""


class StoreNotFoundError(StoreError):
    """The store holds no such repo, revision or advisory.

    Distinct from the sources' NotFoundError on purpose: a store miss says nothing about the
    upstream repo (it must never be recorded as "the repo is gone upstream").
    """


class InvalidRevisionError(StoreNotFoundError):
    """A revision name no revision can have: not a sha, a ref name or `HEAD`, each with an
    optional `~n` (`tracker.store.store.REVISION_PATTERN`). A StoreNotFoundError too (nothing matches it), so the
    CLI answers it as before; the HTTP API answers it as a bad request (400)."""


class NoStoreError(StoreNotFoundError):
    """The store a read-only command was asked to read does not exist yet (nothing was created)."""


class RetryLaterError(TrackerError):
    """Analysis stopped for a reason that is not a property of the revision (a chat-template render
    hit its CPU, memory or wall-clock backstop): nothing about it is recorded as a change; the
    revision stays pending and the next cycle retries it."""


class AdvisoryError(TrackerError):
    """An advisory record is invalid."""
