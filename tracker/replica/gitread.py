"""Read-only access to one replica git repository through the `git` CLI: refs, commits, trees, blobs, LFS.

Everything keyed by a commit sha is immutable, so `GitRepo` caches it (bounded); refs are always read
fresh, so commits made between two requests are visible at once.
"""

from __future__ import annotations

import os
import re
import subprocess
import threading
import zlib
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from tracker.settings import child_env

LFS_POINTER_MAX = 1024
"""Git LFS pointer files are always smaller than this (git-lfs spec, "pointer files")."""

_SHA_RE = re.compile(r"^[0-9a-f]{40}$")
_OID_RE = re.compile(r"^[0-9a-f]{64}$")
_POINTER_RE = re.compile(
    rb"^version https://git-lfs\.github\.com/spec/v1\n"
    rb"oid sha256:(?P<oid>[0-9a-f]{64})\n"
    rb"size (?P<size>[0-9]+)\n(?:[a-z0-9.-]+ [^\n]*\n)*$"
)
_CACHE_SIZE = 256
_BLOB_CACHE_MAX = 256 * 1024

T = TypeVar("T")


class GitReadError(Exception):
    """git failed on a repository we expected to read (corrupt repo, missing object)."""


@dataclass(frozen=True)
class Ref:
    """A ref with the commit it points at (tags peeled)."""

    ref: str
    target: str


@dataclass(frozen=True)
class CommitRecord:
    """One commit: id, parents, committer time (unix seconds), author, title and the rest of the message."""

    sha: str
    parents: tuple[str, ...]
    timestamp: int
    author_name: str
    author_email: str
    title: str
    message: str


@dataclass(frozen=True)
class LfsPointer:
    """The content of a Git LFS pointer file."""

    oid: str
    size: int
    pointer_size: int


@dataclass(frozen=True)
class TreeItem:
    """One tree entry at a commit: a file (`is_dir` False) or a directory.

    `oid` is the git object id (for LFS files, the pointer blob's); `size` is the real content size
    (the LFS object's size for LFS files, 0 for directories).
    """

    path: str
    is_dir: bool
    oid: str
    size: int
    mode: str
    lfs: LfsPointer | None = None


def parse_lfs_pointer(data: bytes) -> LfsPointer | None:
    """Return the pointer described by `data`, or None when `data` is not a Git LFS pointer file."""
    if len(data) >= LFS_POINTER_MAX:
        return None
    match = _POINTER_RE.match(data)
    if match is None:
        return None
    return LfsPointer(match["oid"].decode(), int(match["size"]), len(data))


