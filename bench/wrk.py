"""HTTP read throughput (`make bench`, `python -m bench.run wrk`): `wrk` (Debian's package)
against `tracker serve` and against nginx (Debian's `nginx-light`) serving the same bytes, in one
run.

The store: `tracker demo` (the installed executable) polls the demo's real histories into a fresh
SQLite store (52 advisories from real diffs); then every demo repo's analysed history is
published again, revision by revision, through the pipeline's publish
(`tracker.advisories.service.publish`: classification with both snapshots, OSV validation,
lifecycle, one transaction per revision) into `REPLICAS` synthetic repos `ORG/NAME-copyNNN`,
until the store holds at least `MIN_ADVISORIES`. Only the diff and estimate of each revision are
read back from the demo's analysis instead of computed again. The copies' file trees are not
stored; the diff row uses a demo repo.

Rows: the API's advisory list, Atom feed and a diff, and the pages (home, a repo page at its head
and at `?rev=`, the same repo page asked with `Accept-Encoding: gzip`, an advisory page, a compare
page). Served: `tracker serve` (uvicorn, one process) on loopback;
the static side is nginx (`_NGINX`: one worker process, as tracker is one process; keep-alive,
TCP_NODELAY, sendfile; its access log written to /dev/null, as tracker's is) serving files holding the exact bytes
`tracker serve` answered for each URL. Every row runs `wrk -t2 -c8 -d10s --latency`, tracker
then nginx, one after the other, on the machine's two shared cores: first on the idle store, then
again while `_POLLER` commits no-change polls at `POLL_HZ`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

TRACKER = Path(sys.executable).with_name("tracker")
REPLICAS = 200
MIN_ADVISORIES = 10_000
TARGET = 15.0
NGINX = "/usr/sbin/nginx"
PG_ADMIN = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
PG_REPLICAS = 10
"""The PostgreSQL run's store: the demo and this many copies of it (its rows read the same
routes; the home page lists fewer repos)."""
DURATION_S = 10
COMMAND = "make bench (python -m bench.run wrk)"
DIFF_REPO = "mistralai/Mixtral-8x7B-v0.1"
PAGE_REPO = "meta-llama/Llama-2-7b-hf"

_NGINX = """
worker_processes 1;
daemon off;
pid {root}/nginx.pid;
error_log {root}/nginx-error.log warn;
events {{ worker_connections 1024; }}
http {{
    default_type application/octet-stream;
    access_log /dev/null;
    sendfile on;
    tcp_nodelay on;
    keepalive_requests 100000000;
    keepalive_timeout 75s;
    client_body_temp_path {root}/nginx-tmp;
    proxy_temp_path {root}/nginx-tmp;
    fastcgi_temp_path {root}/nginx-tmp;
    uwsgi_temp_path {root}/nginx-tmp;
    scgi_temp_path {root}/nginx-tmp;
    server {{
        listen 127.0.0.1:{port};
        root {root}/static;
    }}
}}
"""
"""nginx as a static server on loopback: one worker process (tracker serve is one), the files
under `static/` with their exact bytes."""

POLL_HZ = 10.0
_POLLER = """
import os, signal, sys, time
from pathlib import Path
from tracker.app import build
from tracker.settings import load_settings
from tracker.store.values import RepoStatus
app = build(load_settings(state_dir=Path(sys.argv[1])))
hz, out = float(sys.argv[2]), Path(sys.argv[3])
part = out.with_name(out.name + ".part")
ids = [s.repo_id for s in app.store.repo_states()]
signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
n, t0 = 0, time.monotonic()
try:
    while True:
        app.store.record_poll(ids[n % len(ids)], status=RepoStatus.OK, error=None, seconds=0.01)
        n += 1
        part.write_text(f"{n} {time.monotonic() - t0:.3f}")
        os.replace(part, out)  # whole: a SIGTERM during a write leaves the last count readable
        wait = t0 + n / hz - time.monotonic()
        if wait > 0:
            time.sleep(wait)
finally:
    app.close()
