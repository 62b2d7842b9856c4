"""The Hub adapter: RepoSource on the real `huggingface_hub.HfApi` client (the only module importing it).

Requests per call: `resolve_ref` 1 (`list_repo_refs`; a full sha: 1 `paths-info` check),
`list_commits` 1 per page, `list_tree` 1 per page (+1 `paths-info` with expand when pickle files need
their security status), `read_file` 1 GET on the resolve URL (streamed into memory under a cap;
nothing is written to the HF cache), `read_safetensors_header` 2 Range GETs (`bytes=0-7`, then
the header). Every huggingface_hub/httpx2 exception becomes a tracker.shared.errors type in `_translate`;
transient ones are retried by `retry.call_with_retry`. Every API answer (and every error answer)
is read by the response hook within `tracker.shared.bounded.HUB_ANSWER` (size, values, depth 64) before
huggingface_hub parses it (`_read_bounded`).

Parents: the Hub's commit listing carries no parents (HUB-PROTOCOL.md §5), so each commit's parent is
taken to be the next-older commit in the listing (first-parent semantics, which is how the Hub
lists a branch's history); the oldest has none.
"""

from __future__ import annotations

import json
import math
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any, Protocol, TypeVar

import httpx2
from huggingface_hub import HfApi, get_session, hf_hub_url, set_client_factory
from huggingface_hub import constants as hf_constants
from huggingface_hub import errors as hf_errors
from huggingface_hub.utils._headers import build_hf_headers
from huggingface_hub.utils._http import hf_raise_for_status, hf_request_event_hook

from tracker.ingest.integrity import check_object
from tracker.shared.artifacts import is_pickle
from tracker.shared.bounded import HUB_ANSWER, BoundsError, check_json
from tracker.shared.domain import (
    Commit,
    GGUFHeader,
    RepoId,
    SafetensorsHeader,
    Sha,
    TreeEntry,
    is_full_sha,
)
from tracker.shared.errors import (
    AccessDeniedError,
    ArtifactError,
    BadResponseError,
    DeadlineError,
    EntryNotFoundError,
    FetchAbandonedError,
    GatedRepoError,
    IntegrityError,
    NotFoundError,
    OversizedArtifactError,
    RepoNotFoundError,
    RevisionNotFoundError,
    SourceError,
    TrackerError,
    TransientSourceError,
    UnreadableArtifactError,
)
from tracker.sources.gguf import parse_gguf
from tracker.sources.names import escape_text_name
from tracker.sources.retry import call_with_retry
from tracker.sources.safetensors import header_length, parse_header

T = TypeVar("T")
TRANSIENT_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
_RATELIMIT_T = re.compile(r";\s*t=(\d+)")

_install_lock = threading.Lock()
_installed_timeout: float | None = None
_active: ContextVar[HubSource | None] = ContextVar("tracker_hub_source", default=None)
"""The HubSource whose call is running in this thread: the request hook counts for it."""
_deadline: ContextVar[_Deadline | None] = ContextVar("tracker_hub_deadline", default=None)
"""The deadline of the HubSource call running in this thread (None: outside a call)."""
_budget: ContextVar[RequestBudget | None] = ContextVar("tracker_hub_budget", default=None)
"""The rate budget of the HubSource call running in this thread (None: none)."""
_file_read: ContextVar[bool] = ContextVar("tracker_hub_file_read", default=False)
"""True while `HubSource._get` reads a file (its body is capped there, and is not JSON); every
other answer of a call is an API answer, read within `HUB_ANSWER` by the response hook."""


class RequestBudget(Protocol):
    """A request budget (`tracker.daemon.ratebudget.RateBudget`): taken before every request, told
    every answer."""

    def acquire(self, path: str, cap_s: float) -> None: ...

    def observe(self, path: str, status: int, headers: Mapping[str, str]) -> None: ...


STALL_MIN_BYTES = 16 * 1024
"""A body must bring at least this many bytes (or its end) in every `timeout_s` window, or it is
stalled: a server trickling one byte every 0.3 s never trips a per-read timeout, this does. A
stall is retried like a timeout; running past the call's total deadline is not."""


