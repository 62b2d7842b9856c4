"""CLI: `tracker demo`, the main job on the embedded default: a full poll cycle against the bundled Hub replica.

Builds the demo Hub (real model histories from demo/, replayed into git repos under
`<state>/demo-hub`) once, serves it on a free loopback port, points the real huggingface_hub client
at it, polls `watchlist.yaml`, analyses every new revision and prints a per-repo summary. Run
again, it ingests and fetches nothing and says so.
"""

from __future__ import annotations

import hashlib
import shutil
import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.console import Console

from tracker.cli import tables
from tracker.shared.domain import Severity

if TYPE_CHECKING:
    from tracker.app import App
    from tracker.pipeline import CycleReport

SEVERITY_ORDER = (Severity.CRITICAL, Severity.HIGH, Severity.MODERATE, Severity.LOW)


def _demo_digest(data_dir: Path) -> str:
    """A digest of the demo data, so the demo Hub is rebuilt when the data changes."""
    h = hashlib.sha256()
    for path in sorted(p for p in data_dir.rglob("*") if p.is_file()):
        h.update(path.relative_to(data_dir).as_posix().encode())
        h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()


def ensure_demo_hub(root: Path) -> tuple[bool, float]:
    """Build the demo Hub under `root` unless an identical build is there; (built now?, seconds)."""
    from tracker.replica.demo import DEMO_DIR, build_demo_hub

    stamp = root / ".demo-digest"
    digest = _demo_digest(DEMO_DIR)
    if stamp.is_file() and stamp.read_text().strip() == digest:
        return False, 0.0
    started = time.perf_counter()
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    build_demo_hub(root, gated=True)
    stamp.write_text(digest + "\n")
    return True, time.perf_counter() - started


def summarise(console: Console, app: App, report: CycleReport) -> None:
    """The demo's per-repo table and its closing line."""
    settings = app.settings
    advisories, analysis = app.advisories, app.analysis
    rows: list[list[str]] = []
    for r in report.repos:
        sev = Counter(a.severity for a in advisories.list_advisories(repo_id=r.poll.repo_id))
        sev_text = ", ".join(f"{sev[s]} {s.value}" for s in SEVERITY_ORDER if sev[s])
        n_params, fft = "-", "-"
        if r.poll.head:
            stored = analysis.estimate(r.poll.repo_id, r.poll.head)
            if stored is not None and stored.estimate is not None:
                est = stored.estimate
                n_params = tables.params(est.params.total)
                fft = tables.gb(est.memory.full_finetune)
            elif stored is not None:
                n_params = "unreadable"
        status = r.poll.status.value + (f": {r.poll.error}" if r.poll.error else "")
        if r.error:
            status = f"failing: {r.error}"
        rows.append(
            [
                r.poll.repo_id,
                status,
                str(r.poll.revisions_ingested),
                sev_text or "-",
                n_params,
                fft,
                str(r.poll.files_fetched),
                tables.size(r.poll.bytes_fetched),
                str(r.poll.requests if r.poll.requests is not None else "-"),
            ]
        )
    tables.print_table(
        console,
        "tracker demo: one poll cycle",
        [
            tables.Col("repo", keep=True),
            tables.Col("status"),
            tables.Col("revisions", 1, keep=True, right=True),
            tables.Col("advisories (all)", 1),
            tables.Col("params (head)", 2, keep=True, right=True),
            tables.Col("full fine-tune (head)", 3, keep=True, right=True),
            tables.Col("files fetched", 4, keep=True, right=True),
            tables.Col("bytes fetched", 4, keep=True, right=True),
            tables.Col("requests", 5, keep=True, right=True),
        ],
        rows,
    )
    files = sum(r.poll.files_fetched for r in report.repos)
    nbytes = sum(r.poll.bytes_fetched for r in report.repos)
    if report.revisions_ingested == 0 and files == 0:
        console.print(
            "nothing new: every repo is at its last ingested revision; "
            "0 revisions ingested, 0 files fetched, 0 advisories published"
        )
    else:
        console.print(
            f"ingested {report.revisions_ingested} revisions, fetched {files} files "
            f"({tables.size(nbytes)}), published {len(report.advisories)} advisories; "
            f"store: {settings.effective_database_url}"
        )


