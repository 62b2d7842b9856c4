"""CLI command: `tracker serve`, the OSV API (and later feeds) under uvicorn."""

from __future__ import annotations

from typing import Annotated

import typer

from tracker.settings import load_settings


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

        built = build(load_settings())
        try:
            uvicorn.run(create_app(built), host=host, port=port, log_level="info")
        finally:
            built.close()