@dataclass(frozen=True)
class _Deadline:
    """When the current call must be over (monotonic seconds), and the stall window."""

    until: float
    total_s: float
    stall_s: float
    retry_after_cap_s: float = 60.0

    def check(self, what: str) -> None:
        if time.monotonic() > self.until:
            raise DeadlineError(f"{what}: over the deadline of {self.total_s:g} s for one call")


def _count_request(request: httpx2.Request) -> None:
    source = _active.get()
    if source is not None:
        source._count_request()
        source.check_stopping(f"{request.method} {request.url.path}")
    deadline = _deadline.get()
    if deadline is not None:
        deadline.check(f"{request.method} {request.url.path}")
    budget = _budget.get()
    if budget is not None:
        cap = deadline.retry_after_cap_s if deadline is not None else 60.0
        budget.acquire(request.url.path, cap)


class _GuardedStream(httpx2.SyncByteStream):
    """A response body read under the call's deadline and the stall detector."""

    def __init__(
        self,
        inner: Any,
        deadline: _Deadline,
        what: str,
        length: int | None,
        source: HubSource | None = None,
    ) -> None:
        self._inner = inner
        self._source = source
        self._deadline = deadline
        self._what = what
        self._left = length

    def __iter__(self) -> Iterator[bytes]:
        window_start = time.monotonic()
        window_bytes = 0
        for chunk in self._inner:
            yield chunk
            now = time.monotonic()
            window_bytes += len(chunk)
            if self._left is not None:
                self._left -= len(chunk)
            self._deadline.check(self._what)
            if self._source is not None:
                self._source.check_stopping(self._what)
            if now - window_start >= self._deadline.stall_s:
                wanted = STALL_MIN_BYTES if self._left is None else min(STALL_MIN_BYTES, self._left)
                if window_bytes < wanted:  # retried like a timeout (a new connection may do)
                    raise TransientSourceError(
                        f"{self._what}: body stalled ({window_bytes} bytes in "
                        f"{now - window_start:.1f} s)"
                    )
                window_start, window_bytes = now, 0

    def close(self) -> None:
        close = getattr(self._inner, "close", None)
        if close is not None:
            close()


def _guard_response(response: httpx2.Response) -> None:
    """Response hook: the body is read under the running call's deadline and stall detector;
    an answer asking for a wait longer than the cap ends the call at once (huggingface_hub's own
    backoff, used by its paginated listings, would otherwise sleep through any `Retry-After`)."""
    budget = _budget.get()
    if budget is not None:
        budget.observe(response.request.url.path, response.status_code, response.headers)
    deadline = _deadline.get()
    if deadline is None:
        return
    wait = _retry_after(response) if response.status_code in TRANSIENT_STATUSES else None
    if wait is not None and wait > deadline.retry_after_cap_s:
        response.close()
        raise DeadlineError(
            f"{response.request.method} {response.request.url.path}: HTTP "
            f"{response.status_code} asks to retry after {wait:g} s, over the cap of "
            f"{deadline.retry_after_cap_s:g} s: not waited for, the repo is rescheduled",
            retry_after=wait,
        )
    declared = response.headers.get("Content-Length", "")
    length = int(declared) if declared.isdigit() else None
    what = f"{response.request.method} {response.request.url.path}"
    response.stream = _GuardedStream(response.stream, deadline, what, length, _active.get())
    if response.status_code >= 400 or not _file_read.get():
        _read_bounded(response, what)


