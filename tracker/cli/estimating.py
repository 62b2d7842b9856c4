"""`tracker estimate CONFIG.json|ORG/NAME[@REV] [--json] [--no-headers] [--set KEY=VALUE]...`,
without the CLI framework.

A one-off estimate of a local config is a short process: `main` parses its own arguments and
imports only the estimate (no typer, rich, store, pipeline or Hub client), so it starts within a
small multiple of a bare interpreter (`make bench`, estimate section). ORG/NAME goes through the
Hub adapter and estimates under the watchlist's `estimate:` settings for that repo. `tracker
estimate --help` is typer's (tracker/cli/estimate.py registers the same command there).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from tracker.shared.errors import ConfigError, EstimateError

if TYPE_CHECKING:
    from tracker.estimate.settings import EstimateSettings
    from tracker.settings import Settings
    from tracker.shared.artifacts import Limits
    from tracker.shared.domain import Estimate, RepoId, SafetensorsHeader
    from tracker.sources import RepoSource
    from tracker.store import Store

T = TypeVar("T")

MAX_SHARDS = 512
USAGE = (
    "usage: tracker estimate [--json] [--hub] [--no-headers] [--train-seq-len N] "
    "[--serve-seq-len N] [--lora-rank N] [--cost-samples N] [--cost-seq-len N] [--cost-epochs N] "
    "[--set KEY=VALUE]... [--watchlist-settings ORG/NAME] CONFIG.json|FILE.gguf|ORG/NAME[@REV]"
)
FLAGS = ("--json", "--no-headers", "--hub")
VALUES = (
    "train_seq_len",
    "serve_seq_len",
    "lora_rank",
    "cost_samples",
    "cost_seq_len",
    "cost_epochs",
)
"""Estimate settings a flag sets (`--train-seq-len 4096`): positive integers."""
WATCHLIST_SETTINGS = "--watchlist-settings"
"""The key in `values` naming the watched repo whose `estimate:` block a local CONFIG uses."""


def setting(text: str) -> tuple[str, Any]:
    """`KEY=VALUE` of `--set` as (key, value): VALUE is read as JSON when it is JSON (`8`,
    `true`, `0.5`, `[...]`, `{...}`), else taken as a string (`zero3`, `nf4`), so it reaches
    `EstimateSettings.from_mapping` typed as the watchlist's `estimate:` block would give it.
    ConfigError without `=` or a key."""
    key, eq, raw = text.partition("=")
    key = key.strip()
    if not eq or not key:
        raise ConfigError(f"--set takes KEY=VALUE (an estimate setting), not {text!r}")
    try:
        value: Any = json.loads(raw)
    except ValueError:
        value = raw
    return key, value


def parse_args(args: Sequence[str]) -> tuple[str, dict[str, bool], dict[str, Any]]:
    """(target, {flag: given}, {setting: value}) from the arguments after `estimate`: the six
    integer flags and every `--set KEY=VALUE` (any setting of the watchlist's `estimate:`
    block, validated there); ConfigError (exit 2) on anything else."""
    targets: list[str] = []
    flags = {f: False for f in FLAGS}
    values: dict[str, Any] = {}
    it = iter(args)
    for arg in it:
        if arg == "--":
            targets += list(it)
            break
        if not arg.startswith("--"):
            targets.append(arg)
            continue
        name, eq, given = arg.partition("=")
        if name in flags and not eq:
            flags[name] = True
            continue
        if name == "--set":
            key, value = setting(given if eq else next(it, ""))
            values[key] = value
            continue
        if name == "--watchlist-settings":
            values[WATCHLIST_SETTINGS] = given if eq else next(it, "")
            continue
        key = name[2:].replace("-", "_")
        if key not in VALUES:
            raise ConfigError(f"no such option: {name} ({USAGE})")
        text = given if eq else next(it, "")
        if not text.isdigit() or int(text) < 1:
            raise ConfigError(f"{name} takes a positive whole number, not {text!r}")
        values[key] = int(text)
    if len(targets) != 1:
        raise ConfigError(f"expected one CONFIG.json or ORG/NAME, got {len(targets)} ({USAGE})")
    return targets[0], flags, values


def run(
    target: str,
    *,
    as_json: bool,
    no_headers: bool,
    hub: bool = False,
    values: Mapping[str, Any] | None = None,
) -> None:
    """Estimate `target` (a config file, or ORG/NAME[@REV]: an ingested revision from the store,
    else the Hub) under the defaults, the watchlist's `estimate:` for the repo and `values`
    (flags), and print the report: which revision and settings it used, what it assumed."""
    from tracker.estimate import TOKENIZER_FILES, parse_config

    flags = dict(values or {})
    watched = flags.pop(WATCHLIST_SETTINGS, None)
    path = Path(target)
    gguf = _gguf_target(path, target, hub=hub)
    if gguf is not None:
        _print_gguf(*gguf, flags, as_json=as_json)
        return
    headers: Mapping[str, SafetensorsHeader] | None = None
    base: Mapping[str, Any] = {}
    where = "defaults"
    if path.suffix == ".json" or path.exists():
        if watched is not None:
            base, where = _watchlist_settings_of(str(watched))
        # A local file is read under the default file cap: reading the settings would load
        # pydantic, which a one-off estimate does not need (the settings govern Hub reads).
        from tracker.shared.bounded import MAX_FILE_BYTES as cap

        config = parse_config(_read(path, cap))
        tokenizer: dict[str, bytes] = {}
        if path.name == "config.json":
            from tracker.estimate.checkpoint import INDEX_FILES

            for name in (*TOKENIZER_FILES, *INDEX_FILES):
                sibling = path.with_name(name)
                if sibling.is_file():
                    tokenizer[name] = _read(sibling, cap)
            if not no_headers:
                headers = _local_headers(path.parent) or None
        label = str(path)
    else:
        config, headers, tokenizer, label, base, where = _from_repo(
            target, with_headers=not no_headers, hub=hub
        )
    result, where = estimate_with(config, headers, tokenizer, base, flags, where)
    if as_json:
        sys.stdout.write(json.dumps(report_json(result, label, where), indent=2) + "\n")
    else:
        sys.stdout.write(render(label, result, where))


def _gguf_target(path: Path, target: str, *, hub: bool) -> tuple[list[Any], str] | None:
    """The GGUF models of a local `.gguf` file (its header read from disk, not its weights), or
    of an ingested revision that holds GGUF models and no config.json; None otherwise."""
    if path.suffix == ".gguf":
        from tracker.settings import load_settings
        from tracker.shared.domain import gguf_models
        from tracker.sources.gguf import parse_gguf

        size = path.stat().st_size if path.is_file() else None
        if size is None:
            raise EstimateError(f"{target}: no such file")
        with path.open("rb") as fh:

            def read(offset: int, n: int) -> bytes:
                fh.seek(offset)
                return fh.read(n)

            cap = load_settings().max_safetensors_header_bytes  # the header cap (GGUF too)
            header = parse_gguf(read, max_bytes=cap, file_size=size)
        models = gguf_models({path.name}, {path.name: header}, {})
        return list(models.values()), str(path)
    if hub or path.suffix == ".json" or path.exists() or "/" not in target:
        return None
    from tracker.settings import load_settings
    from tracker.shared.domain import parse_repo_id

    repo, _, rev = target.partition("@")
    repo_id = parse_repo_id(repo)

    def stored(store: Store) -> tuple[list[Any], str] | None:
        sha = store.resolve(repo_id, rev or "HEAD")
        snap = store.snapshot(repo_id, sha)
        if "config.json" in snap.files or not snap.gguf_models:
            return None
        label = f"{repo_id}@{sha[:12]} (ingested revision {sha}, read from the store)"
        return list(snap.gguf_models.values()), label

    return read_stored(load_settings(), stored)


def _print_gguf(models: list[Any], label: str, flags: Mapping[str, Any], *, as_json: bool) -> None:
    """Each GGUF model's weight bytes, KV cache per token and fit table (tracker.estimate.gguf);
    a model whose header could not be read is listed with why."""
    from tracker.estimate.gguf import estimate_gguf
    from tracker.estimate.settings import EstimateSettings

    settings = EstimateSettings.from_mapping(dict(flags)) if flags else EstimateSettings()
    quants: list[dict[str, Any]] = []
    unreadable: list[dict[str, str]] = []
    for model in models:
        try:
            quants.append(estimate_gguf(model, settings).to_json())
        except EstimateError as exc:
            unreadable.append({"file": model.path, "error": str(exc)})
    if as_json:
        out = {"format": "gguf", "quants": quants, "unreadable": unreadable,
               "source": {"target": label, "settings_from": "defaults"}}  # fmt: skip
        sys.stdout.write(json.dumps(out, indent=2) + "\n")
        return
    lines = [f"GGUF estimate of {label} (weights exact from the headers; KV cache f16)"]
    for q in quants:
        lines.append(f"{q['file']}: {q['weight_bytes']:,} weight bytes, "
                     f"{q['kv_bytes_per_token']:,} KV bytes a token")  # fmt: skip
        lines += [f"  {s}" for s in q["summary"]]
    lines += [f"{u['file']}: could not estimate: {u['error']}" for u in unreadable]
    sys.stdout.write("\n".join(lines) + "\n")


def estimate_with(
    config: Mapping[str, Any],
    headers: Mapping[str, SafetensorsHeader] | None,
    tokenizer: Mapping[str, bytes],
    base: Mapping[str, Any],
    flags: Mapping[str, Any],
    where: str,
) -> tuple[Estimate, str]:
    """The estimate of `config` under the defaults, `base` (the watchlist's `estimate:`) and
    `flags`, and `where` its settings came from (the flags appended). `tokenizer` holds the
    revision's tokenizer files and its weight index (`metadata.total_size`: the bytes as
    shipped) where it has one."""
    from tracker.estimate import estimate, highest_token_id_from_files
    from tracker.estimate.checkpoint import INDEX_FILES, index_total_size
    from tracker.estimate.settings import EstimateSettings

    settings = EstimateSettings.from_mapping({**base, **flags}) if base or flags else None
    if flags:
        where += " + flags " + ", ".join(_flag(k, v) for k, v in flags.items())
    tokens = {k: v for k, v in tokenizer.items() if k not in INDEX_FILES}
    result = estimate(
        config,
        headers,
        settings,
        max_token_id=highest_token_id_from_files(tokens),
        total_size=index_total_size(tokenizer),
    )
    return result, where


def _flag(key: str, value: Any) -> str:
    if key in VALUES and isinstance(value, int):
        return f"--{key.replace('_', '-')} {value}"
    shown = value if isinstance(value, str) else json.dumps(value)
    return f"--set {key}={shown}"


def report_json(result: Estimate, label: str, where: str) -> dict[str, Any]:
    """`tracker estimate --json`: the §5 JSON and `source` (what was read, whose settings)."""
    data: dict[str, Any] = result.to_json()
    data["source"] = {"target": label, "settings_from": where}
    return data


def store_report(settings: Settings, store: Store, repo_id: RepoId, rev: str) -> dict[str, Any]:
    """`tracker estimate ORG/NAME@REV --json` of an ingested revision, read from `store`:
    StoreNotFoundError for an unknown repo or revision, EstimateError when its config.json was
    not stored or cannot be read."""
    config, headers, tokenizer, label = stored_inputs(store, repo_id, rev)
    base = _watchlist_block(settings, repo_id)
    where = f"defaults + {settings.watchlist} estimate:" if base else "defaults"
    result, where = estimate_with(config, headers, tokenizer, base, {}, where)
    return report_json(result, label, where)


def store_only(rev: str) -> bool:
    """A revision only the store can resolve: HEAD, `~n` steps back, or a short sha."""
    base = rev.split("~", 1)[0]
    return (
        "~" in rev
        or base == "HEAD"
        or (4 <= len(base) < 40 and all(c in "0123456789abcdef" for c in base.lower()))
    )


def _from_repo(
    target: str, *, with_headers: bool, hub: bool
) -> tuple[
    Mapping[str, Any],
    Mapping[str, SafetensorsHeader],
    dict[str, bytes],
    str,
    Mapping[str, Any],
    str,
]:
    from tracker import logs
    from tracker.app import build
    from tracker.settings import load_settings
    from tracker.shared.domain import parse_repo_id
    from tracker.shared.errors import StoreNotFoundError

    logs.configure(level="WARNING")  # until `build` reconfigures from the settings
    settings = load_settings()
    repo, _, rev = target.partition("@")
    repo_id = parse_repo_id(repo)
    base = _watchlist_block(settings, repo_id)
    where = f"defaults + {settings.watchlist} estimate:" if base else "defaults"
    stored = None if hub else _from_store(settings, repo_id, rev or "HEAD")
    if stored is not None:
        return (*stored, base, where)
    if rev and store_only(rev):
        raise StoreNotFoundError(
            f"{repo_id}@{rev}: no ingested revision matches; HEAD~n and short shas resolve "
            "against ingested revisions only (the Hub takes a full sha or a ref)"
        )
    application = build(settings)
    try:
        source = application.sources.hub()
        config, headers, tokenizer, label = fetch_from_source(
            source, repo_id, rev or "main", settings.limits, with_headers=with_headers
        )
    finally:
        application.close()
    return config, headers, tokenizer, label + " (from the Hub)", base, where


def _watchlist_settings_of(name: str) -> tuple[Mapping[str, Any], str]:
    """(`estimate:` block, where) of watched repo `name` for a local CONFIG
    (`--watchlist-settings ORG/NAME`): ConfigError when the watchlist does not name it."""
    from tracker.settings import load_settings
    from tracker.shared.domain import parse_repo_id
    from tracker.shared.errors import NotWatchedError
    from tracker.watchlist import load_watchlist

    settings = load_settings()
    repo_id = parse_repo_id(name)
    if not settings.watchlist.is_file():
        raise ConfigError(f"--watchlist-settings {name}: no watchlist at {settings.watchlist}")
    try:
        block = dict(load_watchlist(settings.watchlist).get(repo_id).estimate)
    except NotWatchedError as exc:
        raise ConfigError(
            f"--watchlist-settings {name}: {settings.watchlist} does not watch it"
        ) from exc
    return block, f"defaults + {settings.watchlist} estimate: of {repo_id}"


def _watchlist_block(settings: Settings, repo_id: RepoId) -> Mapping[str, Any]:
    """The watchlist's `estimate:` mapping for `repo_id` (empty when it is not watched)."""
    from tracker.shared.errors import NotWatchedError
    from tracker.watchlist import load_watchlist

    if not settings.watchlist.is_file():
        return {}
    try:
        return dict(load_watchlist(settings.watchlist).get(repo_id).estimate)
    except NotWatchedError:
        return {}


