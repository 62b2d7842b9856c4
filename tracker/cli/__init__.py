"""The thin CLI: parse, build, call, and map errors to exit codes through one table.

Each command group lives in its own module with a `register(app)` function. typer loads only
when a command needs it: `tracker estimate` runs without it (tracker/cli/estimating.py), so a
one-off estimate starts fast.
"""

from __future__ import annotations

import functools
import gc
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracker.cli.exits import EXIT_CODES, exit_code_for, one_line
from tracker.shared import errors

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


def _register_root(app: typer.Typer) -> None:
    """The root options: settings given on the command line (before the command)."""
    import typer

    @app.callback()
    def _settings_options(
        state_dir: Path | None = typer.Option(
            None, "--state-dir", help="TRACKER_STATE_DIR: where the store and mirrors live."
        ),
        database_url: str | None = typer.Option(
            None,
            "--database-url",
            help="TRACKER_DATABASE_URL: the store (SQLite or PostgreSQL URL).",
        ),
        watchlist: Path | None = typer.Option(
            None, "--watchlist", help="TRACKER_WATCHLIST: the watchlist file."
        ),
        hf_endpoint: str | None = typer.Option(
            None, "--hf-endpoint", help="TRACKER_HF_ENDPOINT: the Hub, a mirror or the replica."
        ),
        log_level: str | None = typer.Option(
            None, "--log-level", help="TRACKER_LOG_LEVEL: DEBUG, INFO, WARNING, ERROR or CRITICAL."
        ),
    ) -> None:
        """Upstream change tracker and advisory daemon for Hugging Face model repositories.

        Settings come from these options (before the command), then TRACKER_* variables, then
        defaults.
        """
        from tracker.settings import CLI_OVERRIDES

        given = {
            "state_dir": state_dir,
            "database_url": database_url,
            "watchlist": watchlist,
            "hf_endpoint": hf_endpoint,
            "log_level": log_level.upper() if log_level else None,
        }
        CLI_OVERRIDES.set({k: v for k, v in given.items() if v is not None})


# The top-level commands each module registers (tests/test_cli_root.py checks this against the
# registrations themselves): a command line names one, and only its module is imported, so
# `tracker watch list` does not import the daemon, the store's migrations and the pipeline.
COMMAND_MODULES: dict[str, str] = {
    "watch": "watch",
    "poll": "poll",
    "history": "poll",
    "show": "poll",
    "diff": "diff",
    "estimate": "estimate",
    "preflight": "preflight",
    "advisories": "advisories",
    "lineage": "lineage",
    "scan": "scan",
    "team": "team",
    "serve": "serve",
    "subscribe": "subscribe",
    "replica": "replica",
    "demo": "demo",
    "verify": "verify",
    "repair": "verify",
    "status": "status",
    "migrate": "migrate",
}

# The root options that take a value (`_register_root`): skipped when finding the command.
_ROOT_VALUE_OPTIONS = frozenset(
    {"--state-dir", "--database-url", "--watchlist", "--hf-endpoint", "--log-level"}
)


# What this process has registered on the one app ("" for the root options).
_REGISTERED: set[str] = set()


def command_of(args: list[str]) -> str | None:
    """The top-level command an argument list names (after the root options), or None."""
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg in _ROOT_VALUE_OPTIONS:
            skip = True
        elif not arg.startswith("-"):
            return arg
    return None


def _register_all(args: list[str] | None = None) -> None:
    """Register the root options and the command modules: only the one the command line names
    when it names a known command, every one otherwise (help, usage errors, tests)."""
    import importlib

    command = command_of(args) if args is not None else None
    wanted = (
        [COMMAND_MODULES[command]]
        if command in COMMAND_MODULES
        else list(dict.fromkeys(COMMAND_MODULES.values()))
    )
    if not _REGISTERED:
        _register_root(_app())
        _REGISTERED.add("")
    for name in wanted:
        if name in _REGISTERED:
            continue
        register: Callable[[typer.Typer], None] = importlib.import_module(
            f"tracker.cli.{name}"
        ).register
        register(_app())
        _REGISTERED.add(name)


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the CLI; a TrackerError becomes a one-line message and its exit code."""
    args = sys.argv[1:] if argv is None else list(argv)
    if args[:1] == ["estimate"] and not {"--help", "-h"} & set(args):
        # A one-off estimate is a short process that builds no reference cycles worth collecting:
        # the cyclic collector only slows its imports (about a tenth of its start, `make bench`).
        gc.disable()
        try:
            from tracker.cli import estimating

            status = estimating.main(args[1:])
        finally:
            gc.enable()
        if argv is None:
            # The process ends here: the collection Python runs at exit (gc disabled or not)
            # would only walk the classes and functions the estimate's imports made, none of
            # them garbage; frozen, they are left to the process exit (`make bench`).
            gc.freeze()
        sys.exit(status)
    import typer

    _register_all(args)
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
        # Usage errors (typer's vendored click): one `error:` line and click's code (2, bad input).
        message, code = usage_error(exc)
        if code is None:
            raise
        if message is None:  # no arguments at all: the help is the answer
            exc.show()  # type: ignore[attr-defined]
        else:
            typer.echo(f"error: {message}", err=True)
        sys.exit(code)
    if isinstance(code, int) and code != 0:
        sys.exit(code)


def usage_error(exc: BaseException) -> tuple[str | None, int | None]:
    """(one line, exit code) for a click usage error (unknown option or command, missing
    argument, bad value) with a hint naming the command's --help; (None, code) when the help
    itself is the answer (no arguments); (None, None) for anything that is not click's."""
    code = getattr(exc, "exit_code", None)
    fmt = getattr(exc, "format_message", None)
    if not isinstance(code, int) or not callable(fmt):
        return None, None
    if type(exc).__name__ == "NoArgsIsHelpError":
        return None, code
    text = " ".join(str(fmt()).split()).rstrip(".")
    if text[:2].istitle() and text[1:2].islower():
        text = text[0].lower() + text[1:]
    ctx = getattr(exc, "ctx", None)
    path = getattr(ctx, "command_path", None)
    if isinstance(path, str):
        words = ["tracker", *path.split()[1:]]
        text += f" (try: {' '.join(words)} --help)"
    return text, code
