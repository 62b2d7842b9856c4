"""The push side's routes: webhook subscriptions, the Hub's webhook, and a manual poll trigger.

- `/v1/subscriptions` (list, create), `/v1/subscriptions/{id}` (read, delete), its `deliveries`
  (the delivery log; `deliveries/{webhook_id}/redeliver` sends one again), `rotate` (a new
  signing secret), `enable` and `ping` (a signed test event now): every one needs a write token
  (`tracker.api.auth.require_write`), reads included, since they show where deliveries go.
  Errors are problem documents (`tracker.api.problem`; 401 carries `WWW-Authenticate: Bearer`).
- `POST /v1/repos/{org}/{name}/poll`: queue a poll of a watched repo now (write token).
- `POST /v1/hooks/huggingface`: the Hub's webhook. Authenticated by `X-Webhook-Secret` (compared
  in constant time with `TRACKER_HUB_WEBHOOK_SECRET`; unset: 404). A `repo.content` event of a
  watched repo queues a poll of it; anything else is acknowledged and ignored. The daemon
  (`tracker poll`) serves the queue (`tracker.store.webhooks`).
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Annotated, Any, Literal, Protocol

from fastapi import APIRouter, Depends, Header, Path, Query, Request, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool

from tracker.api.auth import REALM, require_write
from tracker.api.params import REPO_PART, Name, Org
from tracker.api.problem import Problem
from tracker.settings import Settings
from tracker.shared.domain import Artifact, Clock, RepoId, Severity, parse_repo_id
from tracker.shared.errors import ConfigError, InvalidRepoIdError, StoreNotFoundError
from tracker.store import Store
from tracker.store.webhooks import WebhookStore
from tracker.watchlist import Watchlist
from tracker.webhooks import subscriptions as subs
from tracker.webhooks.hub import (
    HUB_PAYLOAD,
    BadHubPayload,
    HubEvent,
    read_event,
    secret_matches,
)

MAX_HOOK_BODY = 1_000_000
EventType = Literal[
    "revision.advisories", "advisory.withdrawn", "advisory.reopened", "advisory.restored"
]
"""`tracker.webhooks.events.EVENT_TYPES`, for the schema."""


class HooksApp(Protocol):
    """What these routes read from `tracker.app.App` (`create_app` keeps it in `state.app`)."""

    @property
    def settings(self) -> Settings: ...

    @property
    def store(self) -> Store: ...

    @property
    def webhooks(self) -> WebhookStore: ...

    @property
    def clock(self) -> Clock: ...

    def load_watchlist(self) -> Watchlist: ...


class Ctx:
    """The App, for a route (`Depends(ctx)`)."""

    def __init__(self, app: HooksApp) -> None:
        self.app = app


def ctx(request: Request) -> Ctx:
    return Ctx(request.app.state.app)


router = APIRouter(tags=["webhooks"])
write = [Depends(require_write)]


SubscriptionId = Annotated[
    int, Path(ge=1, le=2_147_483_647, description="The subscription's id.")
]  # within every store's integer column (PostgreSQL's is 32-bit)


class NewSubscription(BaseModel):
    """A subscription to create."""

    model_config = ConfigDict(extra="forbid")

    url: str = Field(
        max_length=2000,
        pattern=r"^[Hh][Tt][Tt][Pp][Ss]?://[^\s/?#]+",
        description="The receiver's http(s) URL.",
    )
    repos: list[str] = Field(
        default_factory=lambda: ["*"], max_length=100, description="Repo globs, e.g. 'org/*'."
    )
    min_severity: Severity = Severity.LOW
    kinds: list[Artifact] = Field(
        default_factory=list, description="Change kinds (advisory groups); empty: all."
    )
    events: list[EventType] = Field(
        default_factory=list, description="Event types it receives; empty: all."
    )
    team: str | None = Field(
        default=None,
        max_length=200,
        description="Only the advisories that affect this watchlist team (today or at its "
        "next upgrade), each with the reason in `data.team`; null: no team filter.",
    )
    secret: str | None = Field(
        default=None, description="Your own whsec_ secret (default: a new one, answered once)."
    )
    description: str = Field(default="", max_length=500)


class Rotation(BaseModel):
    """A secret rotation: the old secrets keep signing (next to the new one) for `grace_s`."""

    model_config = ConfigDict(extra="forbid")

    grace_s: int = Field(default=86_400, ge=0, le=30 * 86_400)
    secret: str | None = None


class SubscriptionOut(BaseModel):
    id: int
    url: str
    repos: list[str]
    min_severity: str
    kinds: list[str]
    events: list[str]
    team: str | None
    description: str
    enabled: bool
    disabled_reason: str | None
    secrets_in_use: int
    created_at: str
    updated_at: str
    secret: str | None = Field(default=None, description="Only in the answer that made it.")


class AttemptOut(BaseModel):
    n: int
    at: str
    duration_ms: int
    status: int | None
    error: str | None
    outcome: str


class DeliveryOut(BaseModel):
    webhook_id: str
    subscription: int
    repo: str
    commit: str
    event: str
    state: str
    attempts: list[AttemptOut]
    next_attempt_at: str | None
    created_at: str
    finished_at: str | None
    last_status: int | None
    last_error: str | None


class PingOut(BaseModel):
    """What a ping's receiver answered."""

    webhook_id: str
    subscription: int
    url: str
    status: int | None
    error: str | None
    delivered: bool


