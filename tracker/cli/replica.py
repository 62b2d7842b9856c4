"""CLI commands: `tracker replica serve`, the local Hub replica over a directory of git repos."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import typer

from tracker.shared.errors import ConfigError


def serve(
    root: Path = typer.Option(..., "--root", help="Directory holding ORG/NAME git repositories."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to bind."),
    port: int = typer.Option(0, "--port", help="Port to bind (0: a free port)."),
    as_json: bool = typer.Option(False, "--json", help='Print {"url": ...} as JSON.'),
    webhook_url: str | None = typer.Option(
        None,
        "--webhook-url",
        help="Send the Hub's repo.content webhook here whenever a repo's refs change.",
    ),
    webhook_secret: str | None = typer.Option(
        None, "--webhook-secret", help="Sent verbatim in X-Webhook-Secret (as the Hub does)."
    ),
) -> None:
    """Serve the repositories under ROOT the way the Hub does; print the URL; run until interrupted."""
    from tracker.replica import Replica
    from tracker.replica.webhooks import HubWebhook

    if not root.is_dir():
        raise ConfigError(f"replica root {root} is not a directory")
    if not 0 <= port <= 65535:
        raise ConfigError(f"port {port} is out of range")
    if webhook_secret is not None and webhook_url is None:
        raise ConfigError("--webhook-secret needs --webhook-url")
    if webhook_url is not None and not webhook_url.startswith(("http://", "https://")):
        raise ConfigError(f"--webhook-url {webhook_url!r} is not an http(s) URL")
    if webhook_secret is not None and not webhook_secret.isascii():
        raise ConfigError("--webhook-secret: the Hub sends ASCII secrets only")
    hooks = [HubWebhook(webhook_url, webhook_secret)] if webhook_url else []
    replica = Replica(root, host=host, port=port, webhooks=hooks)
    try:
        replica.start()
    except OSError as exc:
        raise ConfigError(f"cannot bind {host}:{port}: {exc}") from exc
    if as_json:
        typer.echo(json.dumps({"url": replica.url, "root": str(root)}))
    else:
        typer.echo(
            f"Hub replica for {root} at {replica.url} (HF_ENDPOINT={replica.url}); Ctrl-C stops"
        )

    def _stop(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    try:
        replica.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        replica.stop()


def register(app: typer.Typer) -> None:
    """Add the `replica` command group (`replica serve`) to `app`."""
    group = typer.Typer(help="The local Hub replica.", no_args_is_help=True)
    group.command("serve")(serve)
    app.add_typer(group, name="replica")
