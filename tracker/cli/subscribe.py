"""CLI commands: `tracker subscribe add|list|remove|log|rotate|enable|ping|redeliver`, the webhook
subscriptions."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from tracker.app import build
from tracker.settings import load_settings
from tracker.shared.errors import ConfigError
from tracker.watchlist import parse_interval
from tracker.webhooks import subscriptions as subs

subscribe_app = typer.Typer(
    help="Webhook subscriptions: signed deliveries of each revision's advisories.",
    no_args_is_help=True,
)


@subscribe_app.command("add")
def add(
    url: Annotated[str, typer.Argument(help="The receiver's http(s) URL.")],
    repo: Annotated[
        list[str] | None,
        typer.Option("--repo", help="Repo glob, e.g. 'meta-llama/*' (repeatable; default: all)."),
    ] = None,
    min_severity: Annotated[
        str, typer.Option("--min-severity", help="low, moderate, high or critical.")
    ] = "low",
    kind: Annotated[
        list[str] | None,
        typer.Option(
            "--kind",
            help="Change kind (advisory group), e.g. chat_template (repeatable; default: all).",
        ),
    ] = None,
    event: Annotated[
        list[str] | None,
        typer.Option(
            "--event",
            help="Event type, e.g. advisory.withdrawn (repeatable; default: all): "
            "revision.advisories, advisory.withdrawn, advisory.reopened, advisory.restored.",
        ),
    ] = None,
    team: Annotated[
        str | None,
        typer.Option(
            "--team",
            help="Only the advisories that affect this watchlist team (today or at its next "
            "upgrade), each with the reason.",
        ),
    ] = None,
    secret: Annotated[
        str | None, typer.Option("--secret", help="Your own whsec_ secret (default: a new one).")
    ] = None,
    description: Annotated[str, typer.Option("--description", help="A note for humans.")] = "",
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Subscribe URL to the advisories of the matching repos; prints the signing secret once."""
    app = build(load_settings())
    try:
        teams = [t.name for t in app.load_watchlist().teams] if team is not None else []
        sub, chosen = subs.add(
            app.webhooks,
            app.settings,
            url=url,
            repos=repo or [],
            min_severity=min_severity,
            kinds=kind or [],
            events=event or [],
            team=team,
            teams=teams,
            secret=secret,
            description=description,
            now=app.clock(),
        )
    finally:
        app.close()
    if as_json:
        typer.echo(json.dumps(subs.subscription_json(sub, secret=chosen), indent=2))
        return
    typer.echo(f"subscription {sub.id}: {sub.url}")
    typer.echo(f"secret (shown once; verify webhook-signature with it): {chosen}")


@subscribe_app.command("list")
def list_(as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False) -> None:
    """Every subscription (secrets are never listed)."""
    app = build(load_settings())
    try:
        rows = [subs.subscription_json(s) for s in app.webhooks.subscriptions()]
    finally:
        app.close()
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    table = Table(title="subscriptions")
    for col in ("id", "url", "repos", "min severity", "kinds", "events", "team", "state"):
        table.add_column(col)
    for r in rows:
        state = "enabled" if r["enabled"] else f"disabled: {r['disabled_reason'] or ''}"
        table.add_row(
            str(r["id"]),
            r["url"],
            " ".join(r["repos"]),
            r["min_severity"],
            " ".join(r["kinds"]) or "all",
            " ".join(r["events"]) or "all",
            r["team"] or "any",
            state,
        )
    Console(width=200).print(table)


@subscribe_app.command("remove")
def remove(subscription_id: Annotated[int, typer.Argument(help="The subscription's id.")]) -> None:
    """Delete a subscription with its delivery log (exit 3 if there is none)."""
    app = build(load_settings())
    try:
        app.webhooks.remove_subscription(subscription_id)
    finally:
        app.close()
    typer.echo(f"removed subscription {subscription_id}")