"""
"""A writer committing what a polling daemon commits for repos that did not change: the real
`Store.record_poll` (ingestion_state's state, counters and histogram), one repo after the other,
at `POLL_HZ` commits per second, in its own process."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _env(tmp: Path, db: str | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACKER_", "HF_"))}
    if db is not None:
        env["TRACKER_DATABASE_URL"] = db
    env.update(
        TRACKER_STATE_DIR=str(tmp / "state"),
        HF_HOME=str(tmp / "hf-home"),
        HF_HUB_DISABLE_TELEMETRY="1",
        HF_HUB_DISABLE_XET="1",
    )
    return env


def seed(
    tmp: Path,
    db: str | None = None,
    replicas: int = REPLICAS,
    min_advisories: int = MIN_ADVISORIES,
) -> dict[str, Any]:
    """The demo's store (`tracker demo`), then its histories published again into synthetic
    repos through the publish path (`republish`)."""
    t0 = time.perf_counter()
    demo = subprocess.run(
        [str(TRACKER), "demo"], env=_env(tmp, db), capture_output=True, text=True, timeout=1800
    )
    if demo.returncode != 0:
        raise RuntimeError(f"tracker demo failed: {demo.stderr[-2000:]}")
    demo_s = time.perf_counter() - t0
    t1 = time.perf_counter()
    stats = republish(tmp, replicas, db, min_advisories)
    stats.update(demo_s=demo_s, republish_s=time.perf_counter() - t1)
    return stats


def republish(
    tmp: Path,
    replicas: int = REPLICAS,
    db: str | None = None,
    min_advisories: int = MIN_ADVISORIES,
) -> dict[str, Any]:
    """Publish every demo repo's analysed history again, revision by revision, through the
    pipeline's publish (`tracker.advisories.service.publish`, as `Pipeline.analyse_revision`
    calls it: the stored changes of each revision against its previous one, the estimates
    before and after, both snapshots as the classification context; classification, OSV
    validation, lifecycle of the open advisories, one transaction per revision) into `replicas`
    synthetic repos `ORG/NAME-copyNNN` (each revision stored first, without its files), until
    the store holds `MIN_ADVISORIES`. Not repeated: the diff and the estimates (read back from
    the demo's analysis, not computed again), saving the analysis and marking the revision
    analysed."""
    from datetime import UTC, datetime, timedelta

    from tracker.advisories.effects import Context
    from tracker.advisories.service import publish
    from tracker.app import build
    from tracker.settings import load_settings
    from tracker.shared.domain import RepoId

    app = build(load_settings(state_dir=tmp / "state", database_url=db))
    publishes = 0
    try:
        store, analysis = app.store, app.analysis
        plans = []
        for st in store.repo_states():
            rid = st.repo_id
            snaps: dict[str, Any] = {}
            steps = []
            for r in store.revisions(rid):
                if not r.analysed or r.rewritten_away:
                    continue
                diff = analysis.diff(rid, r.previous, r.sha)
                after = analysis.estimate(rid, r.sha)
                before = analysis.estimate(rid, r.previous) if r.previous else None
                snaps[r.sha] = store.snapshot(rid, r.sha)
                context = Context(snaps.get(r.previous) if r.previous else None, snaps[r.sha])
                steps.append(
                    (
                        r,
                        diff.changes if diff else (),
                        before.estimate if before else None,
                        after.estimate if after else None,
                        context,
                    )
                )
            plans.append((st, steps))
        demo_advisories = len(app.advisories.list_advisories())
        prefix = app.settings.advisory_prefix
        at = datetime(2026, 12, 1, tzinfo=UTC)
        k = 0
        total = demo_advisories
        while k < replicas or total < min_advisories:
            k += 1
            for st, steps in plans:
                copy = RepoId(f"{st.repo_id}-copy{k:03d}")
                store.ensure_repo(copy, source_kind=st.source_kind, url=None, ref=st.ref)
                for r, changes, est_before, est_after, context in steps:
                    at += timedelta(seconds=1)
                    store.store_revision(copy, r.commit, [], {}, previous=r.previous, now=at)
                    made = publish(
                        app.advisories,
                        repo_id=copy,
                        commit=r.commit,
                        previous=r.previous,
                        changes=changes,
                        estimate_before=est_before,
                        estimate_after=est_after,
                        repo_url=f"https://huggingface.co/{copy}",
                        overrides=None,
                        prefix=prefix,
                        now=at,
                        context=context,
                    )
                    publishes += 1
                    total += len(made)
        diff_shas = [r.sha for r in store.revisions(RepoId(DIFF_REPO), include_rewritten=False)]
        page_shas = [r.sha for r in store.revisions(RepoId(PAGE_REPO), include_rewritten=False)]
        page_advisories = app.advisories.list_advisories(repo_id=PAGE_REPO)
        count = len(app.advisories.list_advisories())
    finally:
        app.close()
    return {
        "replicas": k,
        "demo_advisories": demo_advisories,
        "advisories": count,
        "publishes": publishes,
        "repos": len(plans) * (k + 1),
        "diff": (diff_shas[0], diff_shas[-1]),
        "page_rev": page_shas[0],
        "page_advisory": page_advisories[0].id,
    }


