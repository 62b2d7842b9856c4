"""CLI: `tracker estimate CONFIG.json|ORG/NAME[@REV] [--json]` (rich report or the §5 JSON)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import typer

from tracker.artifacts import Limits, is_header_only
from tracker.domain import Estimate, RepoId, SafetensorsHeader, parse_repo_id
from tracker.errors import EstimateError
from tracker.sources import RepoSource

MAX_SHARDS = 512


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
        highest token id feeds the vocab-too-small finding.
        """
        from tracker.estimate import (
            TOKENIZER_FILES,
            estimate,
            highest_token_id_from_files,
            parse_config,
        )
        from tracker.settings import load_settings

        settings = load_settings()
        cap = settings.limits.max_file_bytes
        path = Path(target)
        headers: Mapping[str, SafetensorsHeader] | None = None
        if path.suffix == ".json" or path.exists():
            config = parse_config(_read(path, cap))
            tokenizer: dict[str, bytes] = {}
            if path.name == "config.json":
                for name in TOKENIZER_FILES:
                    sibling = path.with_name(name)
                    if sibling.is_file():
                        tokenizer[name] = _read(sibling, cap)
            label = str(path)
        else:
            repo, _, rev = target.partition("@")
            repo_id = parse_repo_id(repo)
            from tracker.app import build

            application = build(settings)
            try:
                source = application.sources.hub()
                config, headers, tokenizer, label = fetch_from_source(
                    source,
                    repo_id,
                    rev or "main",
                    settings.limits,
                    with_headers=not no_headers,
                )
            finally:
                application.close()
        result = estimate(config, headers, max_token_id=highest_token_id_from_files(tokenizer))
        if as_json:
            typer.echo(json.dumps(result.to_json(), indent=2, sort_keys=False))
        else:
            render(label, result)


def _read(path: Path, cap: int) -> bytes:
    """The bytes of `path`, or EstimateError (one line) when unreadable or over `cap`."""
    try:
        with path.open("rb") as fh:
            data = fh.read(cap + 1)
    except OSError as exc:
        raise EstimateError(f"cannot read {path}: {exc.strerror or exc}") from exc
    if len(data) > cap:
        raise EstimateError(f"{path} is over the {cap:,}-byte cap")
    return data


def fetch_from_source(
    source: RepoSource, repo_id: RepoId, rev: str, limits: Limits, *, with_headers: bool = True
) -> tuple[Mapping[str, Any], Mapping[str, SafetensorsHeader], dict[str, bytes], str]:
    """config.json, safetensors headers and tokenizer files of `repo_id` at `rev`.

    Returns (config, headers by path, tokenizer files by name, label "org/name@sha12"); one
    tree listing decides which of the optional files exist, so absent ones cost no request.
    """
    from tracker.estimate import TOKENIZER_FILES, parse_config

    sha = source.resolve_ref(repo_id, rev)
    config = parse_config(source.read_file(repo_id, sha, "config.json", limits.max_file_bytes))
    paths = {e.path for e in source.list_tree(repo_id, sha)}
    tokenizer = {
        name: source.read_file(repo_id, sha, name, limits.max_file_bytes)
        for name in TOKENIZER_FILES
        if name in paths
    }
    headers: dict[str, SafetensorsHeader] = {}
    if with_headers:
        shards = sorted(p for p in paths if is_header_only(p))
        for p in shards[:MAX_SHARDS]:
            headers[p] = source.read_safetensors_header(repo_id, sha, p, limits.max_header_bytes)
    return config, headers, tokenizer, f"{repo_id}@{sha[:12]}"


def render(label: str, est: Estimate) -> None:
    """Print a readable rich report: summary lines, component table and the fit table."""
    from rich.console import Console
    from rich.table import Table

    console = Console()
    p = est.params
    console.print(
        f"[bold]{label}[/bold]  {est.architecture} ({est.model_type})"
        + ("  [yellow]custom code[/yellow]" if est.custom_code else "")
    )
    console.print(
        f"parameters: {p.total:,} total, {p.active:,} active per token, "
        f"{p.embedding:,} embedding; {est.layers} layers"
    )
    v = est.verification
    console.print(
        f"verification: {v.status.value}" + (f" ({'; '.join(v.reasons)})" if v.reasons else "")
    )
    comp = Table(title="where the parameters live")
    comp.add_column("component")
    comp.add_column("count", justify="right")
    comp.add_column("share", justify="right")
    for name, count in p.by_component.items():
        comp.add_row(name, f"{count:,}", f"{p.shares[name] * 100:.1f}%")
    console.print(comp)
    m = est.memory
    console.print(
        f"memory (GB): full fine-tune {m.full_finetune} at batch 1 "
        f"({m.full_finetune_states} weights+grads+AdamW), LoRA {m.lora}, "
        f"serving weights {m.serve_weights} + KV {m.kv_cache} per "
        f"{m.serve_tokens}-token sequence"
    )
    fit = Table(title="largest batch per card (VRAM / 1.15)")
    for col in ("card", "full fine-tune", "LoRA", "serving"):
        fit.add_column(col)
    for card in est.cards:
        fit.add_row(card.name, card.full_finetune.summary, card.lora.summary, card.serve.summary)
    console.print(fit)
    if not v.vouched:
        console.print("card fit: no verdict from an unverified estimate (numbers for reference)")
    cost = est.cost
    console.print(
        f"cost: {cost.hours} h, ${cost.usd} on {cost.assumptions['gpu']} "
        f"({cost.assumptions['formula']})"
    )
    console.print(f"layout: {est.structure.pattern.summary}")
    ck = est.checkpoint
    if ck:
        console.print(
            f"checkpoint: {ck.params:,} stored params, {ck.bytes:,} bytes, "
            f"delta {ck.delta_pct}%, dtypes {dict(ck.dtypes)}"
        )
    for f in est.findings:
        console.print(f"[{f.level}] {f.id}: {f.evidence} (fix: {f.fix})")
    for note in est.notes:
        console.print(f"note: {note}")