def read_stored(settings: Settings, read: Callable[[Store], T]) -> T | None:
    """`read(store)` over the store opened read-only (nothing is created or migrated); None when
    there is no store, or `read` finds no such repo or revision (StoreNotFoundError)."""
    from tracker.app import build
    from tracker.shared.errors import StoreNotFoundError

    try:
        application = build(settings, read_only=True)
    except StoreNotFoundError:
        return None
    try:
        return read(application.store)
    except StoreNotFoundError:
        return None
    finally:
        application.close()


def _from_store(
    settings: Settings, repo_id: RepoId, rev: str
) -> tuple[Mapping[str, Any], Mapping[str, SafetensorsHeader], dict[str, bytes], str] | None:
    """config.json, headers and tokenizer files of an ingested revision (None when the store,
    the repo or the revision is not there; EstimateError when config.json was not stored)."""
    return read_stored(settings, lambda store: stored_inputs(store, repo_id, rev))


def stored_inputs(
    store: Store, repo_id: RepoId, rev: str
) -> tuple[Mapping[str, Any], Mapping[str, SafetensorsHeader], dict[str, bytes], str]:
    """config.json, headers, tokenizer files and the label of an ingested revision (REV as in
    `show`); StoreNotFoundError when the repo or revision is not stored, EstimateError when
    config.json was not stored or cannot be read."""
    from tracker.estimate import TOKENIZER_FILES, parse_config
    from tracker.estimate.checkpoint import INDEX_FILES

    sha = store.resolve(repo_id, rev)
    snap = store.snapshot(repo_id, sha)
    if "config.json" in snap.unreadable:
        raise EstimateError(
            f"{repo_id}@{sha[:12]}: config.json could not be read: {snap.unreadable['config.json']}"
        )
    data = snap.files.get("config.json")
    if data is None:
        raise EstimateError(f"{repo_id}@{sha[:12]}: no config.json at this revision")
    tokenizer = {n: snap.files[n] for n in (*TOKENIZER_FILES, *INDEX_FILES) if n in snap.files}
    label = f"{repo_id}@{sha[:12]} (ingested revision {sha}, read from the store)"
    return parse_config(data), dict(snap.headers), tokenizer, label


