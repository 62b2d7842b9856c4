"""Write Hub-style git repos for the replica: commits with fixed authors and dates, LFS objects, refs.

A replica repo is a bare git repository at `ROOT/<org>/<name>/` (the git dir is the repo dir).
Large or binary files are committed the Hub way, as Git LFS pointer files, with the object stored
at `<git-dir>/lfs/objects/<oid[0:2]>/<oid[2:4]>/<oid>` (https://github.com/git-lfs/git-lfs/blob/main/docs/spec.md).
Everything goes through the git CLI's plumbing (`fast-import`, `update-ref`), with no work tree, no
hooks, no signing and no user or system git config, so the same inputs always give the same shas.
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
import re
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath

from tracker.settings import child_env
from tracker.shared.domain import Sha, is_full_sha, parse_repo_id
from tracker.shared.errors import TrackerError

DEFAULT_AUTHOR = "tracker-test <test@example.invalid>"

LFS_PATTERNS: tuple[str, ...] = (
    "*.safetensors",
    "*.bin",
    "*.pt",
    "*.pth",
    "*.ckpt",
    "*.pkl",
    "*.gguf",
    "*.onnx",
    "*.h5",
    "*.msgpack",
)
"""File-name patterns stored in LFS by default (matched against the base name)."""

LFS_SIZE_THRESHOLD = 10 * 1024 * 1024
"""Files over this many bytes go to LFS whatever their name (the Hub refuses larger plain files)."""

LFS_SPEC = "https://git-lfs.github.com/spec/v1"

_AUTHOR = re.compile(r"^(?P<name>[^<>\n]*[^<>\s])\s*<(?P<email>[^<>\n]*)>$")
_POINTER = re.compile(
    rb"^version https://git-lfs\.github\.com/spec/v1\noid sha256:(?P<oid>[0-9a-f]{64})\n"
    rb"size (?P<size>0|[1-9][0-9]*)\n$"
)
_ZERO_BLOCK = bytes(1 << 22)


class RepoWriteError(TrackerError):
    """A replica repo could not be written: bad path, ref, author or date, or git refused."""


@dataclass(frozen=True)
class LfsPointer:
    """A Git LFS pointer: the sha256 `oid` and byte `size` of an object in the repo's LFS store.

    Pass one as a file's content to `commit` to commit an object already written with
    `write_lfs_object` / `write_sparse_lfs_object` (the pointer text is committed as is).
    """

    oid: str
    size: int

    def encode(self) -> bytes:
        """The canonical pointer file text (the form git-lfs and the Hub write)."""
        return f"version {LFS_SPEC}\noid sha256:{self.oid}\nsize {self.size}\n".encode()


def parse_lfs_pointer(data: bytes) -> LfsPointer | None:
    """The pointer `data` encodes, or None when `data` is not a canonical LFS pointer file."""
    match = _POINTER.match(data)
    if match is None:
        return None
    return LfsPointer(match["oid"].decode(), int(match["size"]))


def default_lfs_rule(path: str, data: bytes) -> bool:
    """True when `path` matches LFS_PATTERNS (by base name) or `data` is over LFS_SIZE_THRESHOLD."""
    name = PurePosixPath(path).name
    return len(data) > LFS_SIZE_THRESHOLD or any(fnmatch.fnmatchcase(name, p) for p in LFS_PATTERNS)


HUB_GITATTRIBUTES = (
    "".join(f"{p} filter=lfs diff=lfs merge=lfs -text\n" for p in LFS_PATTERNS)
).encode()
"""A `.gitattributes` declaring LFS_PATTERNS, in the Hub's format, for a repo's first commit."""


def _git_env() -> dict[str, str]:
    return child_env(
        keep=("PATH",),
        GIT_CONFIG_NOSYSTEM="1",
        GIT_CONFIG_GLOBAL=os.devnull,
        GIT_TERMINAL_PROMPT="0",
        LC_ALL="C",
        TZ="UTC",
    )


def _git(git_dir: Path, *args: str, stdin: bytes | None = None, check: bool = True) -> bytes:
    cmd = ["git", "-c", "gc.auto=0", "-c", "core.fsyncMethod=batch", f"--git-dir={git_dir}", *args]
    try:
        proc = subprocess.run(
            cmd, input=stdin, capture_output=True, env=_git_env(), check=False, timeout=600
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RepoWriteError(f"git {args[0]} failed to run: {exc}") from exc
    if check and proc.returncode != 0:
        err = proc.stderr.decode(errors="replace").strip()
        raise RepoWriteError(f"git {args[0]} failed in {git_dir}: {err}")
    return proc.stdout


def git_dir(repo_dir: Path) -> Path:
    """The git directory of `repo_dir` (itself when bare, `repo_dir/.git` otherwise)."""
    dot_git = repo_dir / ".git"
    if dot_git.is_dir():
        return dot_git
    if (repo_dir / "HEAD").is_file() and (repo_dir / "objects").is_dir():
        return repo_dir
    raise RepoWriteError(f"{repo_dir} is not a git repository")


def lfs_object_path(repo_dir: Path, oid: str) -> Path:
    """Where the LFS object `oid` (64 lowercase hex) lives in `repo_dir`'s LFS store."""
    if not re.fullmatch(r"[0-9a-f]{64}", oid):
        raise RepoWriteError(f"LFS oid {oid!r} is not 64 lowercase hex digits")
    return git_dir(repo_dir) / "lfs" / "objects" / oid[0:2] / oid[2:4] / oid