def _read_bounded(response: httpx2.Response, what: str) -> None:
    """Read an API answer (or any error answer) now, within `HUB_ANSWER`: huggingface_hub parses
    it with `json.loads` after the hook, so this is the one place its size and nesting can be
    checked before anything is built. The decoded body is counted (a gzip bomb stops at the cap).

    A success answer over a bound is a BadResponseError "could not read the answer to GET
    /api/...: JSON nested deeper than 64 levels" (the poll records the repo failing with that
    line); an error answer keeps its status and loses its body (its message is not worth
    more than the status)."""
    error = response.status_code >= 400
    chunks: list[bytes] = []
    got = 0
    body: bytes | None = None
    for chunk in response.iter_bytes():
        got += len(chunk)
        if got > HUB_ANSWER.max_bytes:
            response.close()
            if not error:
                raise BadResponseError(
                    f"could not read the answer to {what}: over {HUB_ANSWER.max_bytes:,} bytes"
                )
            body = b""
            break
        chunks.append(chunk)
    if body is None:
        body = b"".join(chunks)
        del chunks
        try:
            check_json(body, f"the answer to {what}", HUB_ANSWER)
        except BoundsError as exc:
            if not error:
                raise BadResponseError(str(exc)) from None
            body = b""
    # What `Response.read()` does with the whole body (httpx2 keeps it in `_content`; `read()`,
    # `.content` and `.json()` then use it): the stream is consumed, so this is how the bounded
    # copy is handed on.
    response._content = body


def install_client(timeout_s: float) -> None:
    """Give huggingface_hub's shared client a timeout and the request-counting hook.

    The client has one process-wide HTTP session by design (public `set_client_factory`), and no
    timeout on most JSON calls (HUB-PROTOCOL.md §14.10), so this is installed once per process
    (again only if the timeout changes). The hook attributes each request to the HubSource whose
    call is running (`_active`), so counts are per source instance.
    """
    global _installed_timeout
    # No telemetry: with it on, the client's first request of the day is a GET of
    # `<public Hub>/api/agent-harnesses` (HUB-PROTOCOL.md §1, §14.12), which would leave the
    # mirror or replica the daemon was pointed at. The client offers no per-call or per-instance
    # switch for it (it reads this constant per request), so this is the one library constant
    # tracker sets; the endpoint and token are passed explicitly on every call instead.
    hf_constants.HF_HUB_DISABLE_TELEMETRY = True
    with _install_lock:
        if _installed_timeout == timeout_s:
            return
        _installed_timeout = timeout_s

        def factory() -> httpx2.Client:
            return httpx2.Client(
                event_hooks={
                    "request": [hf_request_event_hook, _count_request],
                    "response": [_guard_response],
                },
                follow_redirects=True,
                timeout=httpx2.Timeout(timeout_s),
            )

        set_client_factory(factory)


def _retry_after(response: Any, now: Callable[[], datetime] | None = None) -> float | None:
    """The wait an answer asks for, in seconds: `Retry-After` as delay-seconds or as an HTTP-date
    (seconds from now, rounded up; a date past asks for nothing: the client's own backoff
    applies), else the `RateLimit` header's `t`."""
    if response is None:
        return None
    headers = response.headers
    value = headers.get("Retry-After")
    if value is not None and value.strip().isdigit():
        return float(value.strip())
    if value is not None:
        try:
            when = parsedate_to_datetime(value.strip())
        except (TypeError, ValueError, IndexError, OverflowError):
            when = None
        if when is not None:
            if when.tzinfo is None:  # "-0000": UTC, with nothing said about the zone
                when = when.replace(tzinfo=UTC)
            seconds = math.ceil((when - (now or _utcnow)()).total_seconds())
            return float(seconds) if seconds > 0 else None
    m = _RATELIMIT_T.search(headers.get("RateLimit", ""))
    return float(m.group(1)) + 1 if m else None


def _utcnow() -> datetime:
    return datetime.now(UTC)


