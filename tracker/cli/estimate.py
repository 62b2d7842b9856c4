"""CLI commands: estimate (owned by its stage; registered by tracker.cli)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add this module's commands to `app`."""