def repo_settings(settings: Settings, repo_id: RepoId) -> EstimateSettings:
    """The watchlist's `estimate:` settings for `repo_id` (defaults < rules < entry), or the
    defaults when the watchlist has no such repo or no watchlist file exists."""
    from tracker.estimate.settings import EstimateSettings
    from tracker.shared.errors import NotWatchedError
    from tracker.watchlist import load_watchlist

    if not settings.watchlist.is_file():
        return EstimateSettings()
    try:
        watched = load_watchlist(settings.watchlist).get(repo_id)
    except NotWatchedError:
        return EstimateSettings()
    return EstimateSettings.from_mapping(watched.estimate)


def _from_hub(
    target: str, *, with_headers: bool
) -> tuple[
    Mapping[str, Any], Mapping[str, SafetensorsHeader], dict[str, bytes], str, EstimateSettings
]:
    from tracker import logs
    from tracker.app import build
    from tracker.settings import load_settings
    from tracker.shared.domain import parse_repo_id

    logs.configure(level="WARNING")  # until `build` reconfigures from the settings
    settings = load_settings()
    repo, _, rev = target.partition("@")
    repo_id = parse_repo_id(repo)
    est_settings = repo_settings(settings, repo_id)
    application = build(settings)
    try:
        source = application.sources.hub()
        config, headers, tokenizer, label = fetch_from_source(
            source, repo_id, rev or "main", settings.limits, with_headers=with_headers
        )
    finally:
        application.close()
    return config, headers, tokenizer, label, est_settings


