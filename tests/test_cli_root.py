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