@dataclass(frozen=True)
class Wrk:
    rps: float
    p50_ms: float
    p99_ms: float
    requests: int
    errors: int


_UNITS = {"us": 0.001, "ms": 1.0, "s": 1000.0}


def _ms(text: str) -> float:
    m = re.fullmatch(r"([\d.]+)(us|ms|s)", text.strip())
    if not m:
        raise ValueError(f"wrk latency {text!r}")
    return float(m.group(1)) * _UNITS[m.group(2)]


GZIP = "Accept-Encoding: gzip"
"""The header of the gzip row (its nginx side serves the gzipped bytes tracker answered)."""


def wrk(url: str, header: str | None = None) -> Wrk:
    extra = ["-H", header] if header else []
    done = subprocess.run(
        ["wrk", "-t2", "-c8", f"-d{DURATION_S}s", "--latency", *extra, url],
        capture_output=True,
        text=True,
        timeout=DURATION_S * 6 + 30,
        check=True,
    )
    out = done.stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    p50 = _ms(re.search(r"^\s+50%\s+(\S+)", out, re.M).group(1))  # type: ignore[union-attr]
    p99 = _ms(re.search(r"^\s+99%\s+(\S+)", out, re.M).group(1))  # type: ignore[union-attr]
    n = int(re.search(r"(\d+) requests in", out).group(1))  # type: ignore[union-attr]
    bad = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
    errs = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    errors = (int(bad.group(1)) if bad else 0) + (sum(int(x) for x in errs.groups()) if errs else 0)
    return Wrk(rps, p50, p99, n, errors)


def _wait(url: str, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args} exited with {proc.returncode}")
        try:
            if httpx.get(url, timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"{url} did not answer")


