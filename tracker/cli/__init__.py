"""The thin CLI: parse, build, call, and map errors to exit codes through one table.

Each command group lives in its own module with a `register(app)` function.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import typer

from tracker import errors

app = typer.Typer(
    name="tracker",
    help="Upstream change tracker and advisory daemon for Hugging Face model repositories.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

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


def _register_all() -> None:
    from tracker.cli import (
        advisories,
        demo,
        diff,
        estimate,
        poll,
        replica,
        serve,
        verify,
        watch,
    )

    modules: tuple[Callable[[typer.Typer], None], ...] = (
        watch.register,
        poll.register,
        diff.register,
        estimate.register,
        advisories.register,
        serve.register,
        replica.register,
        demo.register,
        verify.register,
    )
    for register in modules:
        register(app)


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the CLI; a TrackerError becomes a one-line message and its exit code."""
    _register_all()
    from tracker import logs

    # Until a command has read its settings (`app.build` reconfigures from them): warnings and up.
    logs.configure(level="WARNING")
    try:
        # Without standalone mode, click returns (not raises) the code of a `typer.Exit(n)`.
        code = app(args=argv, standalone_mode=False)
    except errors.TrackerError as exc:
        typer.echo(f"error: {one_line(exc)}", err=True)
        sys.exit(exit_code_for(exc))
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:
        typer.echo("aborted", err=True)
        sys.exit(130)
    except Exception as exc:
        # Usage errors (typer's vendored click): they know how to show themselves and their code.
        show, code = getattr(exc, "show", None), getattr(exc, "exit_code", None)
        if callable(show) and isinstance(code, int):
            show()
            sys.exit(code)
        raise
    if isinstance(code, int) and code != 0:
        sys.exit(code)