def _local_headers(root: Path) -> dict[str, SafetensorsHeader]:
    """The headers of the .safetensors files beside a local config.json (never the weights), as
    preflight reads a local directory: a model directory estimates like its revision would."""
    shards = sorted(p for p in root.glob("*.safetensors") if p.is_file())
    if not shards:
        return {}
    from tracker.shared.artifacts import MAX_HEADER_BYTES
    from tracker.shared.errors import TrackerError
    from tracker.sources.safetensors import header_length, parse_header

    headers: dict[str, SafetensorsHeader] = {}
    for p in shards[:MAX_SHARDS]:
        try:
            with p.open("rb") as fh:
                n = header_length(fh.read(8), MAX_HEADER_BYTES)
                headers[p.name] = parse_header(fh.read(n), file_size=p.stat().st_size)
        except (OSError, TrackerError) as exc:
            raise EstimateError(f"cannot read the header of {p.name}: {exc}") from exc
    return headers


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
    from tracker.estimate.checkpoint import INDEX_FILES
    from tracker.shared.artifacts import is_header_only

    sha = source.resolve_ref(repo_id, rev)
    config = parse_config(source.read_file(repo_id, sha, "config.json", limits.max_file_bytes))
    paths = {e.path for e in source.list_tree(repo_id, sha)}
    tokenizer = {
        name: source.read_file(repo_id, sha, name, limits.max_file_bytes)
        for name in (*TOKENIZER_FILES, *(INDEX_FILES if with_headers else ()))
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
    if est.memory.input is not None:  # an encoder built alone: its input, not token sequences
        return [
            f"input: {est.memory.input}",
            f"cost: {s.get('cost_epochs')} epochs × {s.get('cost_samples'):,} samples × "
            f"{s.get('cost_seq_len'):,} tokens = {est.cost.tokens:,} tokens",
        ]
    return [
        f"training: {s.get('train_seq_len'):,}-token sequences, batch 1; LoRA rank "
        f"{s.get('lora_rank')} on {s.get('lora_targets')}",
        f"serving: {s.get('serve_seq_len'):,}-token sequence for the KV cache",
        f"cost: {s.get('cost_epochs')} epochs × {s.get('cost_samples'):,} samples × "
        f"{s.get('cost_seq_len'):,} tokens = {est.cost.tokens:,} tokens",
    ]


def render(
    label: str, est: Estimate, settings_from: str = "defaults", at: int | None = None
) -> str:
    """The readable report, fitted to `at` columns (the terminal's width, 80 when piped): what
    was read and assumed, summary lines, where the parameters live, the fit table, cost,
    layout, checkpoint, findings and notes. Lines wrap at spaces (no number is cut); the fit
    table wraps its cells, and names any column it had to leave out."""
    from tracker.cli.textfit import Column, table, width, wrap

    at = at or width()
    p, v, m = est.params, est.verification, est.memory
    lines = [
        f"{label}  {est.architecture} ({est.model_type})" + ("  custom code" * est.custom_code)
    ]
    lines.append(f"settings: {settings_from}")
    lines += [f"assumed {line}" for line in assumptions(est)]
    lines.append(
        f"parameters: {p.total:,} total, {p.active:,} active per token (with the embedding; "
        f"{p.active_without_embedding:,} without), {p.embedding:,} embedding; "
        f"{est.layers} layers"
    )
    lines.append(
        f"verification: {v.status.value}" + (f" ({'; '.join(v.reasons)})" if v.reasons else "")
    )
    out = [w for line in lines for w in wrap(line, at)]
    out.append("")
    rows = [(n, f"{c:,}", f"{p.shares[n] * 100:.1f}%") for n, c in p.by_component.items()]
    components = [
        Column("component", keep=True),
        Column("count", keep=True, right=True),
        Column("share", keep=True, right=True),
    ]
    out.append(table("where the parameters live", components, rows, at))
    shipped = "as set" if m.serve_weights_source == "settings" else "as shipped"
    upcast = (
        f" (upcast to bf16: {m.serve_weights_upcast})" if m.serve_weights_upcast is not None else ""
    )
    experts = {
        "adapted": "; the routed experts adapted",
        "not adapted": "; the routed experts not adapted",
    }.get(m.lora_experts or "", "")
    out += wrap(
        f"memory (GB): full fine-tune {m.full_finetune} at batch 1 "
        f"({m.full_finetune_states} weights+grads+optimizer), LoRA {m.lora} (base "
        f"{m.lora_base}, {m.lora_adapter_params:,} adapter parameters{experts}), "
        f"serving weights {m.serve_weights} {shipped} ({m.serve_weights_format}){upcast} + KV "
        f"{m.kv_cache} + prefill working set {m.serve_prefill} per {m.serve_tokens}-token "
        "sequence",
        at,
    )
    out.append("")
    fits = [(c.name, c.full_finetune.summary, c.lora.summary, c.serve.summary) for c in est.cards]
    title = f"largest batch per card (VRAM / {est.settings.get('headroom', 1.15)})"
    if not v.vouched:
        title += ": NO VERDICT, the estimate is unverified (numbers for reference only)"
    cards = (
        Column("card", keep=True),
        Column("full fine-tune", priority=3),
        Column("LoRA", priority=2),
        Column("serving", priority=1),
    )
    out.append(table(title, cards, fits, at))
    upcasts = [(c.name, c.serve_upcast.summary) for c in est.cards if c.serve_upcast is not None]
    if upcasts:
        out += wrap(
            "serving upcast to bf16: " + "; ".join(f"{name}: {words}" for name, words in upcasts),
            at,
        )
    if not v.vouched:
        out += wrap("card fit: no verdict from an unverified estimate (numbers for reference)", at)
    cost = est.cost
    a = cost.assumptions
    # where the report says why the card was priced (reports stored before the choice do not)
    on = f"on {a.get('gpu') or 'no card'}"
    if "gpu_choice" in a:
        count = a.get("gpu_cards")
        held = "" if count is None or count == 1 else f"{count} cards, "
        on += f" ({held}{a['gpu_choice']})"
    tail = [
        f"cost: {cost.hours} h, ${cost.usd} {on} ({a['formula']})",
        f"layout: {est.structure.pattern.summary}",
    ]
    ck = est.checkpoint
    if ck:
        tail.append(
            f"checkpoint: {ck.params:,} stored params, {ck.bytes:,} bytes, "
            f"delta {ck.delta_pct}%, dtypes {dict(ck.dtypes)}"
        )
    tail += [f"[{f.level}] {f.id}: {f.evidence} (fix: {f.fix})" for f in est.findings]
    tail += [f"note: {note}" for note in est.notes]
    out += [w for line in tail for w in wrap(line, at)]
    return "\n".join(out) + "\n"


def main(args: Sequence[str]) -> int:
    """Run `tracker estimate` with `args` (after the word `estimate`); the exit status. A
    TrackerError is one line on stderr and its status from tracker.cli's table."""
    from tracker.shared.errors import TrackerError

    try:
        target, flags, values = parse_args(args)
        run(
            target,
            as_json=flags["--json"],
            no_headers=flags["--no-headers"],
            hub=flags["--hub"],
            values=values,
        )
    except TrackerError as exc:
        from tracker.cli.exits import exit_code_for, one_line

        sys.stderr.write(f"error: {one_line(exc)}\n")
        return exit_code_for(exc)
    return 0