def _nginx(tmp: Path, port: int) -> subprocess.Popen[bytes]:
    (tmp / "nginx-tmp").mkdir(exist_ok=True)
    conf = tmp / "nginx.conf"
    conf.write_text(_NGINX.format(root=tmp, port=port))
    return subprocess.Popen(
        [NGINX, "-c", str(conf), "-p", str(tmp)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def rows_of(seeded: dict[str, Any]) -> list[tuple[str, str, str | None]]:
    """(label, path, request header) of each row: the API's, then the pages'."""
    frm, to = seeded["diff"]
    org, name = DIFF_REPO.split("/")
    rows: list[tuple[str, str]] = [
        ("advisory list (first page, 100 items)", "/v1/advisories?limit=100"),
        ("Atom feed of every repo (100 newest entries)", "/v1/feeds/advisories.atom"),
        (
            f"diff of {DIFF_REPO}, first → last revision",
            f"/v1/repos/{org}/{name}/diff?from={frm}&to={to}",
        ),
        (f"home page ({seeded['repos']:,} repos)", "/"),
        (f"repo page of {PAGE_REPO} at its head", f"/repos/{PAGE_REPO}"),
        (
            f"repo page of {PAGE_REPO} at its first revision",
            f"/repos/{PAGE_REPO}?rev={seeded['page_rev']}",
        ),
        (f"advisory page {seeded['page_advisory']}", f"/advisories/{seeded['page_advisory']}"),
        (
            f"compare page of {DIFF_REPO}, first → last revision",
            f"/repos/{org}/{name}/compare?from={frm}&to={to}",
        ),
    ]
    out: list[tuple[str, str, str | None]] = [(label, path, None) for label, path in rows]
    out.insert(
        6,
        (f"repo page of {PAGE_REPO} at its head, gzip", f"/repos/{PAGE_REPO}", GZIP),
    )
    return out


def _polled_once(tmp: Path, db: str | None) -> None:
    """Every repo as a daemon leaves it after its first cycle: its last poll recorded, `ok`
    (the copies were made without one). Else the poller's first poll of each would be a new
    poll outcome (`new` -> `ok`, migration 0014), not a no-change poll."""
    from tracker.app import build
    from tracker.settings import load_settings
    from tracker.store.values import RepoStatus

    app = build(load_settings(state_dir=tmp / "state", database_url=db))
    try:
        for st in app.store.repo_states():
            if st.status is not RepoStatus.OK:
                app.store.record_poll(st.repo_id, status=RepoStatus.OK, error=None, seconds=0.01)
    finally:
        app.close()


def measure(tmp: Path, seeded: dict[str, Any], db: str | None = None) -> list[dict[str, Any]]:
    _polled_once(tmp, db)
    port, static_port = _free_port(), _free_port()
    api = f"http://127.0.0.1:{port}"
    rows = rows_of(seeded)
    (tmp / "static").mkdir()
    procs: list[subprocess.Popen[bytes]] = []
    out: list[dict[str, Any]] = []
    try:
        serve = subprocess.Popen(
            [str(TRACKER), "serve", "--port", str(port)],
            env=_env(tmp, db),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        procs.append(serve)
        _wait(f"{api}/healthz", serve)
        files = []
        for i, (label, path, header) in enumerate(rows):
            t0 = time.perf_counter()
            asked = dict([header.split(": ", 1)]) if header else {}
            with httpx.stream("GET", api + path, headers=asked, timeout=120) as answer:
                body = answer.read() if not header else b"".join(answer.iter_raw())
            first_s = time.perf_counter() - t0
            answer.raise_for_status()
            if header and answer.headers.get("content-encoding") != "gzip":
                raise RuntimeError(f"{path} was not answered gzipped to {header!r}")
            name_ = f"row{i}.bin"
            (tmp / "static" / name_).write_bytes(body)  # the bytes on the wire
            files.append((label, path, name_, len(body), first_s, header))
        os.chmod(tmp, 0o755)  # nginx's worker may run as another user
        static = _nginx(tmp, static_port)
        procs.append(static)
        _wait(f"http://127.0.0.1:{static_port}/{files[0][2]}", static)
        for _, _, name_, size, _, _ in files:
            got = httpx.get(f"http://127.0.0.1:{static_port}/{name_}", timeout=30).content
            if len(got) != size:
                raise RuntimeError(f"nginx served {len(got)} bytes of {name_}, not {size}")
        for hz in (0.0, POLL_HZ):
            poller = None
            count = tmp / "polls.txt"
            if hz:
                poller = subprocess.Popen(
                    [sys.executable, "-c", _POLLER, str(tmp / "state"), str(hz), str(count)],
                    env=_env(tmp, db),
                    stdout=subprocess.DEVNULL,
                )
                procs.append(poller)
                deadline = time.monotonic() + 60
                while not count.exists() and time.monotonic() < deadline:
                    time.sleep(0.1)
            try:
                for label, path, name_, size, first_s, header in files:
                    ours = wrk(api + path, header)
                    theirs = wrk(f"http://127.0.0.1:{static_port}/{name_}", header)
                    out.append(
                        {
                            "label": label, "path": path, "bytes": size, "hz": hz,
                            "tracker": ours, "static": theirs, "first_s": first_s,
                        }
                    )  # fmt: skip
            finally:
                if poller is not None:
                    poller.send_signal(signal.SIGTERM)
                    poller.wait(timeout=30)
                    polls, secs = count.read_text().split()
                    for row in out:
                        if row["hz"]:
                            row["polls"] = (int(polls), float(secs))
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
    return out


def _seeded(tmp: Path) -> dict[str, Any]:
    """`seed(tmp)`; or, with `WRK_SEEDED=DIR`, the store seeded into DIR once and copied from
    there after (the seed takes minutes; the rows read it, a poller writes only poll state)."""
    keep = os.environ.get("WRK_SEEDED")
    if not keep:
        return seed(tmp)
    kept = Path(keep)
    facts = kept / "seeded.json"
    if not facts.exists():
        shutil.rmtree(kept, ignore_errors=True)
        kept.mkdir(parents=True)
        stats = seed(kept)
        facts.write_text(json.dumps(stats))
    (tmp / "state").mkdir(parents=True)
    for db in (kept / "state").glob("tracker.db*"):  # the store only, not the demo's Hub
        shutil.copy2(db, tmp / "state" / db.name)
    return dict(json.loads(facts.read_text()))


def _postgres() -> tuple[dict[str, Any], list[dict[str, Any]], tuple[float, ...]] | str:
    """The rows over a fresh PostgreSQL database (`WRK_PG_URL`'s server, else `PG_ADMIN`),
    seeded with the demo and `PG_REPLICAS` copies; or why not."""
    import sqlalchemy as sa

    admin_url = os.environ.get("WRK_PG_URL", PG_ADMIN)
    name = f"tracker_bench_wrk_{os.getpid()}"
    try:
        admin = sa.create_engine(admin_url, isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    except sa.exc.SQLAlchemyError as exc:
        return f"not run: PostgreSQL at {admin_url} cannot be used ({str(exc).splitlines()[0]})"
    db = sa.make_url(admin_url).set(database=name).render_as_string(hide_password=False)
    tmp = Path(tempfile.mkdtemp(prefix="tracker-bench-wrk-pg-"))
    try:
        seeded = seed(tmp, db, PG_REPLICAS, 0)
        rows = measure(tmp, seeded, db)
        return seeded, rows, os.getloadavg()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def _table(rows: list[dict[str, Any]], backend: str) -> list[str]:
    out = []
    for r in rows:
        t, s = r["tracker"], r["static"]
        ratio = s.rps / t.rps if t.rps else float("inf")
        errs = "" if not (t.errors or s.errors) else f" (errors: {t.errors} / {s.errors})"
        out.append(
            f"| `{r['path'].split('?')[0]}` {r['label']}{errs} | {backend}, "
            f"{f'polled at {POLL_HZ:.0f} Hz' if r['hz'] else 'idle'} | {r['bytes']:,} | "
            f"{r['first_s'] * 1000:,.0f} ms | {t.rps:,.0f} | "
            f"{t.p50_ms:.1f} ms | {t.p99_ms:.1f} ms | {s.rps:,.0f} | {s.p50_ms:.1f} ms | "
            f"{s.p99_ms:.1f} ms | {ratio:.1f}× | {'yes' if ratio <= TARGET else 'NO'} |"
        )
    return out


def run() -> str:
    if shutil.which("wrk") is None or not Path(NGINX).exists():
        return (
            f"## HTTP read throughput (`{COMMAND}`)\n\nNot run: `wrk` or nginx is not installed "
            "(Debian: `apt-get install wrk nginx-light`; `make bench` installs them)."
        )
    tmp = Path(tempfile.mkdtemp(prefix="tracker-bench-wrk-"))
    try:
        seeded = _seeded(tmp)
        load_before = os.getloadavg()
        rows = measure(tmp, seeded)
        load_after = os.getloadavg()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    pg = _postgres() if os.environ.get("WRK_POSTGRES", "1") != "0" else "not run (WRK_POSTGRES=0)"
    nginx_version = subprocess.run(
        [NGINX, "-v"], capture_output=True, text=True, check=False
    ).stderr.strip()
    lines = [
        f"## HTTP read throughput (`{COMMAND}`)",
        "",
        f"`wrk -t2 -c8 -d{DURATION_S}s --latency` against `tracker serve` (uvicorn, one process, "
        f"SQLite) and against nginx ({nginx_version.removeprefix('nginx version: ')}, Debian's "
        "nginx-light: one worker process, keep-alive, TCP_NODELAY, sendfile) serving the same "
        "bytes from files, one after the other for each row. The store holds "
        f"{seeded['advisories']:,} advisories: the demo's {seeded['demo_advisories']} real ones "
        f"(`tracker demo`, {seeded['demo_s']:.0f} s), then the demo's histories published again "
        f"through the publish path (`tracker.advisories.service.publish`, as the pipeline calls "
        f"it) into {seeded['replicas']} synthetic copies of each demo repo: "
        f"{seeded['publishes']:,} revisions in {seeded['republish_s']:.0f} s "
        f"({seeded['republish_s'] / seeded['publishes'] * 1000:.0f} ms each; each revision's "
        "diff and estimates read back from the demo's analysis, not computed again). "
        "`tracker serve` runs as shipped (uvicorn's access log on, to /dev/null here as "
        "nginx's is); a repeated request is answered from the answer kept for it "
        "(`tracker.api.memo.MemoHits`: per request it checks the read token by the route's own "
        "rule, the store's generation and the watchlist file's stat, then `If-None-Match`; no "
        "route, validation or thread pool); the pages are kept like the API's answers "
        '(`tracker.web.mount`). "first answer" is the request that rendered the row\'s '
        "answer, before wrk. Load average (1, 5, 15 min) "
        f"{', '.join(f'{x:.1f}' for x in load_before)} before and "
        f"{', '.join(f'{x:.1f}' for x in load_after)} after the runs (2 cores, shared with "
        "other work: nginx's numbers are far below a quiet machine's too)."
        + (
            " The store was seeded once into `WRK_SEEDED` (by this run if it was empty, else by "
            "an earlier one) and copied."
            if os.environ.get("WRK_SEEDED")
            else ""
        ),
        "",
        "The gzip row asks with `Accept-Encoding: gzip` (tracker answers the gzip form kept with "
        "the page, compressed once per render); its nginx side serves the same gzipped bytes "
        "from a file. bytes: the bytes on the wire.",
        "",
        "Each row runs twice: on the idle store, and while a second process commits no-change "
        f"polls at {POLL_HZ:.0f} Hz through the real `Store.record_poll` (what a daemon polling a "
        "few thousand repos commits; each commit changes SQLite's data_version, not the "
        "store's generation counters, so the kept answers stay current)"
        + (
            f": {polls[0]:,} polls committed in {polls[1]:.0f} s ({polls[0] / polls[1]:.1f}/s) "
            "during those rows."
            if (polls := next((r["polls"] for r in rows if "polls" in r), None))
            else "."
        ),
        "",
        "| endpoint | store | bytes | first answer | tracker req/s | p50 | p99 | nginx req/s | p50 | p99 | nginx ÷ tracker | within 15× |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
        *_table(rows, "SQLite"),
        "",
    ]
    if isinstance(pg, str):
        lines.append(f"PostgreSQL: {pg}.")
    else:
        pg_seeded, pg_rows, pg_load = pg
        lines += [
            "The same rows over PostgreSQL (the server on 127.0.0.1:5432, a fresh database): "
            f"the demo and {pg_seeded['replicas']} copies of it ({pg_seeded['advisories']:,} "
            f"advisories, {pg_seeded['repos']:,} repos; a smaller store than SQLite's, so the "
            "home page is smaller). PostgreSQL's generation is the cluster's current snapshot "
            "(`tracker.store.generation`, migration 0013), read with one query per request in "
            "the thread pool, and any commit in the cluster moves it: while the poller runs, "
            "kept answers are rendered again after every poll (and after any other session's "
            "commit on the shared server, idle rows included). Errors are wrk's timeouts (2 s). "
            "Load average after: "
            f"{', '.join(f'{x:.1f}' for x in pg_load)}.",
            "",
            "| endpoint | store | bytes | first answer | tracker req/s | p50 | p99 | nginx req/s | p50 | p99 | nginx ÷ tracker | within 15× |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
            *_table(pg_rows, "PostgreSQL"),
        ]
    return "\n".join(lines)