class _Lru:
    """A small thread-safe LRU map."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._data: OrderedDict[object, object] = OrderedDict()
        self._lock = threading.Lock()

    def peek(self, key: object) -> T | None:  # type: ignore[type-var]
        with self._lock:
            return self._data.get(key)  # type: ignore[return-value]

    def get_or(self, key: object, compute: Callable[[], T]) -> T:
        with self._lock:
            if key in self._data:
                self._data.move_to_end(key)
                return self._data[key]  # type: ignore[return-value]
        value = compute()
        with self._lock:
            self._data[key] = value
            while len(self._data) > self._size:
                self._data.popitem(last=False)
        return value


class GitRepo:
    """One repository (bare or with a work tree) at `path`; all reads go through `git`."""

    def __init__(self, path: Path) -> None:
        self.path = path
        dot_git = path / ".git"
        self.git_dir = dot_git if dot_git.is_dir() else path
        self._cache = _Lru(_CACHE_SIZE)

    # -- plumbing ---------------------------------------------------------------------------

    def _git(self, *args: str, stdin: bytes | None = None, check: bool = True) -> bytes:
        env = child_env(
            drop=("GIT_DIR", "GIT_WORK_TREE"),
            GIT_CONFIG_NOSYSTEM="1",
            GIT_TERMINAL_PROMPT="0",
            LC_ALL="C",
        )
        proc = subprocess.run(
            ["git", "-c", "safe.directory=*", "--git-dir", str(self.git_dir), *args],
            input=stdin,
            capture_output=True,
            env=env,
            check=False,
        )
        if check and proc.returncode != 0:
            raise GitReadError(
                f"git {' '.join(args[:2])} failed in {self.path}: "
                f"{proc.stderr.decode(errors='replace').strip()}"
            )
        return proc.stdout

    # -- refs -------------------------------------------------------------------------------

    def refs(self) -> list[Ref]:
        """Every ref under refs/ with the commit it points at, sorted by ref name (read fresh).

        Reads loose refs and packed-refs directly (a bench polls 1,000 repos); falls back to
        `git for-each-ref` whenever a ref needs more than that (symbolic refs, packed tag objects).
        """
        fast = self._refs_from_files()
        return fast if fast is not None else self._refs_from_git()

    def _refs_from_files(self) -> list[Ref] | None:
        found: dict[str, str] = {}
        packed = self.git_dir / "packed-refs"
        try:
            lines = packed.read_text("utf-8").splitlines() if packed.exists() else []
            last: str | None = None
            for line in lines:
                if line.startswith("#"):
                    if "fully-peeled" not in line:
                        return None  # tags without a ^ line might still be tag objects
                    continue
                if not line:
                    continue
                if line.startswith("^"):
                    if last is None:
                        return None
                    found[last] = line[1:].strip()  # the peeled commit of an annotated tag
                    continue
                sha, _, name = line.partition(" ")
                found[name] = sha
                last = name
            base = self.git_dir / "refs"
            for dirpath, _dirs, names in os.walk(base):
                for name in names:
                    full = Path(dirpath) / name
                    text = full.read_text("utf-8").strip()
                    ref = "refs/" + full.relative_to(base).as_posix()
                    if not _SHA_RE.match(text):
                        return None
                    # Branches, PR and convert refs always name commits on the Hub; a tag may
                    # name a tag object, which only git can peel when it is packed.
                    if ref.startswith("refs/tags/") and not self._loose_is_commit(text):
                        return None
                    found[ref] = text
        except (OSError, UnicodeDecodeError):
            return None
        if any(not _SHA_RE.match(sha) for sha in found.values()):
            return None
        return [Ref(name, found[name]) for name in sorted(found)]

    def _loose_is_commit(self, sha: str) -> bool:
        """True when `sha` is a loose commit object (False when packed or another type: use git)."""
        path = self.git_dir / "objects" / sha[:2] / sha[2:]
        try:
            with path.open("rb") as handle:
                head = zlib.decompressobj().decompress(handle.read(64), 16)
        except (OSError, zlib.error):
            return False
        return head.startswith(b"commit ")

    def _refs_from_git(self) -> list[Ref]:
        out = self._git(
            "for-each-ref", "--format=%(refname)%00%(objectname)%00%(*objectname)", "refs/"
        )
        refs = []
        for line in out.decode("utf-8", errors="replace").splitlines():
            name, obj, peeled = line.split("\0")
            refs.append(Ref(name, peeled or obj))
        return refs

    def resolve(self, rev: str) -> str | None:
        """Return the commit sha `rev` names, or None.

        `rev` may be a branch, a tag, a full ref (`refs/pr/1`) or a full 40-hex commit id; nothing
        else (no short shas, no `HEAD~n`, no reflog syntax) is accepted, as on the Hub.
        """
        if _SHA_RE.match(rev):
            return rev if self.is_commit(rev) else None
        refs = {r.ref: r.target for r in self.refs()}
        for candidate in (f"refs/heads/{rev}", f"refs/tags/{rev}", rev):
            if candidate.startswith("refs/") and candidate in refs:
                return refs[candidate]
        return None

    def is_commit(self, sha: str) -> bool:
        """True when `sha` is a commit object in this repository."""
        out = self._git("cat-file", "-t", sha, check=False)
        return out.strip() == b"commit"

    # -- commits ----------------------------------------------------------------------------

    def commits(self, sha: str) -> list[CommitRecord]:
        """History reachable from `sha`, newest first (git log order); cached per sha."""
        return self._cache.get_or(("commits", sha), lambda: self._read_commits(sha))

    def _read_commits(self, sha: str) -> list[CommitRecord]:
        out = self._git("log", "-z", "--format=%H%x1f%P%x1f%ct%x1f%an%x1f%ae%x1f%B", sha, "--")
        records = []
        for raw in out.decode("utf-8", errors="replace").split("\0"):
            if not raw.strip():
                continue
            h, parents, ts, name, email, body = raw.lstrip("\n").split("\x1f", 5)
            body = body.rstrip("\n")
            title, _, rest = body.partition("\n")
            records.append(
                CommitRecord(
                    sha=h,
                    parents=tuple(parents.split()),
                    timestamp=int(ts),
                    author_name=name,
                    author_email=email,
                    title=title,
                    message=rest.strip("\n"),
                )
            )
        return records

    def last_commits(self, sha: str) -> dict[str, CommitRecord]:
        """For every path (file or directory) ever touched below `sha`, the newest commit touching it.

        Walks the first-parent history once (merges are diffed against their first parent); cached.
        """
        return self._cache.get_or(("last", sha), lambda: self._read_last_commits(sha))

    def _read_last_commits(self, sha: str) -> dict[str, CommitRecord]:
        by_sha = {c.sha: c for c in self.commits(sha)}
        out = self._git(
            "log",
            "-z",
            "--first-parent",
            "--no-renames",
            "--name-only",
            "--format=%x1e%H",
            sha,
            "--",
        )
        result: dict[str, CommitRecord] = {}
        for record in out.decode("utf-8", errors="replace").split("\x1e"):
            if not record:
                continue
            head, _, names = record.partition("\0")
            commit = by_sha.get(head.strip())
            if commit is None:
                continue
            for name in names.lstrip("\n").split("\0"):
                if not name:
                    continue
                parts = name.split("/")
                for i in range(1, len(parts) + 1):
                    result.setdefault("/".join(parts[:i]), commit)
        return result

    # -- trees and blobs --------------------------------------------------------------------

    def tree(self, sha: str) -> list[TreeItem]:
        """Every file and directory at commit `sha`, recursively, in git order; LFS pointers resolved."""
        return self._cache.get_or(("tree", sha), lambda: self._read_tree(sha))

    def _read_tree(self, sha: str) -> list[TreeItem]:
        out = self._git("ls-tree", "-r", "-t", "-l", "-z", "--full-tree", sha)
        rows: list[tuple[str, str, str, str, str]] = []
        small: list[str] = []
        for raw in out.split(b"\0"):
            if not raw:
                continue
            meta, _, raw_path = raw.partition(b"\t")
            mode, kind, oid, size = meta.decode().split(maxsplit=3)
            if kind not in ("blob", "tree"):
                continue  # submodules are not files
            rows.append((mode, kind, oid, size.strip(), raw_path.decode("utf-8", errors="replace")))
            if kind == "blob" and int(size) < LFS_POINTER_MAX:
                small.append(oid)
        pointers = self._pointers(small)
        items: list[TreeItem] = []
        for mode, kind, oid, size, path in rows:
            if kind == "tree":
                items.append(TreeItem(path, True, oid, 0, mode))
                continue
            pointer = pointers.get(oid)
            real_size = pointer.size if pointer else int(size)
            items.append(TreeItem(path, False, oid, real_size, mode, pointer))
        return items

    def _pointers(self, oids: list[str]) -> dict[str, LfsPointer]:
        unique = sorted(set(oids))
        if not unique:
            return {}
        out = self._git("cat-file", "--batch", stdin=("\n".join(unique) + "\n").encode())
        result: dict[str, LfsPointer] = {}
        pos = 0
        while pos < len(out):
            eol = out.index(b"\n", pos)
            header = out[pos:eol].decode().split()
            if len(header) != 3:
                raise GitReadError(f"unexpected cat-file output {header!r} in {self.path}")
            oid, _, size_text = header
            size = int(size_text)
            data = out[eol + 1 : eol + 1 + size]
            pos = eol + 1 + size + 1
            pointer = parse_lfs_pointer(data)
            if pointer is not None:
                result[oid] = pointer
        return result

    def read_blob(self, oid: str) -> bytes:
        """The content of blob `oid`; blobs under 256 KiB are cached."""
        key = ("blob", oid)
        cached: bytes | None = self._cache.peek(key)
        if cached is not None:
            return cached
        data = self._git("cat-file", "blob", oid)
        if len(data) < _BLOB_CACHE_MAX:
            self._cache.get_or(key, lambda: data)
        return data

    def lfs_object(self, oid: str) -> Path:
        """Path of the LFS object for sha256 `oid` (it may be missing or sparse)."""
        if not _OID_RE.match(oid):
            raise GitReadError(f"bad LFS oid {oid!r}")
        return self.git_dir / "lfs" / "objects" / oid[0:2] / oid[2:4] / oid

    def memo(self, key: object, compute: Callable[[], T]) -> T:
        """Cache `compute()` under `key` (callers key by immutable ids: commit shas, blob ids, oids)."""
        return self._cache.get_or(("memo", key), compute)


def stream_file(path: Path, start: int, end: int, chunk: int = 1 << 20) -> Iterator[bytes]:
    """Yield bytes [start, end) of the file at `path` in chunks, never holding it all in memory."""
    with path.open("rb") as handle:
        handle.seek(start)
        remaining = end - start
        while remaining > 0:
            data = handle.read(min(chunk, remaining))
            if not data:
                raise GitReadError(f"{path} ended {remaining} bytes early")
            remaining -= len(data)
            yield data
