"""Repo sources: where revisions and file bytes come from (the Hub, a git URL or path, a fake).

Every source implements `RepoSource`; only `sources/hub.py` imports huggingface_hub. Sources raise
only tracker.errors types (SourceError subtree); transient failures are retried at this edge.
"""

from __future__ import annotations

from typing import Protocol

from tracker.domain import Commit, RepoId, SafetensorsHeader, Sha, TreeEntry


class RepoSource(Protocol):
    """Read-only access to one kind of repo host.

    Invariants: `list_commits` returns every commit reachable from `ref` (all pages), newest
    first, as the Hub lists them; `list_tree` is the full recursive file listing at a commit;
    `read_file` never returns more than `max_bytes` (it raises OversizedArtifactError instead);
    `read_safetensors_header` reads only the header (HTTP Range / partial read), never the weights.
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
        self, repo_id: RepoId, sha: Sha, path: str, max_header_bytes: int
    ) -> SafetensorsHeader:
        """The parsed header of the .safetensors file `path` at `sha`."""
        ...
