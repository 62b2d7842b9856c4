"""CLI: `tracker preflight ORG/NAME[@REV] | CONFIG_DIR [--transformers V]... [--json] [--hub]`."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from tracker.cli.estimating import read_stored, store_only
from tracker.estimate import EstimateSettings
from tracker.estimate.checkpoint import INDEX_FILES
from tracker.preflight.report import Preflight
from tracker.preflight.settings import PreflightSettings
from tracker.settings import Settings
from tracker.shared.artifacts import AUTO_MAP_FILES, Limits, is_header_only
from tracker.shared.domain import RepoId, SafetensorsHeader, TreeEntry, parse_repo_id
from tracker.shared.errors import (
    ConfigError,
    EstimateError,
    NotWatchedError,
    StoreNotFoundError,
    TrackerError,
)
from tracker.sources import RepoSource

if TYPE_CHECKING:
    from tracker.store import Store

MAX_SHARDS = 512
MAX_PY_FILES = 64


def register(app: typer.Typer) -> None:
    """Add this module's commands to `app`."""

    @app.command("preflight")
    def preflight_cmd(
        target: Annotated[
            str, typer.Argument(help="ORG/NAME[@REV] on the Hub, or a local directory")
        ],
        transformers: Annotated[
            list[str] | None,
            typer.Option(
                "--transformers",
                help="a transformers version to check the remote code against (repeat it); "
                "default: the watchlist's preflight.transformers for a watched repo",
            ),
        ] = None,
        throughput: Annotated[
            float | None, typer.Option("--throughput", help="download throughput in MB/s")
        ] = None,
        as_json: Annotated[bool, typer.Option("--json", help="print the preflight JSON")] = False,
        hub: Annotated[
            bool,
            typer.Option(
                "--hub", help="read ORG/NAME[@REV] from the Hub even when the store has it"
            ),
        ] = False,
    ) -> None:
        """Will its remote code import, what will it take to fetch and hold, what will LoRA adapt.

        Remote code (the auto_map modules and their relative imports) is read by AST and its
        transformers imports are checked against each version's symbol table, built from the
        version's wheel (fetched with pip into the preflight cache once). Capacity comes from the
        safetensors headers and the index's total_size; LoRA targets from the config.

        ORG/NAME[@REV] reads an ingested revision from the store, with no network (REV: a sha,
        a short sha, HEAD or HEAD~n; default HEAD); a repo or revision the store lacks, or
        --hub, reads the Hub (a full sha or a ref there; default main).
        """
        from tracker.preflight import preflight_snapshot
        from tracker.preflight.wheels import SymbolTables
        from tracker.settings import load_settings
        from tracker.shared.domain import Sha, Snapshot

        settings = load_settings()
        limits = settings.limits
        path = Path(target)
        pf = PreflightSettings()
        est = EstimateSettings()
        if path.is_dir():
            files, headers, tree = read_dir(path, limits)
            label = str(path)
        elif "/" in target and not path.exists() and not target.startswith((".", "/")):
            repo, _, rev = target.partition("@")
            repo_id = parse_repo_id(repo)
            pf, est = _watched_settings(settings.watchlist, repo_id)
            from tracker.app import build

            stored = None if hub else from_store(settings, repo_id, rev or "HEAD")
            if stored is not None:
                files, headers, tree, label = stored
            else:
                if rev and store_only(rev):
                    raise StoreNotFoundError(
                        f"{repo_id}@{rev}: no ingested revision matches; HEAD~n and short shas "
                        "resolve against ingested revisions only (the Hub takes a full sha or a ref)"
                    )
                application = build(settings)
                try:
                    files, headers, tree, label = fetch_repo(
                        application.sources.hub(), repo_id, rev or "main", limits
                    )
                finally:
                    application.close()
                label += " (from the Hub)"
        else:
            raise EstimateError(f"{target}: not a directory, and not ORG/NAME[@REV]")
        if transformers:
            block = {"transformers": list(transformers)}
            pf = replace(pf, transformers=PreflightSettings.from_mapping(block).transformers)
        if throughput is not None:
            if not throughput > 0:
                raise ConfigError(
                    "invalid option", (f"--throughput: must be > 0, got {throughput}",)
                )
            pf = replace(pf, throughput_mb_s=throughput)
        tables = SymbolTables.from_settings(settings)
        snapshot = Snapshot(RepoId("local/dir"), Sha("0" * 40), tuple(tree), files, headers)
        for v in pf.transformers:
            tables.get(v)  # a version that cannot be fetched is a one-line error here
        result = preflight_snapshot(snapshot, pf, tables.get, est)
        if as_json:
            typer.echo(json.dumps({"target": label, **result.to_json()}, indent=2))
        else:
            typer.echo(render(label, result))