def _translate(exc: BaseException, what: str) -> TrackerError:
    """The one mapping from huggingface_hub / httpx2 / payload exceptions to tracker.shared.errors."""
    if isinstance(exc, TrackerError):
        return exc
    detail = str(exc).strip().splitlines()[0] if str(exc).strip() else exc.__class__.__name__
    if isinstance(exc, hf_errors.RevisionNotFoundError):
        return RevisionNotFoundError(f"{what}: revision not found ({detail})")
    if isinstance(exc, hf_errors.RemoteEntryNotFoundError | hf_errors.EntryNotFoundError):
        return EntryNotFoundError(f"{what}: file not found ({detail})")
    if isinstance(exc, hf_errors.GatedRepoError):
        return GatedRepoError(f"{what}: gated repo, access not granted ({detail})")
    if isinstance(exc, hf_errors.DisabledRepoError):
        return AccessDeniedError(f"{what}: repo disabled ({detail})")
    if isinstance(exc, hf_errors.RepositoryNotFoundError):
        return RepoNotFoundError(f"{what}: repo not found or private ({detail})")
    if isinstance(exc, hf_errors.HfHubHTTPError):
        response = exc.response
        status = response.status_code if response is not None else None
        if status in (401, 403):
            return AccessDeniedError(f"{what}: HTTP {status} ({detail})")
        if status == 404:
            return NotFoundError(f"{what}: HTTP 404 ({detail})")
        if status in TRANSIENT_STATUSES:
            return TransientSourceError(
                f"{what}: HTTP {status} ({detail})", retry_after=_retry_after(response)
            )
        return BadResponseError(f"{what}: HTTP {status} ({detail})")
    if isinstance(exc, httpx2.TimeoutException):
        return TransientSourceError(f"{what}: timed out ({exc.__class__.__name__})")
    if isinstance(exc, httpx2.TransportError):
        return TransientSourceError(
            f"{what}: connection failed ({exc.__class__.__name__}: {detail})"
        )
    if isinstance(exc, json.JSONDecodeError):
        return BadResponseError(f"{what}: response is not valid JSON ({detail})")
    if isinstance(exc, RecursionError):
        return BadResponseError(f"{what}: response is JSON nested too deeply to read")
    if isinstance(exc, httpx2.HTTPError | KeyError | TypeError | ValueError | AttributeError):
        return BadResponseError(f"{what}: malformed response ({exc.__class__.__name__}: {detail})")
    if isinstance(exc, OSError):
        return BadResponseError(f"{what}: {exc.__class__.__name__}: {detail}")
    return BadResponseError(f"{what}: unexpected {exc.__class__.__name__}: {detail}")


