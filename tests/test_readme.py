"""The README opens with the two set-up commands and documents every CLI command."""

from __future__ import annotations

from pathlib import Path

import typer.main

from tracker import cli

README = Path(__file__).resolve().parents[1] / "README.md"


def _command_paths() -> list[str]:
    cli._register_all()
    root = typer.main.get_command(cli.app)
    paths: list[str] = []

    def walk(cmd: object, prefix: str) -> None:
        commands = getattr(cmd, "commands", None)  # groups have sub-commands
        if commands:
            for name, sub in sorted(commands.items()):
                walk(sub, f"{prefix} {name}")
        else:
            paths.append(prefix)

    walk(root, "tracker")
    return paths


def test_readme_opens_with_make_demo_and_make_test() -> None:
    text = README.read_text()
    first_block = text.split("```", 2)[1]
    commands = [line.strip() for line in first_block.splitlines()[1:] if line.strip()]
    assert commands == ["make demo", "make test"]


def test_readme_documents_every_command() -> None:
    text = README.read_text()
    paths = _command_paths()
    assert len(paths) >= 10  # the CLI is registered, not empty
    missing = [p for p in paths if f"`{p}" not in text]
    assert not missing, f"README does not document: {missing}"


def test_readme_documents_every_setting() -> None:
    from tracker.settings import known_variables

    text = README.read_text()
    tracker_vars = sorted(v for v in known_variables() if v.startswith("TRACKER_"))
    assert len(tracker_vars) >= 13
    missing = [v for v in tracker_vars if f"`{v}`" not in text]
    assert not missing, f"README does not document: {missing}"
