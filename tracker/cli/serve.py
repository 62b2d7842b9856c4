"""CLI command: `tracker serve`, the OSV API, pages and push side under uvicorn.

The listening socket is bound before anything else starts, so an address in use or a host that
does not resolve is one `error:` line and exit 2 (a setting that cannot be used), never uvicorn's
log lines and its own exit code.
"""

from __future__ import annotations

import socket
from typing import Annotated

import structlog
import typer

from tracker.logs import wants_json
from tracker.settings import load_settings
from tracker.shared.errors import ConfigError


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
        """Serve the OSV API (/v1/query, /v1/querybatch, /v1/vulns/ID) until interrupted.

        It starts even while the store (PostgreSQL) cannot be reached: /readyz answers 503
        naming the store until it answers, /healthz 200 throughout. Logs (uvicorn's access and
        error records included) are JSON lines on stderr under systemd or when stderr is not a
        terminal."""
        import uvicorn

        from tracker.api import create_app
        from tracker.api.slowheaders import header_deadline_protocol
        from tracker.app import build

        settings = load_settings()
        sock = bind(host, port)
        try:
            # a store that cannot be reached now is asked again at each request: /readyz says
            # 503 (naming it) until it answers, /healthz 200 all along
            built = build(settings, store_may_be_down=True)
            try:
                bound = sock.getsockname()
                shown = f"[{bound[0]}]" if ":" in bound[0] else bound[0]
                url = f"http://{shown}:{bound[1]}"
                if wants_json(under_systemd=settings.under_systemd):  # a log line like the rest
                    structlog.get_logger(__name__).info("serve.listening", url=url)
                else:
                    typer.echo(f"serving {url} (Ctrl-C stops)", err=True)
                # log_config=None: uvicorn's records (access and error) go through
                # `tracker.logs` like every other library's, JSON on stderr under systemd
                # http: uvicorn's httptools or h11 protocol (TRACKER_HTTP_PARSER) answering an
                # unparsable request (a URL over 64 kB; under h11 a head over 16 kB) with a
                # problem document (`tracker.api.wire`), and closing a connection whose
                # request header is not in within TRACKER_HTTP_HEADER_TIMEOUT_S
                http = header_deadline_protocol(
                    settings.http_header_timeout_s, settings.http_parser
                )
                config = uvicorn.Config(
                    create_app(built), log_level="info", log_config=None, http=http
                )
                uvicorn.Server(config).run(sockets=[sock])
            finally:
                built.close()
        finally:
            sock.close()
