"""The thin CLI: parse, build, call, and map errors to exit codes through one table.

Each command group lives in its own module with a `register(app)` function. typer loads only
when a command needs it: `tracker estimate` runs without it (tracker/cli/estimating.py), so a
one-off estimate starts fast.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tracker import errors
from tracker.cli.exits import EXIT_CODES, exit_code_for, one_line

if TYPE_CHECKING:
    import typer

__all__ = ["EXIT_CODES", "app", "exit_code_for", "main", "one_line"]


@functools.cache
def _app() -> typer.Typer:
    import typer

    return typer.Typer(
        name="tracker",
        help="Upstream change tracker and advisory daemon for Hugging Face model repositories.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
    )


def __getattr__(name: str) -> Any:
    if name == "app":
        return _app()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _register_all() -> None:
    from tracker.cli import advisories, demo, diff, estimate, poll, preflight, replica, serve, watch

    modules: tuple[Callable[[typer.Typer], None], ...] = (
        watch.register,
        poll.register,
        diff.register,
        estimate.register,
        preflight.register,
        advisories.register,
        serve.register,
        replica.register,
        demo.register,
    )
    for register in modules:
        register(_app())


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the CLI; a TrackerError becomes a one-line message and its exit code."""
    args = sys.argv[1:] if argv is None else list(argv)
    if args[:1] == ["estimate"] and not {"--help", "-h"} & set(args):
        from tracker.cli import estimating

        sys.exit(estimating.main(args[1:]))
    import typer

    _register_all()
    app = _app()
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
