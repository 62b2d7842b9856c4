"""An in-memory RepoSource for unit tests: real ordering, typed not-found errors, revision pinning.

Commits are content-addressed (deterministic shas from parents, message, date and files); refs
can be moved anywhere (force-push) or deleted; repos can be made gated or removed; `fail` makes the
next matching calls raise a given error. `calls` counts every method call by name.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from tracker.shared.artifacts import is_header_only, is_pickle
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
    EntryNotFoundError,
    GatedRepoError,
    OversizedArtifactError,
    RepoNotFoundError,
    RevisionNotFoundError,
    SourceError,
)
from tracker.sources.gguf import parse_gguf_bytes
from tracker.sources.safetensors import parse_file_prefix

OTHER_LFS_SUFFIXES = (".gguf", ".onnx")


def _stored_as_lfs(path: str) -> bool:
    """Stored as LFS on the Hub (a subset of its default LFS rule): weights, pickles, exports;
    their tree entries carry an oid."""
    return is_header_only(path) or is_pickle(path) or path.endswith(OTHER_LFS_SUFFIXES)


def _git_blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


@dataclass
class FakeRepo:
    """One repo: refs, commits and per-commit file contents."""

    refs: dict[str, Sha] = field(default_factory=dict)
    commits: dict[Sha, Commit] = field(default_factory=dict)
    files: dict[Sha, dict[str, bytes]] = field(default_factory=dict)
    access: str = "ok"  # ok | gated | private | gone


class FakeSource:
    """In-memory RepoSource; see the module docstring."""

    def __init__(self) -> None:
        self.repos: dict[str, FakeRepo] = {}
        self.calls: Counter[str] = Counter()
        self.bytes_read = 0
        self._faults: list[tuple[str, str | None, SourceError, int]] = []
        self._damage: dict[str, tuple[int, int | None]] = {}
        self.damaged = 0
        self._clock = datetime(2024, 1, 1, tzinfo=UTC)

    # -- building history ----------------------------------------------------------------

    def commit(
        self,
        repo_id: str,
        files: Mapping[str, bytes | None],
        message: str = "update",
        *,
        ref: str = "main",
        parent: Sha | None = None,
        author: str = "alice",
    ) -> Sha:
        """Commit `files` (None deletes) on top of `parent` (default: the ref's head); move the ref."""
        repo = self.repos.setdefault(repo_id, FakeRepo())
        base = parent if parent is not None else repo.refs.get(ref)
        content = dict(repo.files[base]) if base else {}
        for path, data in files.items():
            if data is None:
                content.pop(path, None)
            else:
                content[path] = data
        self._clock += timedelta(hours=1)
        digest = hashlib.sha1(usedforsecurity=False)
        digest.update(json.dumps([base, message, self._clock.isoformat(), author]).encode())
        for path in sorted(content):
            digest.update(path.encode() + b"\0" + hashlib.sha256(content[path]).digest())
        sha = Sha(digest.hexdigest())
        title, _, body = message.partition("\n")
        repo.commits[sha] = Commit(
            sha=sha,
            parents=(base,) if base else (),
            date=self._clock,
            title=title,
            message=body.strip(),
            authors=(author,),
        )
        repo.files[sha] = content
        repo.refs[ref] = sha
        return sha

    def set_ref(self, repo_id: str, ref: str, sha: Sha | None) -> None:
        """Move `ref` to `sha` (force-push) or delete it (None)."""
        repo = self.repos[repo_id]
        if sha is None:
            repo.refs.pop(ref, None)
        else:
            repo.refs[ref] = sha

    def fail(
        self, method: str, error: SourceError, *, path: str | None = None, times: int = 1
    ) -> None:
        """Make the next `times` calls of `method` (optionally for `path`) raise `error`."""
        self._faults.append((method, path, error, times))

    # -- the RepoSource protocol ---------------------------------------------------------

    def _enter(self, method: str, repo_id: RepoId, path: str | None = None) -> FakeRepo:
        self.calls[method] += 1
        for i, (m, p, error, times) in enumerate(self._faults):
            if m == method and (p is None or p == path):
                if times <= 1:
                    del self._faults[i]
                else:
                    self._faults[i] = (m, p, error, times - 1)
                raise error
        repo = self.repos.get(repo_id)
        if repo is None or repo.access in ("gone", "private"):
            raise RepoNotFoundError(f"{repo_id}: repository not found")
        if repo.access == "gated":
            raise GatedRepoError(f"{repo_id}: gated repo, access not granted")
        return repo

    def _commit_at(self, repo: FakeRepo, repo_id: RepoId, rev: str) -> Sha:
        if rev in repo.refs:
            return repo.refs[rev]
        if is_full_sha(rev) and rev in repo.commits:
            return Sha(rev)
        raise RevisionNotFoundError(f"{repo_id}: revision {rev!r} not found")

    def resolve_ref(self, repo_id: RepoId, ref: str) -> Sha:
        return self._commit_at(self._enter("resolve_ref", repo_id), repo_id, ref)

    def list_commits(self, repo_id: RepoId, ref: str) -> list[Commit]:
        repo = self._enter("list_commits", repo_id)
        head = self._commit_at(repo, repo_id, ref)
        out: list[Commit] = []
        seen: set[Sha] = set()
        todo = [head]
        while todo:
            sha = todo.pop()
            if sha in seen:
                continue
            seen.add(sha)
            out.append(repo.commits[sha])
            todo.extend(repo.commits[sha].parents)
        return sorted(out, key=lambda c: c.date, reverse=True)

    def list_tree(self, repo_id: RepoId, sha: Sha) -> list[TreeEntry]:
        repo = self._enter("list_tree", repo_id)
        files = repo.files.get(self._commit_at(repo, repo_id, sha), {})
        out = []
        for path in sorted(files):
            data = files[path]
            if _stored_as_lfs(path):
                pointer = (
                    "version https://git-lfs.github.com/spec/v1\n"
                    f"oid sha256:{hashlib.sha256(data).hexdigest()}\nsize {len(data)}\n"
                ).encode()
                out.append(
                    TreeEntry(
                        path, _git_blob_id(pointer), len(data), hashlib.sha256(data).hexdigest()
                    )
                )
            else:
                out.append(TreeEntry(path, _git_blob_id(data), len(data)))
        return out

    def damage(self, path: str, times: int = 1, *, keep: int | None = None) -> None:
        """The next `times` reads of `path` (any repo, any revision) come back damaged, the way
        a broken transfer delivers them: cut to `keep` bytes, or (default) with one byte flipped
        in the middle. The tree still names the real content."""
        self._damage[path] = (times, keep)

    def _file(self, method: str, repo_id: RepoId, sha: Sha, path: str) -> bytes:
        repo = self._enter(method, repo_id, path)
        files = repo.files.get(self._commit_at(repo, repo_id, sha), {})
        if path not in files:
            raise EntryNotFoundError(f"{repo_id}@{sha}: {path} not found")
        data = files[path]
        times, keep = self._damage.get(path, (0, None))
        if times > 0:
            self._damage[path] = (times - 1, keep)
            self.damaged += 1
            if keep is not None:
                return data[:keep]
            mid = len(data) // 2
            return data[:mid] + bytes([data[mid] ^ 0x20]) + data[mid + 1 :] if data else b"\0"
        return data

    def read_file(self, repo_id: RepoId, sha: Sha, path: str, max_bytes: int) -> bytes:
        data = self._file("read_file", repo_id, sha, path)
        if len(data) > max_bytes:
            raise OversizedArtifactError(
                f"{path} is {len(data)} bytes, over the cap of {max_bytes}"
            )
        self.bytes_read += len(data)
        return data

    def read_safetensors_header(
        self,
        repo_id: RepoId,
        sha: Sha,
        path: str,
        max_header_bytes: int,
        *,
        expect: TreeEntry | None = None,
    ) -> SafetensorsHeader:
        data = self._file("read_safetensors_header", repo_id, sha, path)
        size = expect.size if expect is not None else None
        header = parse_file_prefix(data, max_header_bytes, file_size=size)
        self.bytes_read += min(len(data), 8 + int.from_bytes(data[:8], "little"))
        return header

    def read_gguf_header(
        self,
        repo_id: RepoId,
        sha: Sha,
        path: str,
        max_header_bytes: int,
        *,
        expect: TreeEntry | None = None,
    ) -> GGUFHeader:
        data = self._file("read_gguf_header", repo_id, sha, path)
        size = expect.size if expect is not None else None
        header = parse_gguf_bytes(data, max_bytes=max_header_bytes, file_size=size)
        self.bytes_read += min(len(data), header.data_offset)
        return header