def init_repo(root: Path, repo_id: str) -> Path:
    """Create an empty bare repo for `repo_id` at `root/<org>/<name>` and return that path.

    `repo_id` is validated with `parse_repo_id` (InvalidRepoIdError). The default branch is `main`.
    Raises RepoWriteError when the directory already exists and is not empty.
    """
    rid = parse_repo_id(repo_id)
    org, name = rid.split("/")
    repo_dir = root / org / name
    if repo_dir.exists() and (not repo_dir.is_dir() or any(repo_dir.iterdir())):
        raise RepoWriteError(f"{repo_dir} already exists")
    repo_dir.mkdir(parents=True, exist_ok=True)
    try:
        subprocess.run(
            ["git", "init", "--quiet", "--bare", "--initial-branch=main", str(repo_dir)],
            capture_output=True,
            env=_git_env(),
            check=True,
            timeout=60,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise RepoWriteError(f"git init failed for {repo_dir}: {exc}") from exc
    return repo_dir


def full_ref(ref: str) -> str:
    """`ref` as a full ref name: `main` -> `refs/heads/main`; `refs/...` unchanged.

    Raises RepoWriteError when the result is not a valid git ref name.
    """
    name = ref if ref.startswith("refs/") else f"refs/heads/{ref}"
    bad = (
        not ref
        or any(c in name for c in " ~^:?*[\\\x7f")
        or any(ord(c) < 32 for c in name)
        or ".." in name
        or "@{" in name
        or name.endswith(("/", ".", ".lock"))
        or "//" in name
        or any(part.startswith(".") for part in name.split("/"))
    )
    if bad:
        raise RepoWriteError(f"{ref!r} is not a valid git ref name")
    return name


def _check_path(path: str) -> str:
    parts = path.split("/")
    if (
        not path
        or path.startswith("/")
        or "\\" in path
        or "\n" in path
        or "\0" in path
        or any(p in ("", ".", "..", ".git") for p in parts)
    ):
        raise RepoWriteError(f"{path!r} is not a safe repo-relative file path")
    return path


def _ident(author: str, date: datetime) -> bytes:
    match = _AUTHOR.match(author)
    if match is None:
        raise RepoWriteError(f"author {author!r} must look like 'Name <email>'")
    if date.tzinfo is None:
        date = date.replace(tzinfo=UTC)
    offset = date.utcoffset()
    assert offset is not None
    minutes = int(offset.total_seconds()) // 60
    sign = "+" if minutes >= 0 else "-"
    tz = f"{sign}{abs(minutes) // 60:02d}{abs(minutes) % 60:02d}"
    stamp = int(date.timestamp())
    if stamp < 0:
        raise RepoWriteError(f"commit date {date.isoformat()} is before 1970")
    return f"{match['name']} <{match['email']}> {stamp} {tz}".encode()


def _quoted(path: str) -> bytes:
    # fast-import takes C-style quoted paths; _check_path already refused `\\`, LF and NUL.
    return b'"' + path.replace('"', '\\"').encode() + b'"'


def _data(payload: bytes) -> bytes:
    return b"data %d\n" % len(payload) + payload + b"\n"


def resolve(repo_dir: Path, ref: str) -> Sha | None:
    """The commit `ref` (branch name, full ref or sha) points at in `repo_dir`, or None."""
    out = _git(
        git_dir(repo_dir), "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", check=False
    )
    text = out.decode().strip()
    return Sha(text) if is_full_sha(text) else None


def _tracked_paths(gdir: Path, sha: Sha) -> set[str]:
    out = _git(gdir, "ls-tree", "-r", "-z", "--name-only", sha)
    return {p.decode() for p in out.split(b"\0") if p}


def commit(
    repo_dir: Path,
    files: Mapping[str, bytes | LfsPointer | None],
    message: str,
    *,
    author: str = DEFAULT_AUTHOR,
    date: datetime | None = None,
    ref: str = "main",
    lfs: Callable[[str, bytes], bool] | None = None,
) -> Sha:
    """Commit `files` on top of `ref`'s tip (or as a root commit when `ref` does not exist yet).

    `files` maps repo paths to new content: bytes are stored as is, or as an LFS pointer with the
    object written to the LFS store when `lfs(path, data)` is true (default: `default_lfs_rule`);
    an LfsPointer is committed as pointer text (its object must already be in the store); None
    deletes the path (RepoWriteError if it does not exist). Files not named are kept. Author and
    committer are both `author` at `date` (now, when None; naive dates are UTC); the message gets
    exactly one trailing newline. Returns the new commit's full sha and moves `ref` to it.
    Deterministic: the same repo state and arguments give the same sha.
    """
    gdir = git_dir(repo_dir)
    refname = full_ref(ref)
    rule = lfs or default_lfs_rule
    when = date if date is not None else datetime.now(UTC)
    ident = _ident(author, when)
    parent = resolve(repo_dir, refname)
    deletions = [_check_path(p) for p, v in files.items() if v is None]
    if deletions:
        existing = _tracked_paths(gdir, parent) if parent is not None else set()
        missing = [p for p in deletions if p not in existing]
        if missing:
            raise RepoWriteError(f"cannot delete {missing}: not in {refname} of {repo_dir}")

    body = message.rstrip() + "\n"
    stream = [
        f"commit {refname}\n".encode(),
        b"mark :1\n",
        b"author " + ident + b"\n",
        b"committer " + ident + b"\n",
        _data(body.encode()),
    ]
    if parent is not None:
        stream.append(f"from {parent}\n".encode())
    for path in sorted(files):
        content = files[path]
        _check_path(path)
        if content is None:
            stream.append(b"D " + _quoted(path) + b"\n")
            continue
        if isinstance(content, LfsPointer):
            obj = lfs_object_path(repo_dir, content.oid)
            if not obj.is_file() or obj.stat().st_size != content.size:
                raise RepoWriteError(
                    f"{path}: LFS object {content.oid} of {content.size} bytes is not in the store"
                )
            blob = content.encode()
        elif rule(path, content):
            blob = write_lfs_object(repo_dir, content).encode()
        else:
            blob = bytes(content)
        stream.append(b"M 100644 inline " + _quoted(path) + b"\n")
        stream.append(_data(blob))
    stream.append(b"get-mark :1\ndone\n")  # get-mark prints the new commit's sha on stdout
    out = _git(gdir, "fast-import", "--quiet", "--done", stdin=b"".join(stream)).decode().strip()
    if not is_full_sha(out):  # pragma: no cover - fast-import succeeded but printed no sha
        raise RepoWriteError(f"fast-import gave no commit id for {refname} in {repo_dir}: {out!r}")
    return Sha(out)


def set_ref(repo_dir: Path, ref: str, sha: str) -> None:
    """Point `ref` at commit `sha`, creating it or moving it anywhere (a force-push).

    Raises RepoWriteError when `sha` is not a commit in the repo or `ref` is not a valid name.
    """
    refname = full_ref(ref)
    target = resolve(repo_dir, sha) if is_full_sha(sha) else None
    if target is None:
        raise RepoWriteError(f"{sha!r} is not a commit in {repo_dir}")
    _git(git_dir(repo_dir), "update-ref", refname, target)


def delete_ref(repo_dir: Path, ref: str) -> None:
    """Delete `ref` (a branch name or full ref); RepoWriteError when it does not exist."""
    refname = full_ref(ref)
    if resolve(repo_dir, refname) is None:
        raise RepoWriteError(f"{refname} does not exist in {repo_dir}")
    _git(git_dir(repo_dir), "update-ref", "-d", refname)


def _store(repo_dir: Path, oid: str, size: int, write: Callable[[Path], None]) -> LfsPointer:
    dest = lfs_object_path(repo_dir, oid)
    if dest.is_file() and dest.stat().st_size == size:
        return LfsPointer(oid, size)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{oid}.{os.getpid()}.tmp")
    try:
        write(tmp)
        os.replace(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)
    return LfsPointer(oid, size)


def write_lfs_object(repo_dir: Path, data: bytes) -> LfsPointer:
    """Store `data` in `repo_dir`'s LFS store (idempotent) and return its pointer."""

    def write(path: Path) -> None:
        path.write_bytes(data)

    return _store(repo_dir, hashlib.sha256(data).hexdigest(), len(data), write)


def zero_padded_sha256(head: bytes, size: int) -> str:
    """The sha256 hex of `head` followed by zero bytes up to `size` bytes in all.

    Streams the zeros from a fixed block, so it costs CPU (about 1.5 GB/s) but no disk or memory.
    """
    if size < len(head):
        raise RepoWriteError(f"size {size} is smaller than the {len(head)}-byte head")
    digest = hashlib.sha256(head)
    left = size - len(head)
    block = memoryview(_ZERO_BLOCK)
    while left >= len(block):
        digest.update(block)
        left -= len(block)
    digest.update(block[:left])
    return digest.hexdigest()


def write_sparse_lfs_object(
    repo_dir: Path, head: bytes, size: int, *, oid: str | None = None
) -> LfsPointer:
    """Store a `size`-byte object whose first bytes are `head` and the rest zeros, as a sparse file.

    The hole takes no disk space. `oid` must be `zero_padded_sha256(head, size)`; pass it when
    known (e.g. from a cache) to skip hashing the zeros. Returns the pointer (idempotent).
    """
    digest = oid if oid is not None else zero_padded_sha256(head, size)
    if size < len(head):
        raise RepoWriteError(f"size {size} is smaller than the {len(head)}-byte head")

    def write(path: Path) -> None:
        with path.open("wb") as fh:
            fh.write(head)
            fh.truncate(size)

    return _store(repo_dir, digest, size, write)
