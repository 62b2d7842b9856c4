"""Issue 10, item 9: the daemon at the upper bound of every setting the review found unbounded.

`TRACKER_WATCHLIST_SYNC_S=inf` killed `tracker poll`, `TRACKER_WEBHOOK_TIMEOUT_S=inf` killed its
delivery thread, `TRACKER_RENDER_BACKSTOP_WALL_S=inf` / `..._CPU_S=10**23` left every
chat-template revision pending. Those values are now refused at start
(tests/test_settings_bounds.py); here each such setting is at its largest allowed value and the
daemon still polls, analyses a chat-template change and delivers its advisory's webhook.
The template change is ibm-granite/granite-3.1-1b-a400m-instruct's real one (corpus history).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from hookkit import Receiver

from tracker.replica.repos import commit, init_repo

TRACKER = Path(sys.executable).with_name("tracker")
GRANITE = (
    Path(__file__).resolve().parents[3]
    / "shared/corpus/histories/ibm-granite__granite-3.1-1b-a400m-instruct"
)
AT_THE_BOUND = {
    "TRACKER_WATCHLIST_SYNC_S": "86400",
    "TRACKER_WEBHOOK_TIMEOUT_S": "600",
    "TRACKER_WEBHOOK_RETRY_BASE_S": "86400",
    "TRACKER_WEBHOOK_RETRY_MAX_S": "604800",
    "TRACKER_POLL_BACKOFF_MAX_S": "31536000",
    "TRACKER_RENDER_BACKSTOP_WALL_S": "86400",
    "TRACKER_RENDER_BACKSTOP_CPU_S": "86400",
    "TRACKER_RATE_BUDGET": "on",
    "TRACKER_RATE_API_PER_WINDOW": "1000000",
    "TRACKER_RATE_RESOLVERS_PER_WINDOW": "1000000",
    "TRACKER_RATE_PAGES_PER_WINDOW": "1000000",
    "TRACKER_RATE_BURST": "1000000",
}


@pytest.mark.skipif(not GRANITE.is_dir(), reason="needs ../shared/corpus")
def test_the_daemon_polls_analyses_and_delivers_with_settings_at_their_bounds(
    tmp_path: Path,
) -> None:
    git = init_repo(tmp_path / "git", "acme/granite")
    config = (GRANITE / "01_0a854d48_config.json").read_bytes()
    first = commit(git, {"config.json": config,
                         "tokenizer_config.json": (GRANITE / "01_0a854d48_tokenizer_config.json")
                         .read_bytes()}, "Model upload")  # fmt: skip
    second = commit(
        git,
        {"tokenizer_config.json": (GRANITE / "02_c4f8e0dd_tokenizer_config.json").read_bytes()},
        "Updated chat template",
    )
    (tmp_path / "watchlist.yaml").write_text(
        f"repos:\n  - id: acme/granite\n    git: {git}\n    poll_interval: 1h\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACKER_", "HF_"))}
    env.update(
        TRACKER_STATE_DIR=str(tmp_path / "state"),
        TRACKER_WATCHLIST=str(tmp_path / "watchlist.yaml"),
        TRACKER_WEBHOOK_ALLOW_NETWORKS="127.0.0.0/8",
        TRACKER_QUEUE_CHECK_S="0.1",
        HF_HOME=str(tmp_path / "hf-home"),
        **AT_THE_BOUND,
    )

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(TRACKER), *args], env=env, capture_output=True, text=True, timeout=120
        )

    with Receiver() as rx:
        added = run("subscribe", "add", rx.url, "--repo", "acme/*")
        assert added.returncode == 0, added.stderr
        daemon = subprocess.Popen(
            [str(TRACKER), "poll"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        try:
            rx.wait_for(1, timeout=120)
        finally:
            daemon.send_signal(signal.SIGTERM)
            _, err = daemon.communicate(timeout=60)
        assert daemon.returncode == 0, err[-3000:]
        assert "Traceback" not in err
        payload = rx.received[0].json()
    assert payload["data"]["repo"] == "acme/granite"
    assert payload["data"]["commit"] == second
    (row,) = json.loads(run("watch", "list", "--json").stdout)
    assert (row["status"], row["revisions"], row["could_not_analyse"]) == ("ok", 2, [])
    assert (row["cursor"], row["last_error"]) == (second, None) and first != second
    (advisory,) = payload["data"]["advisories"]
    rendered = [c for c in advisory["database_specific"]["changes"] if c["kind"] == "rendered"]
    assert rendered and all(c["artifact"] == "chat_template" for c in rendered)
