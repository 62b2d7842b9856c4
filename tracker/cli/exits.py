"""Exit codes of the CLI: one table from error class to status, and the one-line message."""

from __future__ import annotations

from tracker.shared import errors

# Most specific first: the first matching class decides the exit code.
EXIT_CODES: tuple[tuple[type[errors.TrackerError], int], ...] = (
    (errors.ConfigError, 2),
    (errors.InvalidRepoIdError, 2),
    (errors.EstimateError, 2),
    (errors.ArtifactError, 2),
    (errors.NotFoundError, 3),
    (errors.NotWatchedError, 3),
    (errors.AccessDeniedError, 4),
    (errors.SourceError, 5),
    (errors.StoreNotFoundError, 3),
    (errors.StoreError, 6),
    (errors.AdvisoryError, 7),
    (errors.TrackerError, 1),
)


def exit_code_for(exc: errors.TrackerError) -> int:
    """The exit status of `exc`: the first matching class of EXIT_CODES."""
    for cls, code in EXIT_CODES:
        if isinstance(exc, cls):
            return code
    return 1


def one_line(exc: errors.TrackerError) -> str:
    """The message of `exc` for stderr: one line, but for a ConfigError listing several problems
    (then one line per problem, all at once)."""
    if isinstance(exc, errors.ConfigError) and exc.problems:
        if len(exc.problems) > 1:
            return str(exc)
        head = str(exc).splitlines()[0]
        return f"{head}: {exc.problems[0]}"
    return " ".join(line.strip() for line in str(exc).splitlines() if line.strip())
