"""CLI: `tracker estimate CONFIG.json|ORG/NAME[@REV] [--json]` registered with typer (its help
text and usage). `tracker.cli.main` runs the command itself through tracker/cli/estimating.py,
without typer, so a one-off estimate starts fast; both run the same code."""

from __future__ import annotations

from typing import Annotated

import typer

from tracker.cli import estimating


def register(app: typer.Typer) -> None:
    """Add this module's commands to `app`."""

    @app.command("estimate")
    def estimate_cmd(
        target: Annotated[
            str, typer.Argument(help="CONFIG.json path, or ORG/NAME[@REV] on the Hub")
        ],
        as_json: Annotated[
            bool, typer.Option("--json", help="print the ESTIMATES.md §5 JSON")
        ] = False,
        no_headers: Annotated[
            bool, typer.Option("--no-headers", help="Hub: skip safetensors headers")
        ] = False,
    ) -> None:
        """Estimate parameters, memory, card fit, cost, structure and findings of a config.

        A CONFIG.json named config.json is read with its sibling tokenizer_config.json /
        tokenizer.json when present; on the Hub those files come from the same revision. Their
        highest token id feeds the vocab-too-small finding. ORG/NAME is estimated under the
        watchlist's `estimate:` settings for that repo (the defaults when it is not watched).
        """
        estimating.run(target, as_json=as_json, no_headers=no_headers)
