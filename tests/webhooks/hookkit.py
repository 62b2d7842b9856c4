"""Helpers of the webhook tests: a real HTTP receiver on loopback, and revisions published with
advisories into a real store (a plain module, imported by name)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tracker.advisories import service
from tracker.domain import Advisory, Artifact, Change, ChangeKind, Commit, RepoId, Sha
from tracker.store import Store
from tracker.store.advisories import AdvisoryStore

NOW = datetime(2026, 11, 30, 9, 30, 0, tzinfo=UTC)
REPO = RepoId("mistralai/Mixtral-8x7B-v0.1")
# Real commit ids of mistralai/Mixtral-8x7B-v0.1's config.json history
# (../shared/corpus/histories/mistralai__Mixtral-8x7B-v0.1/HISTORY.tsv).
SHAS = (
    Sha("5802963a855a4bbe1c7c0bad462759cc4c0cb1d5"),
    Sha("4dd4b0f2d577d7b74152732d5543a92201481fe2"),
    Sha("c56a162543a9560c9f352687e46c8416e6292da6"),
    Sha("2e54f233da37e9911a9b5a45f83df0b734337bb4"),
)


@dataclass(frozen=True)
class Received:
    """One request the receiver got: when (monotonic), its headers (lower-case) and body."""

    at: float
    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def id(self) -> str:
        return self.headers["webhook-id"]

    def json(self) -> Any:
        return json.loads(self.body)


Reply = tuple[int, dict[str, str]] | tuple[int, dict[str, str], float]


@dataclass
class Receiver:
    """A webhook receiver on 127.0.0.1: records every request, answers with `reply(n, request)`
    (n counts from 0) -- by default 204; a third item holds that answer back so many seconds."""

    reply: Callable[[int, Received], Reply] = lambda n, r: (204, {})
    received: list[Received] = field(default_factory=list)
    _server: ThreadingHTTPServer | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _cond: threading.Condition = field(default_factory=threading.Condition)

    @property
    def url(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/hook"

    def __enter__(self) -> Receiver:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                got = Received(
                    time.monotonic(),
                    self.path,
                    {k.lower(): v for k, v in self.headers.items()},
                    body,
                )
                with owner._cond:
                    n = len(owner.received)
                    owner.received.append(got)
                    owner._cond.notify_all()
                status, headers, *delay = owner.reply(n, got)
                if delay:
                    time.sleep(delay[0])
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.shutdown()
        self._server.server_close()

    def wait_for(self, n: int, timeout: float = 30.0) -> list[Received]:
        """The first `n` requests, waiting up to `timeout` seconds for them."""
        with self._cond:
            self._cond.wait_for(lambda: len(self.received) >= n, timeout=timeout)
            assert len(self.received) >= n, f"got {len(self.received)} of {n} requests"
            return list(self.received[:n])


def change(artifact: Artifact, key: str, before: object, after: object, file: str) -> Change:
    return Change(
        artifact, ChangeKind.CHANGED, file, key, before, after, f"{key}: {before!r} → {after!r}", ""
    )


def ingest(store: Store, sha: Sha, previous: Sha | None, repo: RepoId = REPO) -> Commit:
    """Store a revision (empty tree) as the snapshot stage would: advisories need one."""
    c = Commit(sha, (previous,) if previous else (), NOW, "Update", "Update", ("tester",))
    store.ensure_repo(repo, source_kind="hub", url=None, ref="main")
    store.store_revision(repo, c, [], {}, previous=previous)
    return c


def publish(
    store: Store,
    sha: Sha,
    previous: Sha | None,
    changes: list[Change],
    *,
    repo: RepoId = REPO,
    now: datetime = NOW,
) -> list[Advisory]:
    """Ingest `sha` and publish its advisories (the pipeline's publish, outbox included)."""
    c = ingest(store, sha, previous, repo)
    return service.publish(
        AdvisoryStore(store.engine),
        repo_id=repo,
        commit=c,
        previous=previous,
        changes=changes,
        estimate_before=None,
        estimate_after=None,
        repo_url=f"https://huggingface.co/{repo}",
        overrides=None,
        prefix="TRACKER",
        now=now,
    )