def demo(
    json_out: bool = typer.Option(False, "--json", help="Print the cycle report as JSON."),
    serve: bool = typer.Option(
        False, "--serve", help="Then serve the pages and API on HOST:PORT until interrupted."
    ),
    host: str = typer.Option("127.0.0.1", help="Address to bind with --serve."),
    port: int = typer.Option(8080, min=0, max=65535, help="Port with --serve (0: any free port)."),
) -> None:
    """Poll the demo watchlist against the bundled Hub replica (real model histories) and summarise."""
    from tracker.app import build
    from tracker.pipeline import cycle_json
    from tracker.replica import Replica
    from tracker.replica.demo import DEMO_DIR, DEMO_TOKEN
    from tracker.settings import load_settings

    base = load_settings()
    if "watchlist" not in base.model_fields_set:  # the packaged demo watchlist, from any directory
        base = base.model_copy(update={"watchlist": DEMO_DIR / "watchlist.yaml"})
    hub_root = base.state_dir / "demo-hub"
    console = tables.console(stderr=json_out)
    built, seconds = ensure_demo_hub(hub_root)
    if built:
        console.print(f"built the demo Hub in {hub_root} ({seconds:.1f} s)")
    with Replica(hub_root) as hub:
        settings = base.model_copy(update={"hf_endpoint": hub.url, "hf_token": DEMO_TOKEN})
        app = build(settings)
        try:
            console.print(f"Hub replica on {hub.url}; polling {settings.watchlist}")
            versions = _preflight_versions(console, app)
            report = app.pipeline.run_cycle()
            _preflight_outcome(console, app, versions)
            if json_out:
                typer.echo(cycle_json(report))
            else:
                summarise(console, app, report)
        except BaseException:
            app.close()
            raise
    try:
        if report.unclean:  # one line on stderr (the table says why); exit 1 after serving
            typer.echo(f"error: {report.unclean_line()}", err=True)
        if serve:
            serve_pages(console, app, host, port)
    finally:
        app.close()
    if report.unclean:
        raise typer.Exit(1)


def _preflight_versions(console: Console, app: App) -> list[str]:
    """The transformers versions the watchlist's preflight names; says which are not cached yet
    (the cycle fetches their wheels once: about 11 s for three on this project's machine)."""
    from tracker.preflight.wheels import watchlist_versions
    from tracker.shared.errors import TrackerError

    try:
        versions = watchlist_versions(app.settings.watchlist)
        missing = [v for v in versions if not app.symbol_tables.cached(v)]
    except TrackerError:
        return []
    if missing:
        console.print(
            f"preflight: the symbol tables of transformers {', '.join(missing)} are not cached in "
            f"{app.symbol_tables.cache_dir}; fetching their wheels once "
            "(`make preflight-wheels` does it ahead)"
        )
    return versions


def _preflight_outcome(console: Console, app: App, versions: list[str]) -> None:
    """One line per version whose table could not be had: the demo goes on without it."""
    for v in versions:
        why = app.symbol_tables.failed.get(v)
        if why:
            console.print(
                f"preflight: no symbol table for transformers {v} ({why}); remote code was "
                "listed but not checked against it"
            )


def serve_pages(console: Console, app: App, host: str, port: int) -> None:
    """Serve the pages and API over `app` on host:port until interrupted; print the home page URL
    once the socket is bound (port 0 picks a free one)."""
    import socket

    import uvicorn

    from tracker.api import create_app
    from tracker.api.wire import ProblemH11Protocol, ProblemHttpToolsProtocol

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise typer.BadParameter(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
    sock.listen(2048)  # listening before the URL is printed: a client that comes at once waits
    bound = sock.getsockname()[1]
    shown = f"[{host}]" if family == socket.AF_INET6 else host
    http = ProblemH11Protocol if app.settings.http_parser == "h11" else ProblemHttpToolsProtocol
    server = uvicorn.Server(
        uvicorn.Config(create_app(app), log_level="warning", log_config=None, http=http)
    )
    console.print(f"serving the results: open http://{shown}:{bound}/ in a browser (Ctrl-C stops)")
    try:
        server.run(sockets=[sock])
    except KeyboardInterrupt:  # uvicorn re-raises the Ctrl-C it shut down on: a clean stop
        pass
    finally:
        sock.close()


def register(app: typer.Typer) -> None:
    """Add `tracker demo`."""
    app.command("demo")(demo)
