"""The CLI root: usage errors and TrackerErrors become one message and a mapped exit code."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tracker.cli import EXIT_CODES, exit_code_for
from tracker.shared import errors


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "from tracker.cli import main; main()", *args],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_unknown_command_and_missing_argument_are_usage_errors() -> None:
    unknown = _run("nonexistent")
    assert unknown.returncode == 2
    assert unknown.stderr == "error: no such command 'nonexistent' (try: tracker --help)\n"
    missing = _run("diff")
    assert missing.returncode == 2
    assert missing.stderr == "error: missing argument 'repo' (try: tracker diff --help)\n"
    assert "Traceback" not in unknown.stderr + missing.stderr


@pytest.mark.parametrize(
    ("exc", "code"),
    [
        (errors.WatchlistError("w"), 2),
        (errors.InvalidRepoIdError("r"), 2),
        (errors.EstimateError("e"), 2),
        (errors.UnreadableArtifactError("u"), 2),
        (errors.RevisionNotFoundError("n"), 3),
        (errors.GatedRepoError("g"), 4),
        (errors.TransientSourceError("t"), 5),
        (errors.StoreError("s"), 6),
        (errors.AdvisoryError("a"), 7),
        (errors.TrackerError("x"), 1),
    ],
)
def test_exit_code_table(exc: errors.TrackerError, code: int) -> None:
    assert exit_code_for(exc) == code


def test_every_error_class_has_a_code_from_the_table() -> None:
    def subclasses(cls: type) -> list[type]:
        return [cls, *(s for sub in cls.__subclasses__() for s in subclasses(sub))]

    table = {cls for cls, _ in EXIT_CODES}
    for cls in subclasses(errors.TrackerError):
        assert any(issubclass(cls, t) for t in table), cls


def test_command_table_names_what_each_module_registers() -> None:
    """`tracker CMD` imports only CMD's module (COMMAND_MODULES): the table must name exactly the
    top-level commands and groups each module's `register` adds, or a command would be missing
    from its own command line."""
    import importlib

    import typer

    from tracker.cli import COMMAND_MODULES

    registered: dict[str, str] = {}
    for module in dict.fromkeys(COMMAND_MODULES.values()):
        app = typer.Typer()
        importlib.import_module(f"tracker.cli.{module}").register(app)
        names = [c.name for c in app.registered_commands] + [g.name for g in app.registered_groups]
        for name in names:
            assert name is not None
            registered[name] = module
    assert registered == COMMAND_MODULES


@pytest.mark.parametrize(
    ("args", "command"),
    [
        (["watch", "list"], "watch"),
        (["--state-dir", "/x", "poll", "--once"], "poll"),
        (["--log-level=DEBUG", "status"], "status"),
        (["--watchlist", "advisories", "diff", "a/b"], "diff"),
        (["--help"], None),
        ([], None),
    ],
)
def test_command_of_skips_root_options(args: list[str], command: str | None) -> None:
    from tracker.cli import command_of

    assert command_of(args) == command


def test_one_command_line_runs_with_only_its_module_registered() -> None:
    """A command after root options runs (its module found past the options' values), and the
    root help still lists every command."""
    ran = _run("--log-level", "WARNING", "replica", "--help")
    assert ran.returncode == 0, ran.stderr
    assert "serve" in ran.stdout
    helped = _run("--help")
    assert helped.returncode == 0
    for name in ("watch", "poll", "history", "repair", "migrate", "subscribe", "lineage"):
        assert f" {name} " in helped.stdout
