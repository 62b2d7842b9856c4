"""Repo sources: where revisions and file bytes come from (the Hub, a git URL or path, a fake).

Every source implements `RepoSource`; only `sources/hub.py` imports huggingface_hub. Sources raise
only tracker.shared.errors types (SourceError subtree); transient failures are retried at this edge.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Protocol

from tracker.shared.domain import Commit, GGUFHeader, RepoId, SafetensorsHeader, Sha, TreeEntry


class RepoSource(Protocol):
    """Read-only access to one kind of repo host.

    Invariants: `list_commits` returns every commit reachable from `ref` (all pages), newest
    first, as the Hub lists them; `list_tree` is the full recursive file listing at a commit;
    `read_file` never returns more than `max_bytes` (it raises OversizedArtifactError instead);
    `read_safetensors_header` reads only the header (HTTP Range / partial read), never the weights.
    Sources do not check whole-file bytes against the tree: `tracker.ingest.snapshots` does, for every
    source (`tracker.ingest.integrity`).
    """

    def resolve_ref(self, repo_id: RepoId, ref: str) -> Sha:
        """The commit `ref` (branch, tag or sha) points at now. One request on the Hub."""
        ...

    def list_commits(self, repo_id: RepoId, ref: str) -> list[Commit]:
        """Every commit reachable from `ref`, newest first."""
        ...

    def list_tree(self, repo_id: RepoId, sha: Sha) -> list[TreeEntry]:
        """Every file at commit `sha` (recursive), with blob ids and LFS oids."""
        ...

    def read_file(self, repo_id: RepoId, sha: Sha, path: str, max_bytes: int) -> bytes:
        """The bytes of `path` at `sha`."""
        ...

    def read_safetensors_header(
        self,
        repo_id: RepoId,
        sha: Sha,
        path: str,
        max_header_bytes: int,
        *,
        expect: TreeEntry | None = None,
    ) -> SafetensorsHeader:
        """The parsed header of the .safetensors file `path` at `sha`; with `expect` (its tree
        entry), checked against the object the tree names (size, whole-object oid where known)."""
        ...

    def read_gguf_header(
        self,
        repo_id: RepoId,
        sha: Sha,
        path: str,
        max_header_bytes: int,
        *,
        expect: TreeEntry | None = None,
    ) -> GGUFHeader:
        """The parsed header of the .gguf file `path` at `sha`, read as it is parsed (HTTP Range
        / partial reads, `tracker.sources.gguf`), never the weights; with `expect`, checked
        against the object the tree names like `read_safetensors_header`."""
        ...


class Sources:
    """The repo sources of one App, built by `tracker.app.build` from the settings.

    `for_repo` gives each watched repo its own source instance, created on first use and kept
    (so per-poll request counts are exact even while daemon jobs overlap): the Hub on `endpoint`
    with `token`, or a git mirror under `git_root` when the repo has a `git:` URL or path. `hub`
    is one shared Hub source for one-off reads (`tracker estimate ORG/NAME`).
    """

    def __init__(
        self,
        *,
        endpoint: str,
        token: str | None,
        timeout_s: float,
        retry_attempts: int,
        git_root: Path,
        request_deadline_s: float = 120.0,
        retry_after_cap_s: float = 60.0,
        budget: Any = None,
    ) -> None:
        self.endpoint = endpoint
        self._budget = budget
        self._token = token
        self._timeout_s = timeout_s
        self._request_deadline_s = request_deadline_s
        self._retry_after_cap_s = retry_after_cap_s
        self._retry_attempts = retry_attempts
        self._git_root = git_root
        self._lock = threading.Lock()
        self._by_repo: dict[tuple[RepoId, str | None], RepoSource] = {}
        self._hub: RepoSource | None = None
        self.stopping = threading.Event()

    def stop(self) -> None:
        """The worker is stopping (SIGTERM): every Hub call under way, and any later one, is
        abandoned at its next request or body chunk (FetchAbandonedError)."""
        self.stopping.set()

    def _new_hub(self) -> RepoSource:
        from tracker.sources.hub import HubSource

        return HubSource(
            endpoint=self.endpoint,
            token=self._token,
            timeout_s=self._timeout_s,
            retry_attempts=self._retry_attempts,
            request_deadline_s=self._request_deadline_s,
            retry_after_cap_s=self._retry_after_cap_s,
            budget=self._budget,
            stopping=self.stopping,
        )

    def hub(self) -> RepoSource:
        """The shared Hub source (for reads outside a poll)."""
        with self._lock:
            if self._hub is None:
                self._hub = self._new_hub()
            return self._hub

    def for_repo(self, repo_id: RepoId, git: str | None = None) -> RepoSource:
        """The source `repo_id` is read from: its `git` URL or path if set, else the Hub."""
        key = (repo_id, git)
        with self._lock:
            source = self._by_repo.get(key)
            if source is None:
                if git:
                    from tracker.sources.git import GitSource

                    source = GitSource(self._git_root, url=git)
                else:
                    source = self._new_hub()
                self._by_repo[key] = source
            return source
