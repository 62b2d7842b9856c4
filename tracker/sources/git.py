"""RepoSource on any git URL or local path: a bare mirror under `state/git/`, read with git plumbing.

`resolve_ref` clones (first time) or fetches the mirror, then resolves; the other calls read the
mirror only. LFS pointer files report the pointer's sha256 as `lfs_sha256` and the real size; their
content (and safetensors headers) is read from a local LFS store (`<git-dir>/lfs/objects/..` of
the mirror or, for a local source, of the source) when the object is there, else the file is
unreadable with a clear reason. File names that are not UTF-8 are escaped losslessly
(`tracker.sources.names`). Subprocess failures become tracker.shared.errors in `_translate`.
"""

from __future__ import annotations

import re
import subprocess
from datetime import datetime
from pathlib import Path

from tracker.settings import child_env
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
    ArtifactError,
    BadResponseError,
    EntryNotFoundError,
    OversizedArtifactError,
    RepoNotFoundError,
    RevisionNotFoundError,
    SourceError,
    TransientSourceError,
    UnreadableArtifactError,
)
from tracker.sources.gguf import parse_gguf, parse_gguf_bytes
from tracker.sources.names import escape_name
from tracker.sources.safetensors import header_length, parse_file_prefix, parse_header

_POINTER = re.compile(
    rb"^version https://git-lfs\.github\.com/spec/v1\noid sha256:([0-9a-f]{64})\nsize (\d+)\n?$"
)
_SEP, _END = "\x1f", "\x1e"
MAX_POINTER = 1024


def _env() -> dict[str, str]:
    return child_env(GIT_TERMINAL_PROMPT="0", GIT_LFS_SKIP_SMUDGE="1", LC_ALL="C")


def _translate(
    exc: subprocess.CalledProcessError | subprocess.TimeoutExpired, what: str
) -> SourceError:
    """The one mapping from git failures to tracker.shared.errors."""
    if isinstance(exc, subprocess.TimeoutExpired):
        return TransientSourceError(f"{what}: git timed out after {exc.timeout} s")
    err = (exc.stderr or b"").decode(errors="replace").strip()
    low = err.lower()
    if any(
        s in low
        for s in ("does not exist", "not a git repository", "not found", "does not appear to be")
    ):
        return RepoNotFoundError(f"{what}: {err.splitlines()[-1] if err else 'not found'}")
    if any(s in low for s in ("could not resolve host", "connection", "timed out", "early eof")):
        return TransientSourceError(f"{what}: {err.splitlines()[-1]}")
    return BadResponseError(f"{what}: git exited {exc.returncode}: {err[-300:]}")


