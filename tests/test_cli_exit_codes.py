"""The README's exit-code table, as scripts meet it: the installed `tracker` run as a process.

0 ok, 1 other error (a poll where a repo failed, is gone or gated), 2 bad input (settings,
watchlist, repo id, unreadable config, bad flags), 3 not found, 4 access denied, 5 other source
error, 6 store error, 7 advisory error. Every failure says what went wrong in one `error:` line
on stderr and never shows a traceback. The repos are real git repos served by the Hub replica;
the config is a real one from tests/data/configs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tracker.replica import Replica
from tracker.replica.repos import commit, init_repo

pytestmark = pytest.mark.replica

TRACKER = Path(sys.executable).with_name("tracker")
CONFIG = Path(__file__).parent / "data" / "configs" / "Qwen__Qwen2.5-1.5B.json"
DAY = datetime(2025, 3, 1, tzinfo=UTC)
UNREACHABLE = "http://127.0.0.1:9"


@dataclass(frozen=True)
class World:
    """A replica with acme/tiny (two revisions) and acme/gated, and a store that holds acme/tiny."""

    root: Path
    url: str
    env: dict[str, str]


def run(world: World, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(TRACKER), *args],
        env={**world.env, **env},
        cwd=world.root,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("exit-codes")
    hub = root / "hub"
    config = json.loads(CONFIG.read_text())
    tiny = init_repo(hub, "acme/tiny")
    commit(tiny, {"config.json": json.dumps(config).encode()}, "upload", date=DAY)
    config["max_position_embeddings"] = 65536
    commit(tiny, {"config.json": json.dumps(config).encode()}, "longer", date=DAY.replace(day=2))
    commit(init_repo(hub, "acme/gated"), {"config.json": b"{}"}, "one", date=DAY)
    (hub / "acme" / "gated.replica.json").write_text('{"gated": "manual"}')
    (root / "watchlist.yaml").write_text("repos:\n  - id: acme/tiny\n")
    (root / "bad.yaml").write_text("repos:\n  - id: acme/tiny\n    poll_intervall: 1h\n")
    (root / "gated.yaml").write_text("repos:\n  - id: acme/tiny\n  - id: acme/gated\n")
    (root / "a-file").write_text("not a directory\n")
    base = {k: v for k, v in os.environ.items() if not k.startswith(("TRACKER_", "HF_"))}
    with Replica(hub) as replica:
        env = {
            **base,
            "TRACKER_STATE_DIR": str(root / "state"),
            "TRACKER_WATCHLIST": str(root / "watchlist.yaml"),
            "TRACKER_HF_ENDPOINT": replica.url,
            "TRACKER_RETRY_ATTEMPTS": "1",
        }
        w = World(root, replica.url, env)
        first = run(w, "poll", "--once")
        assert first.returncode == 0, first.stderr
        yield w


CASES: list[tuple[str, tuple[str, ...], dict[str, str], int, str]] = [
    # 0: ok
    ("watch list", ("watch", "list"), {}, 0, ""),
    ("poll --once", ("poll", "--once"), {}, 0, ""),
    ("history", ("history", "acme/tiny"), {}, 0, ""),
    ("show", ("show", "acme/tiny@HEAD", "config.json"), {}, 0, ""),
    ("diff", ("diff", "acme/tiny", "HEAD~1", "HEAD"), {}, 0, ""),
    ("advisories list", ("advisories", "list"), {}, 0, ""),
    ("estimate file", ("estimate", str(CONFIG)), {}, 0, ""),
    (
        "estimate, ingested",
        ("estimate", "acme/tiny@HEAD~1"),
        {"TRACKER_HF_ENDPOINT": UNREACHABLE},
        0,
        "",
    ),
    ("estimate hub", ("estimate", "acme/tiny", "--hub", "--no-headers"), {}, 0, ""),
    ("advisories list, floor", ("advisories", "list", "--min-severity", "HIGH"), {}, 0, ""),
    (
        "advisories list, no store",
        ("advisories", "list"),
        {"TRACKER_STATE_DIR": "state-none"},
        0,
        "",
    ),
    # 1: a repo failed, is gone or gated
    (
        "poll --once, gated repo",
        ("poll", "--once"),
        {"TRACKER_WATCHLIST": "gated.yaml"},
        1,
        "1 of 2 repos did not poll cleanly: acme/gated (gated)",
    ),
    (
        "poll --once, unreachable Hub",
        ("poll", "--once"),
        {"TRACKER_HF_ENDPOINT": UNREACHABLE, "TRACKER_STATE_DIR": "state-unreachable"},
        1,
        "1 of 1 repos did not poll cleanly: acme/tiny (failing)",
    ),
    (
        "poll --once --json, gated repo",
        ("poll", "--once", "--json"),
        {"TRACKER_WATCHLIST": "gated.yaml"},
        1,
        "acme/gated (gated)",
    ),
    # 2: bad input
    ("watch add, bad id", ("watch", "add", "acme/../x"), {}, 2, "acme/../x"),
    ("watch add, no such --git", ("watch", "add", "acme/y", "--git", "nope"), {}, 2, "--git nope"),
    (
        "watch add, interval under the floor",
        ("watch", "add", "acme/y", "--poll-interval", "5s"),
        {},
        2,
        "below the floor of 1m",
    ),
    (
        "watch list, invalid watchlist",
        ("watch", "list"),
        {"TRACKER_WATCHLIST": "bad.yaml"},
        2,
        "unknown key 'poll_intervall' (did you mean 'poll_interval'?)",
    ),
    ("poll --json without --once", ("poll", "--json"), {}, 2, "--json needs --once"),
    ("estimate, missing file", ("estimate", "missing.json"), {}, 2, "missing.json"),
    (
        "advisories list, bad severity",
        ("advisories", "list", "--severity", "urgent"),
        {},
        2,
        "--severity",
    ),
    (
        "advisories list, bad floor",
        ("advisories", "list", "--min-severity", "urgent"),
        {},
        2,
        "--min-severity 'urgent' must be one of",
    ),
    ("diff, bad kind", ("diff", "acme/tiny", "HEAD~1", "HEAD", "--kind", "confg"), {}, 2, "confg"),
    (
        "bad log level",
        ("history", "acme/tiny"),
        {"TRACKER_LOG_LEVEL": "loud"},
        2,
        "TRACKER_LOG_LEVEL: 'LOUD' is not one of DEBUG, INFO, WARNING, ERROR, CRITICAL",
    ),
    (
        "state dir is a file",
        ("watch", "list"),
        {"TRACKER_STATE_DIR": "a-file"},
        2,
        "TRACKER_STATE_DIR: 'a-file' exists and is not a directory",
    ),
    (
        "malformed database URL",
        ("advisories", "list"),
        {"TRACKER_DATABASE_URL": "postgresql://u@h:port/db"},
        2,
        "TRACKER_DATABASE_URL: 'postgresql://u@h:port/db' has a bad port",
    ),
    # 2: usage errors (click's), one line with a hint, not click's boxed text
    (
        "unknown option",
        ("watch", "list", "--bogus"),
        {},
        2,
        "error: no such option: --bogus (try: tracker watch list --help)",
    ),
    (
        "missing argument",
        ("history",),
        {},
        2,
        "error: missing argument 'repo' (try: tracker history --help)",
    ),
    ("unknown command", ("hsitory",), {}, 2, "error: no such command 'hsitory'"),
    (
        "bad value",
        ("serve", "--port", "70000"),
        {},
        2,
        "error: invalid value for '--port': Input should be less than or equal to 65535 "
        "(try: tracker serve --help)",
    ),
    (
        "replica serve, missing option",
        ("replica", "serve"),
        {},
        2,
        "error: missing option '--root' (try: tracker replica serve --help)",
    ),
    # 2: a server that cannot start (the replica's port is in use)
    ("serve, port in use", ("serve", "--port", "{port}"), {}, 2, "cannot bind 127.0.0.1:{port}"),
    (
        "serve, host does not resolve",
        ("serve", "--host", "nowhere.invalid"),
        {},
        2,
        "error: --host 'nowhere.invalid' does not resolve",
    ),
    (
        "serve, bad setting",
        ("serve",),
        {"TRACKER_LOG_LEVEL": "loud"},
        2,
        "TRACKER_LOG_LEVEL: 'LOUD' is not one of",
    ),
    (
        "replica serve, port in use",
        ("replica", "serve", "--root", "hub", "--port", "{port}"),
        {},
        2,
        "cannot bind 127.0.0.1:{port}",
    ),
    (
        "replica serve, root missing",
        ("replica", "serve", "--root", "nope"),
        {},
        2,
        "error: replica root nope is not a directory",
    ),
    # 3: not found
    (
        "show, missing path",
        ("show", "acme/tiny@HEAD", "nope.json"),
        {},
        3,
        "nope.json does not exist",
    ),
    (
        "watch remove, unknown repo",
        ("watch", "remove", "acme/other"),
        {},
        3,
        "acme/other is not in",
    ),
    ("history, unknown repo", ("history", "acme/other"), {}, 3, "acme/other"),
    (
        "advisories show, unknown id",
        ("advisories", "show", "x_TRACKER-2099-9"),
        {},
        3,
        "x_TRACKER-2099-9",
    ),
    (
        "poll, repo not watched",
        ("poll", "acme/other", "--once"),
        {},
        3,
        "acme/other is not in the watchlist",
    ),
    ("estimate, repo not on the Hub", ("estimate", "acme/none"), {}, 3, "acme/none"),
    (
        "estimate, HEAD~n not ingested",
        ("estimate", "acme/tiny@HEAD~5"),
        {},
        3,
        "HEAD~n and short shas resolve against ingested revisions only",
    ),
    ("diff, unknown revision", ("diff", "acme/tiny", "HEAD~1", "abcdef12"), {}, 3, "abcdef12"),
    (
        "history, no store",
        ("history", "acme/tiny"),
        {"TRACKER_STATE_DIR": "state-none"},
        3,
        "no store at",
    ),
    # 4: access denied
    ("estimate, gated repo", ("estimate", "acme/gated"), {}, 4, "gated"),
    # 5: other source error
    (
        "estimate, unreachable Hub",
        ("estimate", "acme/tiny", "--hub"),
        {"TRACKER_HF_ENDPOINT": UNREACHABLE},
        5,
        "connection failed",
    ),
    # 6: store error
    (
        "database down",
        ("watch", "list"),
        {"TRACKER_DATABASE_URL": "postgresql+psycopg://postgres@127.0.0.1:1/none"},
        6,
        "cannot open store",
    ),
    # 7: advisory error
    ("advisories export onto a file", ("advisories", "export", "a-file"), {}, 7, "a-file"),
]


@pytest.mark.parametrize(
    ("args", "env", "code", "says"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_exit_code_and_one_line(
    world: World, args: tuple[str, ...], env: dict[str, str], code: int, says: str
) -> None:
    port = world.url.rsplit(":", 1)[1].rstrip("/")
    args = tuple(a.replace("{port}", port) for a in args)
    says = says.replace("{port}", port)
    done = run(world, *args, **env)
    assert done.returncode == code, (done.returncode, done.stdout[-500:], done.stderr[-1500:])
    assert "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    if code == 0:
        assert errors == []
        return
    assert len(errors) == 1, done.stderr
    assert says in errors[0], (says, errors[0])
    # the error line is the last thing on stderr (log lines, if any, come before it)
    assert done.stderr.rstrip("\n").splitlines()[-1] == errors[0]


def test_demo_exits_1_when_a_repo_is_gone(world: World) -> None:
    (world.root / "demo.yaml").write_text("repos:\n  - id: acme/not-in-the-demo\n")
    done = run(
        world,
        "demo",
        TRACKER_WATCHLIST=str(world.root / "demo.yaml"),
        TRACKER_STATE_DIR=str(world.root / "demo-state"),
    )
    assert done.returncode == 1, done.stderr[-1500:]
    assert "Traceback" not in done.stderr
    last = done.stderr.rstrip("\n").splitlines()[-1]
    assert last == "error: 1 of 1 repos did not poll cleanly: acme/not-in-the-demo (gone)"


def test_unknown_tracker_variables_are_warned_about(world: World) -> None:
    done = run(world, "watch", "list", "--json", TRACKER_STAE_DIR="x")
    assert done.returncode == 0
    (line,) = [json.loads(x) for x in done.stderr.splitlines() if "unknown_variable" in x]
    assert line["level"] == "warning"
    assert line["message"] == (
        "TRACKER_STAE_DIR is not a tracker setting (did you mean TRACKER_STATE_DIR?); it is ignored"
    )