class Queued(BaseModel):
    """The answer to a poll request or a Hub webhook."""

    repo: str | None
    queued: bool
    detail: str


def _found(read: Any, subscription_id: int) -> Any:
    """`read(subscription_id)`, or 404 when there is no such subscription."""
    try:
        return read(subscription_id)
    except StoreNotFoundError as exc:
        raise Problem(404, "not-found", str(exc)) from None


def _bad(exc: ConfigError) -> Problem:
    return Problem(422, "invalid-subscription", str(exc).splitlines()[0])


@router.get(
    "/v1/subscriptions",
    dependencies=write,
    response_model=list[SubscriptionOut],
    summary="Every webhook subscription (secrets are never listed)",
)
def list_subscriptions(c: Ctx = Depends(ctx)) -> Any:
    return [subs.subscription_json(s) for s in c.app.webhooks.subscriptions()]


@router.post(
    "/v1/subscriptions",
    dependencies=write,
    status_code=201,
    response_model=SubscriptionOut,
    summary="Subscribe a URL to signed deliveries of the matching advisories",
)
def create_subscription(body: NewSubscription, c: Ctx = Depends(ctx)) -> Any:
    try:
        sub, secret = subs.add(
            c.app.webhooks,
            c.app.settings,
            url=body.url,
            repos=body.repos,
            min_severity=body.min_severity.value,
            kinds=[k.value for k in body.kinds],
            events=list(body.events),
            team=body.team,
            teams=[t.name for t in c.app.load_watchlist().teams] if body.team is not None else [],
            secret=body.secret,
            description=body.description,
            now=c.app.clock(),
        )
    except ConfigError as exc:
        raise _bad(exc) from None
    return subs.subscription_json(sub, secret=secret)


@router.get(
    "/v1/subscriptions/{subscription_id}",
    dependencies=write,
    response_model=SubscriptionOut,
    summary="One subscription",
)
def get_subscription(subscription_id: SubscriptionId, c: Ctx = Depends(ctx)) -> Any:
    return subs.subscription_json(_found(c.app.webhooks.subscription, subscription_id))


@router.delete(
    "/v1/subscriptions/{subscription_id}",
    dependencies=write,
    status_code=204,
    response_class=Response,
    summary="Delete a subscription and its delivery log",
)
def delete_subscription(subscription_id: SubscriptionId, c: Ctx = Depends(ctx)) -> Response:
    _found(c.app.webhooks.remove_subscription, subscription_id)
    return Response(status_code=204)


