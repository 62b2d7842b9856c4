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
        hub: Annotated[
            bool, typer.Option("--hub", help="read the repo from the Hub even when ingested")
        ] = False,
        train_seq_len: Annotated[int | None, typer.Option(min=1, help="training tokens")] = None,
        serve_seq_len: Annotated[
            int | None, typer.Option(min=1, help="serving sequence for the KV cache")
        ] = None,
        lora_rank: Annotated[int | None, typer.Option(min=1, help="LoRA rank")] = None,
        cost_samples: Annotated[int | None, typer.Option(min=1, help="cost: samples")] = None,
        cost_seq_len: Annotated[int | None, typer.Option(min=1, help="cost: tokens each")] = None,
        cost_epochs: Annotated[int | None, typer.Option(min=1, help="cost: epochs")] = None,
        set_: Annotated[
            list[str] | None,
            typer.Option(
                "--set",
                help="KEY=VALUE: any setting of the watchlist's estimate: block (repeatable; "
                "VALUE as JSON, else a string), e.g. --set sharding=zero3 --set shards=8",
            ),
        ] = None,
        watchlist_settings: Annotated[
            str | None,
            typer.Option(
                "--watchlist-settings",
                help="ORG/NAME: a local CONFIG under the watchlist's estimate: for that repo",
            ),
        ] = None,
    ) -> None:
        """Estimate parameters, memory, card fit, cost, structure and findings of a config.

        A CONFIG.json named config.json is read with its sibling tokenizer_config.json /
        tokenizer.json when present; on the Hub those files come from the same revision. Their
        highest token id feeds the vocab-too-small finding. ORG/NAME[@REV] is read from the store
        when that revision is ingested (no network; REV as in `show`, default HEAD), else from
        the Hub (`--hub`: always), under the defaults, the watchlist's `estimate:` for the repo,
        then these flags; the report says which revision and settings it used. A FILE.gguf (its
        header only), or an ingested revision holding GGUF files and no config.json, gives per
        quant file its exact weight bytes, KV cache per token and fit per card and context at
        batch 1.
        """
        given = {
            "train_seq_len": train_seq_len,
            "serve_seq_len": serve_seq_len,
            "lora_rank": lora_rank,
            "cost_samples": cost_samples,
            "cost_seq_len": cost_seq_len,
            "cost_epochs": cost_epochs,
        }
        values: dict[str, object] = {k: v for k, v in given.items() if v is not None}
        values.update(estimating.setting(text) for text in set_ or [])
        if watchlist_settings is not None:
            values[estimating.WATCHLIST_SETTINGS] = watchlist_settings
        estimating.run(target, as_json=as_json, no_headers=no_headers, hub=hub, values=values)
