"""The preflight of an ingested revision over HTTP (issue 15 item 4): the answer stored with the
revision (remote code per transformers version, capacity from bytes, LoRA targets), exactly as
`tracker poll` stored it; `null` with the reason when it could not be run. Behind `require_read`,
served through `tracker.api.caching`; `no-cache` even at a full sha, since the answer depends on
the watchlist's `preflight:` settings it was computed under (a 304 costs one hash).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field

from tracker.api.auth import require_read
from tracker.api.caching import LIST, NOT_MODIFIED, cached_json
from tracker.api.params import Name, Org, Rev, repo_id_of
from tracker.api.problem import Problem

router = APIRouter(tags=["store"], dependencies=[Depends(require_read)])


class PreflightOut(BaseModel):
    """The stored preflight of one revision."""

    model_config = ConfigDict(extra="forbid")

    repo: str
    sha: str = Field(description="The revision's full commit sha.")
    preflight: dict[str, Any] | None = Field(
        description="remote_code, capacity (+ capacity_error), lora (+ lora_error), settings: "
        "the JSON of `tracker preflight --json` without its `target`; null when it could not run."
    )
    error: str | None = Field(description="Why the preflight could not run (null when it ran).")


@router.get(
    "/v1/repos/{org}/{name}/revisions/{rev}/preflight",
    response_model=PreflightOut,
    responses=NOT_MODIFIED,
    summary="The preflight stored with an ingested revision (remote code, capacity, LoRA targets)",
)
def preflight_at(org: Org, name: Name, rev: Rev, request: Request) -> Response:
    app = request.app.state.app
    repo_id = repo_id_of(org, name)
    sha = app.store.resolve(repo_id, rev)
    stored = app.preflight.get(repo_id, sha)
    if stored is None:
        raise Problem(
            404,
            "no-preflight",
            f"{repo_id}@{sha[:12]}: no preflight is stored for this revision (not analysed yet, "
            "or ingested before preflight ran)",
        )
    body = {
        "repo": repo_id,
        "sha": sha,
        "preflight": stored.preflight.to_json() if stored.preflight is not None else None,
        "error": stored.error,
    }
    return cached_json(request, body, LIST)