class GitSource:
    """RepoSource over one git URL or local path (see the module docstring)."""

    def __init__(self, mirror_root: Path, url: str, *, timeout_s: float = 300.0) -> None:
        self.mirror_root = Path(mirror_root)
        self.url = url
        self.timeout_s = timeout_s
        local = Path(url).expanduser()
        self._local = local.resolve() if "://" not in url and local.exists() else None
        self.request_count = 0
        self.bytes_received = 0

    def mirror(self, repo_id: RepoId) -> Path:
        org, name = repo_id.split("/")
        return self.mirror_root / f"{org}__{name}.git"

    def _git(
        self, repo_id: RepoId, *args: str, stdin: bytes | None = None, cwd: Path | None = None
    ) -> bytes:
        cmd = [
            "git",
            *(("-C", str(cwd)) if cwd else ("--git-dir", str(self.mirror(repo_id)))),
            *args,
        ]
        try:
            return subprocess.run(
                cmd,
                input=stdin,
                capture_output=True,
                check=True,
                env=_env(),
                timeout=self.timeout_s,
            ).stdout
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
            raise _translate(exc, f"{repo_id} ({self.url})") from exc

    def _sync(self, repo_id: RepoId) -> None:
        self.request_count += 1
        mirror = self.mirror(repo_id)
        if not (mirror / "HEAD").exists():
            mirror.parent.mkdir(parents=True, exist_ok=True)
            source = str(self._local) if self._local else self.url
            self._git(
                repo_id, "clone", "--mirror", "--quiet", source, str(mirror), cwd=mirror.parent
            )
        else:
            self._git(repo_id, "fetch", "--prune", "--quiet", "origin")

    def _rev(self, repo_id: RepoId, rev: str) -> Sha:
        candidates = [rev] if is_full_sha(rev) else [f"refs/heads/{rev}", f"refs/tags/{rev}", rev]
        for cand in candidates:
            try:
                out = self._git(repo_id, "rev-parse", "--verify", "--quiet", f"{cand}^{{commit}}")
            except SourceError:
                continue
            return Sha(out.decode().strip())
        raise RevisionNotFoundError(f"{repo_id}: no branch, tag or commit {rev!r} in {self.url}")

    # -- RepoSource --------------------------------------------------------------------------

    def resolve_ref(self, repo_id: RepoId, ref: str) -> Sha:
        self._sync(repo_id)
        return self._rev(repo_id, ref)

    def list_commits(self, repo_id: RepoId, ref: str) -> list[Commit]:
        head = self._rev(repo_id, ref)
        fmt = _SEP.join(["%H", "%P", "%aI", "%an <%ae>", "%s", "%b"]) + _END
        out = self._git(repo_id, "log", f"--format={fmt}", head).decode("utf-8", errors="replace")
        commits = []
        for record in out.split(_END):
            record = record.lstrip("\n")
            if not record:
                continue
            sha, parents, date, author, title, body = record.split(_SEP, 5)
            commits.append(
                Commit(
                    sha=Sha(sha),
                    parents=tuple(Sha(p) for p in parents.split()),
                    date=datetime.fromisoformat(date),
                    title=title,
                    message=body.strip(),
                    authors=(author,),
                )
            )
        return commits

    def _entries(self, repo_id: RepoId, sha: Sha) -> dict[str, tuple[str, int]]:
        out = self._git(
            repo_id, "ls-tree", "-r", "-l", "-z", "--full-tree", self._rev(repo_id, sha)
        )
        entries: dict[str, tuple[str, int]] = {}
        for item in out.split(b"\0"):
            if not item:
                continue
            meta, path = item.split(b"\t", 1)
            _mode, kind, oid, size = meta.split()
            if kind == b"blob":  # a name that is not UTF-8 is kept, escaped (sources.names)
                entries[escape_name(path)] = (oid.decode(), int(size))
        return entries

    def _cat(self, repo_id: RepoId, oids: list[str]) -> dict[str, bytes]:
        if not oids:
            return {}
        out = self._git(
            repo_id, "cat-file", "--batch", stdin="".join(f"{o}\n" for o in oids).encode()
        )
        blobs: dict[str, bytes] = {}
        pos = 0
        for oid in oids:
            nl = out.index(b"\n", pos)
            parts = out[pos:nl].split()
            if len(parts) < 3:
                raise BadResponseError(f"{repo_id}: git object {oid} is missing")
            size = int(parts[2])
            blobs[oid] = out[nl + 1 : nl + 1 + size]
            pos = nl + 1 + size + 1
        return blobs

    def list_tree(self, repo_id: RepoId, sha: Sha) -> list[TreeEntry]:
        entries = self._entries(repo_id, sha)
        small = sorted({oid for oid, size in entries.values() if size <= MAX_POINTER})
        blobs = self._cat(repo_id, small)
        out = []
        for path in sorted(entries):
            oid, size = entries[path]
            m = _POINTER.match(blobs.get(oid, b""))
            if m:
                out.append(TreeEntry(path, oid, int(m.group(2)), m.group(1).decode()))
            else:
                out.append(TreeEntry(path, oid, size))
        return out

    def _lfs_object(self, repo_id: RepoId, oid: str) -> Path | None:
        rel = Path("lfs", "objects", oid[:2], oid[2:4], oid)
        dirs = [self.mirror(repo_id)]
        if self._local is not None:
            dirs += [self._local, self._local / ".git"]
        for d in dirs:
            if (d / rel).is_file():
                return d / rel
        return None

    def _content(self, repo_id: RepoId, sha: Sha, path: str) -> tuple[bytes | None, Path | None]:
        """(bytes of a plain blob, None) or (None, path of the LFS object)."""
        entry = self._entries(repo_id, sha).get(path)
        if entry is None:
            raise EntryNotFoundError(f"{repo_id}@{sha}: {path} does not exist")
        data = self._cat(repo_id, [entry[0]])[entry[0]]
        m = _POINTER.match(data) if len(data) <= MAX_POINTER else None
        if not m:
            return data, None
        obj = self._lfs_object(repo_id, m.group(1).decode())
        if obj is None:
            raise UnreadableArtifactError(
                f"{path} is an LFS pointer (sha256 {m.group(1).decode()}) and the object is not "
                "in the local LFS store; git sources read LFS content only from there"
            )
        return None, obj

    def read_file(self, repo_id: RepoId, sha: Sha, path: str, max_bytes: int) -> bytes:
        data, obj = self._content(repo_id, sha, path)
        if obj is not None:
            size = obj.stat().st_size
            if size > max_bytes:
                raise OversizedArtifactError(f"{path} is {size} bytes, over the cap of {max_bytes}")
            data = obj.read_bytes()
        assert data is not None
        if len(data) > max_bytes:
            raise OversizedArtifactError(
                f"{path} is {len(data)} bytes, over the cap of {max_bytes}"
            )
        self.bytes_received += len(data)
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
        size = expect.size if expect is not None else None
        data, obj = self._content(repo_id, sha, path)
        if data is not None:
            return parse_file_prefix(data, max_header_bytes, file_size=size)
        assert obj is not None
        with obj.open("rb") as fh:
            n = header_length(fh.read(8), max_header_bytes)
            raw = fh.read(n)
        if len(raw) < n:
            raise UnreadableArtifactError(f"{path}: header declares {n} bytes, file is shorter")
        self.bytes_received += 8 + n
        return parse_header(raw, file_size=size)

    def read_gguf_header(
        self,
        repo_id: RepoId,
        sha: Sha,
        path: str,
        max_header_bytes: int,
        *,
        expect: TreeEntry | None = None,
    ) -> GGUFHeader:
        size = expect.size if expect is not None else None
        data, obj = self._content(repo_id, sha, path)
        try:
            if data is not None:
                header = parse_gguf_bytes(data, max_bytes=max_header_bytes, file_size=size)
                self.bytes_received += min(len(data), header.data_offset)
                return header
            assert obj is not None
            got = 0

            def read(offset: int, n: int) -> bytes:
                nonlocal got
                with obj.open("rb") as fh:
                    fh.seek(offset)
                    chunk = fh.read(n)
                got += len(chunk)
                return chunk

            header = parse_gguf(read, max_bytes=max_header_bytes, file_size=size)
            self.bytes_received += got
            return header
        except ArtifactError as exc:
            raise type(exc)(f"{path}: {exc}") from exc