class HubSource:
    """RepoSource on the Hub (or anything speaking its protocol, e.g. the replica)."""

    def __init__(
        self,
        endpoint: str,
        token: str | None = None,
        *,
        timeout_s: float = 20.0,
        retry_attempts: int = 4,
        retry_base_s: float = 0.5,
        request_deadline_s: float = 120.0,
        retry_after_cap_s: float = 60.0,
        sleep: Callable[[float], None] | None = None,
        budget: RequestBudget | None = None,
        stopping: threading.Event | None = None,
    ) -> None:
        install_client(timeout_s)
        self.budget = budget
        self.stopping = stopping
        self.endpoint = endpoint.rstrip("/")
        self.token = token
        self.timeout_s = timeout_s
        self.request_deadline_s = request_deadline_s
        self.retry_after_cap_s = retry_after_cap_s
        self.api = HfApi(endpoint=self.endpoint, token=token, library_name="tracker")
        self._attempts = retry_attempts
        self._base = retry_base_s
        self._sleep = sleep
        self._lock = threading.Lock()
        self._requests = 0
        self.bytes_received = 0

    @property
    def request_count(self) -> int:
        """HTTP requests this source has sent (redirects and retries included)."""
        return self._requests

    def _count_request(self) -> None:
        with self._lock:
            self._requests += 1

    def check_stopping(self, what: str) -> None:
        """FetchAbandonedError once the worker is stopping (`Sources.stop`): checked before every
        request and after every body chunk, so a SIGTERM ends a call under way at once, or
        within one read timeout (`timeout_s`) of a body that sends nothing."""
        if self.stopping is not None and self.stopping.is_set():
            raise FetchAbandonedError(f"{what}: abandoned, the worker is stopping")

    def _call(self, what: str, fn: Callable[[], T]) -> T:
        """`fn` with its requests counted, under a deadline per attempt (`request_deadline_s`
        in total, and the stall detector on every body), errors translated, transient ones
        retried. A `Retry-After` longer than `retry_after_cap_s` is not slept through: it
        becomes a DeadlineError carrying `retry_after` (the repo is rescheduled)."""

        def once() -> T:
            token = _active.set(self)
            budget = _budget.set(self.budget)
            deadline = _deadline.set(
                _Deadline(
                    time.monotonic() + self.request_deadline_s,
                    self.request_deadline_s,
                    self.timeout_s,
                    self.retry_after_cap_s,
                )
            )
            try:
                return fn()
            except Exception as exc:
                error = _translate(exc, what)
                wait = getattr(error, "retry_after", None)
                if (
                    isinstance(error, TransientSourceError)
                    and not isinstance(error, DeadlineError)
                    and wait is not None
                    and wait > self.retry_after_cap_s
                ):
                    error = DeadlineError(
                        f"{error} asks to retry after {wait:g} s, over the cap of "
                        f"{self.retry_after_cap_s:g} s: not waited for, the repo is rescheduled",
                        retry_after=wait,
                    )
                raise error from exc
            finally:
                _deadline.reset(deadline)
                _budget.reset(budget)
                _active.reset(token)

        kwargs: dict[str, Any] = {"attempts": self._attempts, "base_s": self._base}
        if self._sleep is not None:
            kwargs["sleep"] = self._sleep
        return call_with_retry(once, **kwargs)

    # -- RepoSource --------------------------------------------------------------------------

    def resolve_ref(self, repo_id: RepoId, ref: str) -> Sha:
        if is_full_sha(ref):
            self._call(
                f"{repo_id}@{ref}",
                lambda: self.api.get_paths_info(repo_id, ["config.json"], revision=ref),
            )
            return Sha(ref)

        def find() -> Sha:
            refs = self.api.list_repo_refs(repo_id)
            for item in [*refs.branches, *refs.tags]:
                if ref in (item.name, item.ref):
                    if not is_full_sha(str(item.target_commit)):
                        raise BadResponseError(f"ref {ref} points at {item.target_commit!r}")
                    return Sha(item.target_commit)
            raise RevisionNotFoundError(f"{repo_id}: no branch or tag named {ref!r}")

        return self._call(f"{repo_id} refs", find)

    def list_commits(self, repo_id: RepoId, ref: str) -> list[Commit]:
        infos = self._call(
            f"{repo_id} commits@{ref}",
            lambda: list(self.api.list_repo_commits(repo_id, revision=ref)),
        )
        commits: list[Commit] = []
        for i, info in enumerate(infos):
            sha = str(info.commit_id)
            if not is_full_sha(sha):
                raise BadResponseError(f"{repo_id}: commit listing has a bad id {sha!r}")
            parent = str(infos[i + 1].commit_id) if i + 1 < len(infos) else None
            commits.append(
                Commit(
                    sha=Sha(sha),
                    parents=(Sha(parent),) if parent else (),
                    date=info.created_at,
                    title=info.title or "",
                    message=info.message or "",
                    authors=tuple(str(a) for a in info.authors),
                )
            )
        return commits

    def list_tree(self, repo_id: RepoId, sha: Sha) -> list[TreeEntry]:
        what = f"{repo_id} tree@{sha}"
        items = self._call(
            what,
            lambda: list(
                self.api.list_repo_tree(repo_id, recursive=True, expand=False, revision=sha)
            ),
        )
        files = [f for f in items if hasattr(f, "blob_id") and hasattr(f, "size")]
        security: dict[str, dict[str, Any]] = {}
        pickles = [f.path for f in files if is_pickle(f.path)]
        if pickles:
            infos = self._call(
                f"{repo_id} paths-info@{sha}",
                lambda: self.api.get_paths_info(repo_id, pickles, expand=True, revision=sha),
            )
            for info in infos:
                sec = getattr(info, "security", None)
                if sec is not None:
                    security[info.path] = {
                        "status": sec.status,
                        "avScan": sec.av_scan,
                        "pickleImportScan": sec.pickle_import_scan,
                    }
        out = []
        for f in files:
            lfs = getattr(f, "lfs", None)
            out.append(
                TreeEntry(
                    path=escape_text_name(str(f.path)),
                    blob_id=str(f.blob_id),
                    size=int(f.size),
                    lfs_sha256=str(lfs.sha256) if lfs is not None else None,
                    security=security.get(f.path),
                )
            )
        return sorted(out, key=lambda e: e.path)

    def _get(
        self, repo_id: RepoId, sha: Sha, path: str, limit: int, range_: str | None
    ) -> tuple[bytes, int | None, str | None]:
        """GET the resolve URL (optionally a byte range); read at most `limit` bytes.

        Returns (bytes, the object's total size, the object's oid) as the server declares them
        (`Content-Range` / `X-Linked-Size` / `Content-Length`; `X-Linked-Etag`, or the `ETag` of
        an answer that was not redirected), None where not declared.
        OversizedArtifactError when a whole-file GET is longer than `limit`; for a range GET the
        stream is simply cut at `limit` (a server ignoring Range never makes us read more).
        A body shorter than its `Content-Length` is a truncation, and a 206 answer whose decoded
        body is longer than its `Content-Range` says (a gzip body: the bytes are not the file's)
        is not the range asked for: IntegrityError (transient) for both.
        """
        url = hf_hub_url(repo_id, path, revision=sha, endpoint=self.endpoint)
        headers = build_hf_headers(token=self.token, library_name="tracker")
        if range_ is not None:
            headers["Range"] = range_
        reading = _file_read.set(True)
        try:
            return self._stream_file(repo_id, sha, path, limit, url, headers, range_)
        finally:
            _file_read.reset(reading)

    def _stream_file(
        self,
        repo_id: RepoId,
        sha: Sha,
        path: str,
        limit: int,
        url: str,
        headers: dict[str, str],
        range_: str | None,
    ) -> tuple[bytes, int | None, str | None]:
        with get_session().stream("GET", url, headers=headers, timeout=self.timeout_s) as resp:
            if resp.status_code >= 400:
                resp.read()
                hf_raise_for_status(resp)
            declared = resp.headers.get("Content-Length")
            if range_ is not None and resp.status_code == 200 and not range_.startswith("bytes=0-"):
                raise IntegrityError(  # the whole file from byte 0: not the bytes asked for
                    f"{repo_id}@{sha}: {path}: the server answered {range_} with the whole file"
                )
            if (
                range_ is None
                and declared is not None
                and declared.isdigit()
                and int(declared) > limit
            ):
                raise OversizedArtifactError(
                    f"{repo_id}@{sha}: {path} is {declared} bytes, over the cap of {limit} bytes"
                )
            chunks: list[bytes] = []
            got = 0
            for chunk in resp.iter_bytes():
                chunks.append(chunk)
                got += len(chunk)
                if got > limit:
                    if range_ is None:
                        raise OversizedArtifactError(
                            f"{repo_id}@{sha}: {path} is over the cap of {limit} bytes"
                        )
                    break
            data = b"".join(chunks)[:limit]
            span = _range_span(resp) if range_ is not None and resp.status_code == 206 else None
            if span is not None and got > span:  # e.g. a gzip body: the range is of other bytes
                raise IntegrityError(
                    f"{repo_id}@{sha}: {path}: the answer to {range_} holds more than the "
                    f"{span:,} bytes its Content-Range says"
                )
            if (
                declared is not None
                and declared.isdigit()
                and got < int(declared)
                and len(data) < limit
            ):
                raise IntegrityError(
                    f"{repo_id}@{sha}: {path}: got {len(data)} of {declared} bytes (truncated)"
                )
            total, oid = _object_of(resp, range_ is not None)
        self.bytes_received += len(data)
        return data, total, oid

    def read_file(self, repo_id: RepoId, sha: Sha, path: str, max_bytes: int) -> bytes:
        return self._call(
            f"{repo_id}@{sha}:{path}", lambda: self._get(repo_id, sha, path, max_bytes, None)[0]
        )

    def read_safetensors_header(
        self,
        repo_id: RepoId,
        sha: Sha,
        path: str,
        max_header_bytes: int,
        *,
        expect: TreeEntry | None = None,
    ) -> SafetensorsHeader:
        """Two Range reads (the length prefix, then the header). With `expect` (the tree entry),
        the object the server read from must be the one the tree names (total size, and the
        whole-object oid where the server declares it), the header must fit in a file of the
        tree's size, and a short read is a transient truncation, not a broken file."""
        what = f"{repo_id}@{sha}:{path}"

        def ranged(n: int, range_: str) -> bytes:
            data, total, oid = self._get(repo_id, sha, path, n, range_)
            if expect is not None:
                check_object(expect, what, total_size=total, oid=oid)
            return data

        prefix = self._call(what, lambda: ranged(8, "bytes=0-7"))
        n = header_length(prefix, max_header_bytes)
        if expect is not None and 8 + n > expect.size:
            raise UnreadableArtifactError(
                f"{path}: header declares {n} bytes, more than the {expect.size}-byte file holds"
            )

        def header() -> bytes:
            raw = ranged(n, f"bytes=8-{n + 7}")
            if len(raw) < n and expect is not None:
                raise IntegrityError(f"{what}: got {len(raw)} of the header's {n} bytes")
            return raw

        raw = self._call(what, header)
        if len(raw) < n:
            raise UnreadableArtifactError(
                f"{path}: header declares {n} bytes but only {len(raw)} could be read (truncated)"
            )
        try:
            return parse_header(raw, file_size=expect.size if expect is not None else None)
        except UnreadableArtifactError as exc:
            raise UnreadableArtifactError(f"{path}: {exc}") from exc

    def read_gguf_header(
        self,
        repo_id: RepoId,
        sha: Sha,
        path: str,
        max_header_bytes: int,
        *,
        expect: TreeEntry | None = None,
    ) -> GGUFHeader:
        """Range reads as the parser needs bytes (`tracker.sources.gguf`: 1 MiB first, then
        growing). With `expect`, each answer's object must be the one the tree names, and an
        answer shorter than asked is a transient truncation (the parser never asks past the
        tree's size), not a broken file."""
        what = f"{repo_id}@{sha}:{path}"

        def read(offset: int, n: int) -> bytes:
            def ranged() -> bytes:
                data, total, oid = self._get(
                    repo_id, sha, path, n, f"bytes={offset}-{offset + n - 1}"
                )
                if expect is not None:
                    check_object(expect, what, total_size=total, oid=oid)
                    if len(data) < n:
                        raise IntegrityError(
                            f"{what}: got {len(data):,} of the {n:,} bytes at offset {offset:,}"
                        )
                return data

            return self._call(what, ranged)

        try:
            return parse_gguf(
                read, max_bytes=max_header_bytes, file_size=expect.size if expect else None
            )
        except ArtifactError as exc:
            raise type(exc)(f"{path}: {exc}") from exc


