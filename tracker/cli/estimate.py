"""CLI: `tracker estimate CONFIG.json|ORG/NAME[@REV] [--json]` (rich report or the §5 JSON)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import typer

from tracker.artifacts import Limits, is_header_only
from tracker.domain import Estimate, RepoId, SafetensorsHeader, parse_repo_id
from tracker.errors import EstimateError, StoreNotFoundError
from tracker.sources import RepoSource

MAX_SHARDS = 512


def register(app: typer.Typer) -> None:
    """Add this module's commands to `app`."""

    @app.command("estimate")
    def estimate_cmd(
        target: Annotated[
            str,
            typer.Argument(
                help="CONFIG.json path, or ORG/NAME[@REV] (REV: sha, short sha, ref, HEAD~n)"
            ),
        ],
        as_json: Annotated[
            bool, typer.Option("--json", help="print the ESTIMATES.md §5 JSON")
        ] = False,
        no_headers: Annotated[
            bool, typer.Option("--no-headers", help="Hub: skip safetensors headers")
        ] = False,
        hub: Annotated[
            bool,
            typer.Option("--hub", help="read the repo from the Hub even when the store has it"),
        ] = False,
        train_seq_len: Annotated[
            int | None, typer.Option(min=1, help="training sequence length (tokens)")
        ] = None,
        serve_seq_len: Annotated[
            int | None, typer.Option(min=1, help="serving sequence length for the KV cache")
        ] = None,
        lora_rank: Annotated[int | None, typer.Option(min=1, help="LoRA rank")] = None,
        cost_samples: Annotated[
            int | None, typer.Option(min=1, help="cost: training samples per epoch")
        ] = None,
        cost_seq_len: Annotated[
            int | None, typer.Option(min=1, help="cost: tokens per sample")
        ] = None,
        cost_epochs: Annotated[int | None, typer.Option(min=1, help="cost: epochs")] = None,
    ) -> None:
        """Estimate parameters, memory, card fit, cost, structure and findings of a config.

        ORG/NAME[@REV] is read from the store when that revision is ingested (no network; REV
        resolves as in `show` and `diff`, default HEAD), else from the Hub (a full sha or a ref).
        The settings are the estimate defaults, then the watchlist's `estimate:` for the repo,
        then these flags. A CONFIG.json named config.json is read with its sibling
        tokenizer_config.json / tokenizer.json when present.
        """
        from tracker.estimate import (
            TOKENIZER_FILES,
            EstimateSettings,
            estimate,
            highest_token_id_from_files,
            parse_config,
        )
        from tracker.settings import load_settings

        flags = {
            "train_seq_len": train_seq_len,
            "serve_seq_len": serve_seq_len,
            "lora_rank": lora_rank,
            "cost_samples": cost_samples,
            "cost_seq_len": cost_seq_len,
            "cost_epochs": cost_epochs,
        }
        flags = {k: v for k, v in flags.items() if v is not None}
        settings = load_settings()
        cap = settings.limits.max_file_bytes
        path = Path(target)
        headers: Mapping[str, SafetensorsHeader] | None = None
        tokenizer: dict[str, bytes] = {}
        base: Mapping[str, Any] = {}
        where = "defaults"
        if path.suffix == ".json" or path.exists():
            config = parse_config(_read(path, cap))
            if path.name == "config.json":
                for name in TOKENIZER_FILES:
                    sibling = path.with_name(name)
                    if sibling.is_file():
                        tokenizer[name] = _read(sibling, cap)
            label = str(path)
        else:
            repo, _, rev = target.partition("@")
            repo_id = parse_repo_id(repo)
            base, where = _watchlist_estimate(settings, repo_id)
            stored = None if hub else _from_store(settings, repo_id, rev or "HEAD")
            if stored is None and rev and _store_only(rev):
                raise StoreNotFoundError(
                    f"{repo_id}@{rev}: no ingested revision matches; HEAD~n and short shas resolve "
                    "against ingested revisions only (the Hub takes a full sha or a ref)"
                )
            if stored is not None:
                config, headers, tokenizer, label = stored
            else:
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
                label += " (from the Hub)"
        est_settings = EstimateSettings.from_mapping({**base, **flags})
        if flags:
            where += " + flags " + ", ".join(
                f"--{k.replace('_', '-')} {v}" for k, v in flags.items()
            )
        result = estimate(
            config,
            headers,
            est_settings,
            max_token_id=highest_token_id_from_files(tokenizer),
        )
        if as_json:
            data = result.to_json()
            data["source"] = {"target": label, "settings_from": where}
            typer.echo(json.dumps(data, indent=2, sort_keys=False))
        else:
            render(label, result, where)


def _store_only(rev: str) -> bool:
    """A revision only the store can resolve: HEAD, `~n` steps back, or a short sha."""
    base = rev.split("~", 1)[0]
    return (
        "~" in rev
        or base == "HEAD"
        or (4 <= len(base) < 40 and all(c in "0123456789abcdef" for c in base.lower()))
    )


def _watchlist_estimate(settings: Any, repo_id: RepoId) -> tuple[Mapping[str, Any], str]:
    """The watchlist's `estimate:` settings for `repo_id` (empty when it is not watched)."""
    from tracker.errors import NotWatchedError
    from tracker.watchlist import load_watchlist

    try:
        watched = load_watchlist(settings.watchlist).get(repo_id)
    except NotWatchedError:
        return {}, "defaults"
    if watched.estimate:
        return dict(watched.estimate), f"defaults + {settings.watchlist} estimate:"
    return {}, "defaults"


