"""CLI command: `tracker serve`, the OSV API, pages and push side under uvicorn.

The listening socket is bound before anything else starts, so an address in use or a host that
does not resolve is one `error:` line and exit 2 (a setting that cannot be used), never uvicorn's
log lines and its own exit code.
"""

from __future__ import annotations

import socket
from typing import Annotated

import typer

from tracker.errors import ConfigError
from tracker.settings import load_settings


def bind(host: str, port: int) -> socket.socket:
    """A TCP socket bound to `host`:`port` (the first address `host` resolves to); ConfigError
    (one line) when the host does not resolve or the address cannot be bound."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise ConfigError(f"--host {host!r} does not resolve: {exc}") from exc
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)  # connections queue from now on, while the app starts
    except OSError as exc:
        sock.close()
        raise ConfigError(f"cannot bind {host}:{port}: {exc.strerror or exc}") from exc
    return sock


def register(app: typer.Typer) -> None:
    """Add the `serve` command to `app`."""

    @app.command("serve")
    def serve(
        host: Annotated[str, typer.Option(help="Address to bind.")] = "127.0.0.1",
        port: Annotated[
            int, typer.Option(help="Port (0: any free port).", min=0, max=65535)
        ] = 8080,
    ) -> None:
        """Serve the OSV API (/v1/query, /v1/querybatch, /v1/vulns/ID) until interrupted."""
        import uvicorn

        from tracker.api import create_app
        from tracker.app import build

        settings = load_settings()
        sock = bind(host, port)
        try:
            built = build(settings)
            try:
                bound = sock.getsockname()
                shown = f"[{bound[0]}]" if ":" in bound[0] else bound[0]
                typer.echo(f"serving http://{shown}:{bound[1]} (Ctrl-C stops)", err=True)
                config = uvicorn.Config(create_app(built), log_level="info")
                uvicorn.Server(config).run(sockets=[sock])
            finally:
                built.close()
        finally:
            sock.close()