_CONTENT_RANGE = re.compile(r"^bytes\s+(?:\d+-\d+|\*)/(\d+)$")
_RANGE_SPAN = re.compile(r"^bytes\s+(\d+)-(\d+)/(?:\d+|\*)$")


def _range_span(resp: Any) -> int | None:
    """How many bytes a 206 answer says it holds (`Content-Range: bytes a-b/T`), or None."""
    m = _RANGE_SPAN.match(resp.headers.get("Content-Range", "").strip())
    return int(m.group(2)) - int(m.group(1)) + 1 if m else None


def _object_of(resp: Any, ranged: bool) -> tuple[int | None, str | None]:
    """(total size, oid) of the object a resolve answer (after its redirects) was read from."""
    chain = [*getattr(resp, "history", []), resp]
    total: int | None = None
    m = _CONTENT_RANGE.match(resp.headers.get("Content-Range", "").strip())
    if m:
        total = int(m.group(1))
    oid: str | None = None
    for r in chain:
        linked = r.headers.get("X-Linked-Etag")
        if linked:
            oid = linked.strip().removeprefix("W/").strip('"')
        size = r.headers.get("X-Linked-Size", "")
        if total is None and size.isdigit():
            total = int(size)
    if oid is None and len(chain) == 1:  # answered by the resolve URL itself: its ETag is the id
        etag = resp.headers.get("ETag")
        if etag:
            oid = etag.strip().removeprefix("W/").strip('"')
    if total is None and not ranged and resp.status_code == 200:
        length = resp.headers.get("Content-Length", "")
        total = int(length) if length.isdigit() else None
    return total, oid


__all__ = ["HubSource", "SourceError", "install_client"]