def _from_store(
    settings: Any, repo_id: RepoId, rev: str
) -> tuple[Mapping[str, Any], Mapping[str, SafetensorsHeader], dict[str, bytes], str] | None:
    """config.json, headers and tokenizer files of an ingested revision (None when the store,
    the repo or the revision is not there; EstimateError when config.json was not stored)."""
    from tracker.app import build
    from tracker.estimate import TOKENIZER_FILES, parse_config

    try:
        application = build(settings, read_only=True)
    except StoreNotFoundError:
        return None
    try:
        try:
            sha = application.store.resolve(repo_id, rev)
        except StoreNotFoundError:
            return None
        snap = application.store.snapshot(repo_id, sha)
    finally:
        application.close()
    if "config.json" in snap.unreadable:
        raise EstimateError(
            f"{repo_id}@{sha[:12]}: config.json could not be read: {snap.unreadable['config.json']}"
        )
    data = snap.files.get("config.json")
    if data is None:
        raise EstimateError(f"{repo_id}@{sha[:12]}: no config.json at this revision")
    tokenizer = {n: snap.files[n] for n in TOKENIZER_FILES if n in snap.files}
    label = f"{repo_id}@{sha[:12]} (ingested revision {sha}, read from the store)"
    return parse_config(data), dict(snap.headers), tokenizer, label


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


def assumptions(est: Estimate) -> list[str]:
    """The settings the numbers rest on, as an operator reads them."""
    s = est.settings
    tokens = est.cost.tokens
    return [
        f"training: {s.get('train_seq_len'):,}-token sequences, batch 1; LoRA rank "
        f"{s.get('lora_rank')} on {s.get('lora_targets')}",
        f"serving: {s.get('serve_seq_len'):,}-token sequence for the KV cache",
        f"cost: {s.get('cost_epochs')} epochs × {s.get('cost_samples'):,} samples × "
        f"{s.get('cost_seq_len'):,} tokens = {tokens:,} tokens",
    ]


def render(label: str, est: Estimate, settings_from: str = "defaults") -> None:
    """Print a readable rich report: what was read and assumed, summary lines, component
    table and the fit table (every table readable at 80 columns)."""
    from rich.markup import escape

    from tracker.cli import tables

    console = tables.console()
    p = est.params
    console.print(
        f"[bold]{escape(label)}[/bold]  {escape(est.architecture)} ({escape(est.model_type)})"
        + ("  [yellow]custom code[/yellow]" if est.custom_code else "")
    )
    console.print(f"settings: {escape(settings_from)}", highlight=False)
    for line in assumptions(est):
        console.print(f"assumed {line}", highlight=False, markup=False)
    console.print(
        f"parameters: {p.total:,} total, {p.active:,} active per token, "
        f"{p.embedding:,} embedding; {est.layers} layers"
    )
    v = est.verification
    console.print(
        f"verification: {v.status.value}" + (f" ({'; '.join(v.reasons)})" if v.reasons else "")
    )
    tables.print_table(
        console,
        "where the parameters live",
        [
            tables.Col("component", keep=True),
            tables.Col("count", keep=True, right=True),
            tables.Col("share", 1, keep=True, right=True),
        ],
        [
            [name, f"{count:,}", f"{p.shares[name] * 100:.1f}%"]
            for name, count in p.by_component.items()
        ],
    )
    m = est.memory
    console.print(
        f"memory: full fine-tune {tables.gb(m.full_finetune)} at batch 1 "
        f"({tables.gb(m.full_finetune_states)} weights+grads+AdamW), LoRA {tables.gb(m.lora)}, "
        f"serving weights {tables.gb(m.serve_weights)} + KV {tables.gb(m.kv_cache)} per "
        f"{m.serve_tokens:,}-token sequence",
        highlight=False,
    )
    tables.print_table(
        console,
        "largest batch per card (VRAM / 1.15)",
        [
            tables.Col("card", keep=True),
            tables.Col("full fine-tune"),
            tables.Col("LoRA"),
            tables.Col("serving"),
        ],
        [
            [card.name, card.full_finetune.summary, card.lora.summary, card.serve.summary]
            for card in est.cards
        ],
    )
    if not v.vouched:
        console.print("card fit: no verdict from an unverified estimate (numbers for reference)")
    cost = est.cost
    console.print(
        f"cost: {cost.hours} h, ${cost.usd} on {cost.assumptions['gpu']} "
        f"({cost.assumptions['formula']})",
        markup=False,
        highlight=False,
    )
    console.print(f"layout: {est.structure.pattern.summary}", markup=False)
    ck = est.checkpoint
    if ck:
        console.print(
            f"checkpoint: {ck.params:,} stored params, {tables.size(ck.bytes)}, "
            f"delta {ck.delta_pct}%, dtypes "
            + ", ".join(f"{n:,} {d}" for d, n in dict(ck.dtypes).items()),
            markup=False,
            highlight=False,
        )
    for f in est.findings:
        console.print(f"[{f.level}] {f.id}: {f.evidence} (fix: {f.fix})", markup=False)
    for note in est.notes:
        console.print(f"note: {note}", markup=False)