def _watched_settings(
    watchlist: Path, repo_id: RepoId
) -> tuple[PreflightSettings, EstimateSettings]:
    """The preflight and estimate settings the watchlist gives `repo_id` (defaults if unwatched)."""
    from tracker.watchlist import load_watchlist

    try:
        watched = load_watchlist(watchlist).get(repo_id)
    except NotWatchedError:
        return PreflightSettings(), EstimateSettings()
    return (
        PreflightSettings.from_mapping(watched.preflight),
        EstimateSettings.from_mapping(watched.estimate),
    )


def from_store(
    settings: Settings, repo_id: RepoId, rev: str
) -> tuple[dict[str, bytes], dict[str, SafetensorsHeader], list[TreeEntry], str] | None:
    """What preflight reads of an ingested revision, from the store (None when the store, the
    repo or the revision is not there). Opens the store read-only: nothing is created."""

    def read(
        store: Store,
    ) -> tuple[dict[str, bytes], dict[str, SafetensorsHeader], list[TreeEntry], str]:
        sha = store.resolve(repo_id, rev)
        snap = store.snapshot(repo_id, sha)
        label = f"{repo_id}@{sha[:12]} (ingested revision {sha}, read from the store)"
        return dict(snap.files), dict(snap.headers), list(snap.tree), label

    return read_stored(settings, read)


def _read(path: Path, cap: int) -> bytes:
    try:
        with path.open("rb") as fh:
            data = fh.read(cap + 1)
    except OSError as exc:
        raise EstimateError(f"cannot read {path}: {exc.strerror or exc}") from exc
    if len(data) > cap:
        raise EstimateError(f"{path} is over the {cap:,}-byte cap")
    return data


def read_dir(
    root: Path, limits: Limits
) -> tuple[dict[str, bytes], dict[str, SafetensorsHeader], list[TreeEntry]]:
    """A local model directory: its JSON and .py files, the headers of its .safetensors files
    (never the weights) and a tree listing with sizes."""
    from tracker.sources.safetensors import header_length, parse_header

    files: dict[str, bytes] = {}
    headers: dict[str, SafetensorsHeader] = {}
    tree: list[TreeEntry] = []
    for p in sorted(root.rglob("*")):
        if not p.is_file() or any(part.startswith(".") for part in p.relative_to(root).parts):
            continue
        rel = p.relative_to(root).as_posix()
        size = p.stat().st_size
        tree.append(TreeEntry(rel, "", size))
        if is_header_only(rel):
            if len(headers) >= MAX_SHARDS:
                continue
            try:
                with p.open("rb") as fh:
                    n = header_length(fh.read(8), limits.max_header_bytes)
                    headers[rel] = parse_header(fh.read(n), file_size=size)
            except (OSError, TrackerError) as exc:
                raise EstimateError(f"cannot read the header of {rel}: {exc}") from exc
        elif rel.endswith((".json", ".py")):
            files[rel] = _read(p, limits.max_file_bytes)
    return files, headers, tree


def fetch_repo(
    source: RepoSource, repo_id: RepoId, rev: str, limits: Limits
) -> tuple[dict[str, bytes], dict[str, SafetensorsHeader], list[TreeEntry], str]:
    """What preflight reads of `repo_id` at `rev`: config and auto_map files, the index, the
    remote-code modules (auto_map and their relative imports) and the safetensors headers."""
    from tracker.ingest.snapshots import relative_imports
    from tracker.preflight.imports import auto_map_modules

    sha = source.resolve_ref(repo_id, rev)
    tree = source.list_tree(repo_id, sha)
    paths = {e.path for e in tree}
    files: dict[str, bytes] = {}
    for name in (*AUTO_MAP_FILES, *INDEX_FILES):
        if name in paths:
            files[name] = source.read_file(repo_id, sha, name, limits.max_file_bytes)
    queue = [p for p in auto_map_modules(files) if p in paths]
    while queue and len([f for f in files if f.endswith(".py")]) < MAX_PY_FILES:
        p = queue.pop(0)
        if p in files:
            continue
        files[p] = source.read_file(repo_id, sha, p, limits.max_file_bytes)
        queue += sorted(t for t in relative_imports(p, files[p]) if t in paths and t not in files)
    headers: dict[str, SafetensorsHeader] = {}
    for p in sorted(p for p in paths if is_header_only(p))[:MAX_SHARDS]:
        headers[p] = source.read_safetensors_header(repo_id, sha, p, limits.max_header_bytes)
    return files, headers, list(tree), f"{repo_id}@{sha[:12]}"


