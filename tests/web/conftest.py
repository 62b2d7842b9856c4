"""Fixtures of the page tests: the demo's store served on loopback, a hostile repo's store served
beside it, and ONE headless Debian Chromium (selenium over /usr/bin/chromedriver) for every page
test of the session.

The demo data is the session's `demo_run` (the same poll cycle `make demo` runs, shared with the
demo tests). The hostile repo is a real Qwen3-0.6B config.json (tests/data/configs) whose history
carries hostile strings in every place upstream controls: commit title and message, a file name,
the chat template (source and rendered output), the model card and a config key. Its tokenizer
config is a stand-in written here (a minimal template, not the model's). The same watchlist names
a repo the Hub does not have (`gone` on the home page). Screenshots go to
test-artifacts/pages/ at the repo root.
"""

from __future__ import annotations

import json
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from pagekit import (
    ARTIFACTS,
    CHROMEDRIVER,
    CHROMIUM,
    CONFIGS,
    GONE_REPO,
    HOSTILE_FILE,
    HOSTILE_REPO,
    IMG,
    JS_LINK,
    LONG,
    PWN,
    SCRIPT,
    chromium,
)


@dataclass(frozen=True)
class Served:
    """A store served over HTTP on loopback (in this process, by uvicorn) and the App behind it."""

    app: Any
    url: str


@pytest.fixture(scope="session")
def served_demo(demo_run: Any) -> Iterator[Served]:
    """The demo's store (`make demo`'s cycle) served by the API app on a free loopback port."""
    with _serve(demo_run.app) as url:
        yield Served(demo_run.app, url)


def _template(system_extra: str) -> str:
    return (
        "{%- for message in messages %}"
        "{%- if message['role'] == 'system' %}{{ '<|system|>' + message['content'] + '"
        + system_extra
        + "\\n' }}"
        "{%- else %}{{ '<|' + message['role'] + '|>' + message['content'] + '\\n' }}{%- endif %}"
        "{%- endfor %}{%- if add_generation_prompt %}{{ '<|assistant|>' }}{%- endif %}"
    )


def _tokenizer_config(template: str) -> bytes:
    return json.dumps(
        {"bos_token": None, "eos_token": "<|im_end|>", "chat_template": template}, indent=2
    ).encode()


def _card(license_: str, body: str) -> bytes:
    return f"---\nlicense: {license_}\n---\n\n{body}\n".encode()


@pytest.fixture(scope="session")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """A repo whose upstream text is hostile, polled through the real pipeline over the replica."""
    from tracker.app import build
    from tracker.replica import Replica
    from tracker.replica.repos import commit, init_repo
    from tracker.settings import load_settings

    root = tmp_path_factory.mktemp("hostile")
    config = json.loads((CONFIGS / "Qwen__Qwen3-0.6B.json").read_text())
    repo = init_repo(root / "hub", HOSTILE_REPO)
    day = datetime(2025, 3, 1, tzinfo=UTC)
    commit(
        repo,
        {
            "config.json": json.dumps(config, indent=2).encode(),
            "tokenizer_config.json": _tokenizer_config(_template("")),
            "README.md": _card("apache-2.0", "A model card."),
        },
        "Initial upload",
        date=day,
    )
    hostile_config = config | {"torch_dtype": SCRIPT, IMG: JS_LINK, "x_long": LONG}
    commit(
        repo,
        {
            "config.json": json.dumps(hostile_config, indent=2).encode(),
            "tokenizer_config.json": _tokenizer_config(_template(SCRIPT)),
            "README.md": _card(
                json.dumps(SCRIPT), f"[click me]({JS_LINK}) {IMG} {SCRIPT}\n\n{LONG}"
            ),
            HOSTILE_FILE: b"\x80\x02}q\x00.",
        },
        f"{SCRIPT} {IMG} [click]({JS_LINK}) {LONG}\n\nBody: {SCRIPT} {LONG}",
        author=f"{PWN} & Mallory <mallory@example.com>",
        date=day.replace(day=2),
    )
    watchlist = root / "watchlist.yaml"
    watchlist.write_text(f"repos:\n  - id: {HOSTILE_REPO}\n  - id: {GONE_REPO}\n")
    with Replica(root / "hub") as hub:
        settings = load_settings(
            state_dir=root / "state",
            watchlist=watchlist,
            hf_endpoint=hub.url,
            hub_public_url="https://huggingface.co",
        )
        app = build(settings)
        try:
            report = app.pipeline.run_cycle()
            assert report.unclean_line() == f"1 of 2 repos did not poll cleanly: {GONE_REPO} (gone)"
        except BaseException:
            app.close()
            raise
    try:
        with _serve(app) as url:
            yield Served(app, url)
    finally:
        app.close()


class _Server:
    def __init__(self, app: Any) -> None:
        import uvicorn

        from tracker.api import create_app

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.server = uvicorn.Server(uvicorn.Config(create_app(app), log_level="warning"))
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True
        )

    def __enter__(self) -> str:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            assert time.monotonic() < deadline, "the page server did not start"
            time.sleep(0.02)
        return f"http://127.0.0.1:{self.port}"

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.sock.close()


def _serve(app: Any) -> _Server:
    return _Server(app)


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """One headless Debian Chromium for the session, its console log kept (goog:loggingPrefs)."""
    for tool in (CHROMIUM, CHROMEDRIVER):
        assert Path(tool).exists(), (
            f"{tool} missing: `make test` installs chromium and chromium-driver"
        )
    driver = chromium()
    if ARTIFACTS.exists():
        shutil.rmtree(ARTIFACTS)
    ARTIFACTS.mkdir(parents=True)
    try:
        yield driver
    finally:
        driver.quit()