@router.get(
    "/v1/subscriptions/{subscription_id}/deliveries",
    dependencies=write,
    response_model=list[DeliveryOut],
    summary="The delivery log: newest delivery first, each with every attempt",
)
def deliveries(
    subscription_id: SubscriptionId,
    limit: Annotated[int, Query(ge=1, le=1000, description="The newest this many.")] = 50,
    c: Ctx = Depends(ctx),
) -> Any:
    return _found(lambda i: subs.log_json(c.app.webhooks, i, limit), subscription_id)


@router.post(
    "/v1/subscriptions/{subscription_id}/rotate",
    dependencies=write,
    response_model=SubscriptionOut,
    summary="A new signing secret (answered once); the old one signs too until the grace ends",
)
def rotate(subscription_id: SubscriptionId, body: Rotation, c: Ctx = Depends(ctx)) -> Any:
    _found(c.app.webhooks.subscription, subscription_id)
    try:
        sub, secret = subs.rotate(
            c.app.webhooks,
            subscription_id,
            secret=body.secret,
            grace=timedelta(seconds=body.grace_s),
            now=c.app.clock(),
        )
    except ConfigError as exc:
        raise _bad(exc) from None
    return subs.subscription_json(sub, secret=secret)


@router.post(
    "/v1/subscriptions/{subscription_id}/enable",
    dependencies=write,
    response_model=SubscriptionOut,
    summary="Enable a subscription again (after a 410 Gone disabled it)",
)
def enable(subscription_id: SubscriptionId, c: Ctx = Depends(ctx)) -> Any:
    store = c.app.webhooks
    try:
        subs.check_target(_found(store.subscription, subscription_id).url, c.app.settings)
    except ConfigError as exc:
        raise _bad(exc) from None
    return subs.subscription_json(store.set_enabled(subscription_id, True, None, c.app.clock()))


@router.post(
    "/v1/subscriptions/{subscription_id}/ping",
    dependencies=write,
    response_model=PingOut,
    summary="Send a signed test event (webhook.ping) now; the receiver's answer (not logged)",
)
def ping(subscription_id: SubscriptionId, c: Ctx = Depends(ctx)) -> Any:
    return _found(
        lambda i: subs.ping(c.app.webhooks, c.app.settings, c.app.clock, i), subscription_id
    )


@router.post(
    "/v1/subscriptions/{subscription_id}/deliveries/{webhook_id}/redeliver",
    dependencies=write,
    response_model=DeliveryOut,
    summary="Send a past delivery again now (same webhook-id and body, signed anew)",
    responses={409: {"description": "Still pending, or the subscription is disabled"}},
)
def redeliver(
    subscription_id: SubscriptionId,
    webhook_id: Annotated[str, Path(min_length=1, max_length=64, pattern=r"^msg_[a-z0-9]+$")],
    c: Ctx = Depends(ctx),
) -> Any:
    app = c.app
    try:
        return subs.redeliver(
            app.webhooks, app.settings, app.clock, webhook_id, subscription_id=subscription_id
        )
    except StoreNotFoundError as exc:
        raise Problem(404, "not-found", str(exc)) from None
    except ConfigError as exc:
        raise Problem(409, "conflict", str(exc)) from None


def _queue(c: Ctx, repo_id: RepoId, reason: str) -> Queued:
    if c.app.webhooks.request_poll(repo_id, reason, c.app.clock()):
        return Queued(repo=repo_id, queued=True, detail=f"a poll of {repo_id} is queued")
    return Queued(repo=repo_id, queued=False, detail=f"a poll of {repo_id} was already queued")


def _watched(c: Ctx, repo_id: RepoId) -> bool:
    return any(r.repo_id == repo_id for r in c.app.load_watchlist().repos)


