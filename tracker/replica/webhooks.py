"""The replica's Hub webhooks: when a ref of one of its repos moves, POST a `repo.content` event.

Like the Hub (hub-docs `webhooks.md`, `../shared/HUB-PROTOCOL.md` §11): an HTTP POST of the
version-3 JSON payload (`event {action: update, scope: repo.content}`, `repo {type, name, id,
private, url, owner, headSha}`, `updatedRefs [{ref, oldSha, newSha}]`, `webhook {id, version: 3}`),
with the secret sent verbatim in `X-Webhook-Secret`. Commits land in the replica's repos through
git itself (`tracker.replica.repos.commit`, `update-ref`, any git push), not through the HTTP API,
so a watcher thread reads every repo's refs every `interval_s` (the loose ref files and
`packed-refs`, no git process) and sends one event per repo whose refs changed. `sent` records
each delivery's repo, refs and HTTP status (or error).
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx

from tracker.shared.domain import is_full_sha

Refs = dict[str, str]


@dataclass(frozen=True)
class HubWebhook:
    """Where the replica sends its webhooks, and the secret (None: no X-Webhook-Secret header)."""

    url: str
    secret: str | None = None


@dataclass(frozen=True)
class Sent:
    """One webhook the replica sent: the repo, its updated refs and the answer (status or error)."""

    at: float
    repo: str
    updated_refs: tuple[tuple[str, str | None, str | None], ...]
    status: int | None
    error: str | None


def read_refs(git_dir: Path) -> Refs:
    """The refs of a bare repository (`refs/...` → sha), loose files over `packed-refs`."""
    refs: Refs = {}
    packed = git_dir / "packed-refs"
    try:
        lines = packed.read_text().splitlines()
    except FileNotFoundError:
        lines = []
    for line in lines:
        sha, _, name = line.partition(" ")
        if is_full_sha(sha) and name.startswith("refs/"):
            refs[name] = sha
    base = git_dir / "refs"
    for path in base.rglob("*"):
        if path.is_file() and not path.name.endswith(".lock"):  # git's half-written ref
            try:
                sha = path.read_text().strip()
            except OSError:  # being replaced right now: read it next round
                continue
            if is_full_sha(sha):
                refs["refs/" + path.relative_to(base).as_posix()] = sha
    return refs


def repos_under(root: Path) -> dict[str, Path]:
    """`org/name` → git dir of every bare repository under `root`."""
    out: dict[str, Path] = {}
    for head in root.glob("*/*/HEAD"):
        git_dir = head.parent
        if (git_dir / "objects").is_dir():
            out[f"{git_dir.parent.name}/{git_dir.name}"] = git_dir
    return out


def payload(
    repo: str, before: Refs, after: Refs, *, base_url: str, hook_id: str
) -> dict[str, object]:
    """The Hub's version-3 `repo.content` payload for the refs that moved from `before` to `after`."""
    updated = [
        {"ref": ref, "oldSha": before.get(ref), "newSha": after.get(ref)}
        for ref in sorted(set(before) | set(after))
        if before.get(ref) != after.get(ref)
    ]
    org = repo.split("/")[0]
    return {
        "event": {"action": "update", "scope": "repo.content"},
        "repo": {
            "type": "model",
            "name": repo,
            "id": hashlib.sha1(repo.encode()).hexdigest()[:24],
            "private": False,
            "url": {"web": f"{base_url}/{repo}", "api": f"{base_url}/api/models/{repo}"},
            "owner": {"id": hashlib.sha1(org.encode()).hexdigest()[:24]},
            "headSha": after.get("refs/heads/main"),
        },
        "updatedRefs": updated,
        "webhook": {"id": hook_id, "version": 3},
    }


class RefWatcher:
    """Watches the repos under `root` and sends each ref change to every hook (see module doc)."""

    def __init__(
        self,
        root: Path,
        hooks: Sequence[HubWebhook],
        *,
        base_url: str,
        interval_s: float = 0.05,
        timeout_s: float = 10.0,
    ) -> None:
        self.root = Path(root)
        self.hooks = tuple(hooks)
        self.base_url = base_url
        self.interval_s = interval_s
        self._client = httpx.Client(timeout=timeout_s, trust_env=False)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._sent: list[Sent] = []
        self._known: dict[str, Refs] = {}

    @property
    def sent(self) -> list[Sent]:
        with self._lock:
            return list(self._sent)

    def start(self) -> None:
        self._known = self._scan()
        self._thread = threading.Thread(target=self._run, daemon=True, name="replica-webhooks")
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=15)
        self._client.close()

    def _scan(self) -> dict[str, Refs]:
        return {repo: read_refs(git_dir) for repo, git_dir in repos_under(self.root).items()}

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            current = self._scan()
            for repo in sorted(current):
                before, after = self._known.get(repo, {}), current[repo]
                if before != after:
                    self._send(repo, before, after)
            self._known = current

    def _send(self, repo: str, before: Refs, after: Refs) -> None:
        for i, hook in enumerate(self.hooks):
            body = payload(repo, before, after, base_url=self.base_url, hook_id=f"replica-{i}")
            headers = {"content-type": "application/json", "user-agent": "tracker-hub-replica/1"}
            if hook.secret is not None:
                headers["x-webhook-secret"] = hook.secret
            status: int | None = None
            error: str | None = None
            try:
                status = self._client.post(
                    hook.url, content=json.dumps(body).encode(), headers=headers
                ).status_code
            except httpx.HTTPError as exc:
                error = f"{type(exc).__name__}: {exc}"
            refs = tuple(
                (str(u["ref"]), u["oldSha"], u["newSha"])
                for u in body["updatedRefs"]  # type: ignore[attr-defined]
            )
            with self._lock:
                self._sent.append(Sent(time.monotonic(), repo, refs, status, error))