def _gb(n: float) -> str:
    return f"{n / 1e9:,.2f} GB"


def render(label: str, p: Preflight) -> str:
    """The three answers as text (deterministic)."""
    out = [label]
    rc = p.remote_code
    if not rc.modules and not rc.problems:
        out.append("remote code: none (no auto_map module)")
    else:
        out.append(f"remote code: {', '.join(rc.modules) or 'no module of it in this revision'}")
        for problem in rc.problems:
            out.append(f"  problem: {problem}")
        if not rc.versions and not rc.unchecked:
            out.append(
                "  no transformers version configured (--transformers V, or the watchlist's preflight.transformers)"
            )
        for v in rc.versions:
            missing = v["missing"]
            if v["importable"] or v["importable"] is None:
                state = "importable" if v["importable"] else "not checked"
                if missing:
                    state += "; missing where it does not stop loading: " + ", ".join(
                        f"{m['symbol']} ({m['where']})" for m in missing
                    )
                out.append(f"  transformers {v['version']}: {state}")
                out.extend(f"    {why}" for why in v.get("not_checked") or [])
                continue
            out.append(f"  transformers {v['version']}: does not import")
            for path in v.get("absent") or []:
                out.append(f"    cannot import: {path} is not in this revision")
            out.extend(f"    {why}" for why in v.get("broken") or [])
            for m in missing:
                gone = rc.first_missing.get(m["symbol"])
                lacks = (
                    f"no module {m['module']}"
                    if m["status"] == "no-module"
                    else f"{m['module']} lacks {m['name']}"
                )
                out.append(
                    f"    {m['symbol']} ({m['file']}:{m['line']}, {m['where']}): {lacks}"
                    + (f"; missing since {gone}" if gone else "")
                )
        for version, why in rc.unchecked.items():
            out.append(f"  transformers {version}: not checked ({why})")
        if rc.packages:
            out.append(
                "  other packages: " + ", ".join(f"{k} ({w})" for k, w in rc.packages.items())
            )
        for pkg, why in rc.compiled.items():
            out.append(f"  needs a native build: {pkg}: {why}")
    c = p.capacity
    if c is None:
        out.append(f"capacity: not known ({p.capacity_error})")
    else:
        out.append(
            f"capacity: {_gb(c.weights_bytes)} of weights ({c.weights_source}), "
            f"{c.params:,} stored parameters; {c.quantization_note}"
        )
        out.append(
            "  weights-only cards: " + ", ".join(f"{name} × {n}" for name, n in c.cards.items())
        )
        for name, b in c.boxes.items():
            if b["fits"]:
                out.append(f"  {name}: holds it ({b['spare_gb']:,.0f} GB spare)")
            else:
                out.append(f"  {name}: falls {b['short_gb']:,.0f} GB short")
        verdict = "outlives" if c.outlives_window else "within"
        out.append(
            f"  download: {_gb(c.download_bytes)} in {c.download_hours:.1f} hours at "
            f"{c.throughput_mb_s:g} MB/s ({verdict} the {c.window_hours:g} h provisioning window)"
        )
    lo = p.lora
    if lo is None:
        out.append(f"LoRA targets: not resolved ({p.lora_error})")
    else:
        out.append(f"LoRA targets (rank {lo.rank}):")
        for t, kinds in lo.targets.items():
            parts = ", ".join(f"{k} {v['modules']}" for k, v in kinds.items()) or "nothing"
            params = lo.adapter_params(t)
            unsized = sum(v.get("unsized", 0) for v in kinds.values())
            sized = (
                f"{params:,} adapter parameters"
                if params is not None
                else f"adapter parameters unknown ({unsized} modules unsized)"
            )
            out.append(f"  {t}: {lo.modules(t)} modules ({parts}); {sized}")
        for t, why in lo.unresolved.items():
            out.append(f"  {t}: not resolved ({why})")
        for note in lo.notes:
            out.append(f"  note: {note}")
    return "\n".join(out)