@subscribe_app.command("log")
def log(
    subscription_id: Annotated[int, typer.Argument(help="The subscription's id.")],
    limit: Annotated[int, typer.Option("--limit", min=1, help="Newest deliveries shown.")] = 50,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """The delivery log: each delivery (newest first) with every attempt, status and error."""
    app = build(load_settings())
    try:
        rows = subs.log_json(app.webhooks, subscription_id, limit)
    finally:
        app.close()
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    table = Table(title=f"deliveries of subscription {subscription_id}")
    for col in (
        "webhook-id",
        "repo",
        "commit",
        "state",
        "attempt",
        "at",
        "status",
        "outcome / error",
    ):
        table.add_column(col)
    for d in rows:
        attempts = d["attempts"] or [None]
        for i, a in enumerate(attempts):
            first = i == 0
            table.add_row(
                d["webhook_id"] if first else "",
                d["repo"] if first else "",
                d["commit"][:12] if first else "",
                d["state"] if first else "",
                str(a["n"]) if a else "-",
                a["at"] if a else (d["next_attempt_at"] or ""),
                "" if a is None or a["status"] is None else str(a["status"]),
                "" if a is None else (a["outcome"] + (f": {a['error']}" if a["error"] else "")),
            )
    Console(width=220).print(table)


@subscribe_app.command("rotate")
def rotate(
    subscription_id: Annotated[int, typer.Argument(help="The subscription's id.")],
    grace: Annotated[
        str, typer.Option("--grace", help="How long the old secret keeps signing too (e.g. 24h).")
    ] = "24h",
    secret: Annotated[
        str | None, typer.Option("--secret", help="Your own new whsec_ secret.")
    ] = None,
) -> None:
    """A new signing secret; deliveries carry both signatures until the grace period ends."""
    from datetime import timedelta

    try:
        seconds = parse_interval(grace)
    except ValueError as exc:
        raise ConfigError(f"--grace: {exc}") from exc
    app = build(load_settings())
    try:
        sub, chosen = subs.rotate(
            app.webhooks,
            subscription_id,
            secret=secret,
            grace=timedelta(seconds=seconds),
            now=app.clock(),
        )
    finally:
        app.close()
    typer.echo(f"subscription {sub.id}: new secret (shown once): {chosen}")


@subscribe_app.command("enable")
def enable(subscription_id: Annotated[int, typer.Argument(help="The subscription's id.")]) -> None:
    """Enable a subscription again (after a 410 Gone disabled it)."""
    app = build(load_settings())
    try:
        subs.check_target(app.webhooks.subscription(subscription_id).url, app.settings)
        app.webhooks.set_enabled(subscription_id, True, None, app.clock())
    finally:
        app.close()
    typer.echo(f"enabled subscription {subscription_id}")


@subscribe_app.command("ping")
def ping(
    subscription_id: Annotated[int, typer.Argument(help="The subscription's id.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Send a signed test event (webhook.ping) to the subscription's URL now; exit 1 unless
    it answers 2xx. Nothing is queued or logged."""
    app = build(load_settings())
    try:
        out = subs.ping(app.webhooks, app.settings, app.clock, subscription_id)
    finally:
        app.close()
    if as_json:
        typer.echo(json.dumps(out, indent=2))
    else:
        said = out["error"] or f"HTTP {out['status']}"
        typer.echo(f"ping {out['webhook_id']} to {out['url']}: {said}")
    if not out["delivered"]:
        raise typer.Exit(1)


@subscribe_app.command("redeliver")
def redeliver(
    webhook_id: Annotated[
        str, typer.Argument(help="The delivery's webhook-id (msg_…, from `subscribe log`).")
    ],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Send a past delivery again now, with the same webhook-id and body, signed anew; the
    attempt joins its log. Exit 1 unless it is delivered (a failed attempt is retried by the
    daemon)."""
    app = build(load_settings())
    try:
        out = subs.redeliver(app.webhooks, app.settings, app.clock, webhook_id)
    finally:
        app.close()
    if as_json:
        typer.echo(json.dumps(out, indent=2))
    else:
        last = out["attempts"][-1]
        said = last["error"] or f"HTTP {last['status']}"
        typer.echo(
            f"delivery {webhook_id} sent again (attempt {last['n']}): {said}; {out['state']}"
        )
    if out["state"] != "delivered":
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Add the `subscribe` command group to `app`."""
    app.add_typer(subscribe_app, name="subscribe")