@router.post(
    "/v1/repos/{org}/{name}/poll",
    dependencies=write,
    status_code=202,
    response_model=Queued,
    summary="Poll a watched repo now (the polling daemon serves the queue)",
)
def poll_now(org: Org, name: Name, c: Ctx = Depends(ctx)) -> Queued:
    try:
        repo_id = parse_repo_id(f"{org}/{name}")
    except InvalidRepoIdError as exc:
        raise Problem(400, "invalid-repo-id", str(exc)) from None
    if not _watched(c, repo_id):
        raise Problem(404, "not-watched", f"{repo_id} is not on the watchlist")
    return _queue(c, repo_id, "manual")


_PART = REPO_PART.removeprefix("^").removesuffix("$")


@router.post(
    "/v1/hooks/huggingface",
    openapi_extra={
        "requestBody": {"required": True, "content": {"application/json": {"schema": HUB_PAYLOAD}}}
    },
    status_code=202,
    response_model=Queued,
    responses={200: {"model": Queued, "description": "Acknowledged and ignored (see detail)"}},
    summary="The Hub's webhook: a repo.content event of a watched repo queues a poll of it",
)
async def hub_webhook(
    request: Request,
    x_webhook_secret: str | None = Header(default=None),
    c: Ctx = Depends(ctx),
) -> Any:
    configured = c.app.settings.hub_webhook_secret
    if configured is None:
        raise Problem(
            404, "hub-webhooks-off", "Hub webhooks are off: set TRACKER_HUB_WEBHOOK_SECRET"
        )
    if x_webhook_secret is None:
        raise Problem(
            401, "unauthorized", "X-Webhook-Secret is missing", headers={"WWW-Authenticate": REALM}
        )
    if not secret_matches(x_webhook_secret, configured.get_secret_value()):
        raise Problem(403, "forbidden", "X-Webhook-Secret is not valid")
    raw = await request.body()
    if len(raw) > MAX_HOOK_BODY:
        raise Problem(413, "too-large", f"a Hub webhook is at most {MAX_HOOK_BODY} bytes")
    try:
        event = read_event(json.loads(raw or b"null"))
    except (UnicodeDecodeError, json.JSONDecodeError, BadHubPayload) as exc:
        raise Problem(400, "invalid-request", f"not a Hub webhook payload: {exc}") from None
    if not event.content:
        answer = Queued(
            repo=event.repo_id, queued=False, detail=f"ignored: {event.ignored_because}"
        )
        return JSONResponse(answer.model_dump(), status_code=200)
    answer = await run_in_threadpool(_hint, c, event)
    return JSONResponse(answer.model_dump(), status_code=202 if answer.queued else 200)


def _hint(c: Ctx, event: HubEvent) -> Queued:
    """Queue a poll for a content event, unless it cannot matter: the repo is not watched, the
    event does not move the watched ref, or it moves it to the commit already ingested and
    analysed (a replay)."""
    repo = event.repo_id
    assert repo is not None
    watched = next((r for r in c.app.load_watchlist().repos if r.repo_id == repo), None)
    if watched is None:
        return Queued(repo=repo, queued=False, detail=f"ignored: {repo} is not watched")
    moves, new_sha = event.moves(watched.ref)
    if not moves:
        return Queued(
            repo=repo, queued=False, detail=f"ignored: the watched ref {watched.ref} did not move"
        )
    if new_sha is not None and _have(c, repo, new_sha):
        return Queued(
            repo=repo, queued=False, detail=f"ignored: {new_sha} is already ingested and analysed"
        )
    return _queue(c, repo, "hub-webhook")


def _have(c: Ctx, repo: RepoId, sha: str) -> bool:
    """Whether `sha` is the repo's ingested head with nothing left to analyse."""
    try:
        state = c.app.store.repo_state(repo)
        return state.cursor == sha and not c.app.store.pending_analysis(repo)
    except StoreNotFoundError:
        return False
