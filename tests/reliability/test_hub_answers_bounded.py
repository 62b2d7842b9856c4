"""Issue 10, bounded parsing of the Hub's API answers, through the installed `tracker`.

The replica serves acme/llama (tests/replica/helpers_replica.py, plus a pickle file so that the
tree asks paths-info for its scan); the fault proxy rewrites one endpoint's real answer with
every object in it given an extra field nested 100 (or 3,000) levels deep. Before, huggingface_hub
parsed such an answer whole: 100 levels were read and the field ignored (the poll went on), 3,000
were "response is JSON nested too deeply to read" after a RecursionError (the readers bench showed
"unexpected RecursionError: ..." earlier still). Now each answer is checked within
`tracker.shared.bounded.HUB_ANSWER` before it is parsed, and refused with the config readers' reason: the
poll records the repo failing with that one line (exit 1, `watch list` shows it), and once the
answers are whole again the next poll reads the repo.
"""

from __future__ import annotations

import gzip
import json
import threading
from collections.abc import Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from helpers_replica import T0, make_llama
from hostile import peak_of
from reliakit import tracker

from tracker.replica import Replica
from tracker.replica.faultproxy import Fault, FaultProxy, Mode
from tracker.replica.repos import commit
from tracker.shared.bounded import HUB_ANSWER
from tracker.shared.domain import RepoId
from tracker.shared.errors import BadResponseError, NotFoundError
from tracker.sources.hub import HubSource

MiB = 1024 * 1024


@pytest.fixture(scope="module")
def hub(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Path, Replica, dict[str, str]]]:
    tmp = tmp_path_factory.mktemp("hubanswers")
    info = make_llama(tmp / "hub")
    head = commit(
        info["repo"],  # type: ignore[arg-type]
        {"training_args.bin": b"\x80\x04K\x01."},  # pickle(1): listed with its security scan
        "Add training args",
        date=T0 + timedelta(days=3),
    )
    (tmp / "watchlist.yaml").write_text("repos:\n  - id: acme/llama\n")
    with Replica(tmp / "hub") as replica:
        yield tmp, replica, {"first": str(info["first"]), "head": head}


def _padded(depth: int):  # type: ignore[no-untyped-def]
    """Every object of the answer (the answer itself, or each entry of a list) gets a field
    "pad" holding `depth` nested arrays; nothing the client reads changes."""

    def rewrite(body: bytes) -> bytes:
        value = json.loads(body)
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, dict):
                item["pad"] = "PAD"
        return json.dumps(value).encode().replace(b'"PAD"', b"[" * depth + b"]" * depth)

    return rewrite


CASES = [  # (where the proxy rewrites, the request the refusal names, the pad's depth)
    ("/refs", "GET /api/models/acme/llama/refs", 100),
    ("/refs", "GET /api/models/acme/llama/refs", 3000),
    ("/commits/", "GET /api/models/acme/llama/commits/{head}", 100),
    ("/tree/", "GET /api/models/acme/llama/tree/{first}", 100),
    ("/tree/", "GET /api/models/acme/llama/tree/{first}", 3000),
    ("/paths-info/", "POST /api/models/acme/llama/paths-info/{head}", 100),
]  # the last one fails after two revisions are read (the head's tree asks paths-info)


@pytest.mark.replica
def test_a_hub_answer_nested_too_deeply_is_a_recorded_one_line_failure(
    hub: tuple[Path, Replica, dict[str, str]], tmp_path: Path
) -> None:
    tmp, replica, shas = hub
    state = tmp_path / "state"
    watchlist = tmp / "watchlist.yaml"
    with FaultProxy(replica.url, seed=1) as proxy:
        for where, request, depth in CASES:
            proxy.add(Fault(Mode.REWRITE, path=where, rewrite=_padded(depth)))
            poll = tracker(state, proxy.url, "poll", "--once", "--json", watchlist=watchlist)
            proxy.clear()
            expected = (
                f"BadResponseError: could not read the answer to {request.format(**shas)}: "
                "JSON nested deeper than 64 levels"
            )
            assert poll.returncode == 1, (where, depth, poll.stdout[-2000:], poll.stderr[-2000:])
            (report,) = json.loads(poll.stdout)
            assert (report["repo_id"], report["status"], report["error"]) == (
                "acme/llama", "failing", expected,
            ), (where, depth)  # fmt: skip
            assert "Traceback" not in poll.stderr and "RecursionError" not in poll.stderr
            assert poll.stderr.strip().splitlines()[-1] == (
                "error: 1 of 1 repos did not poll cleanly: acme/llama (failing)"
            )
        listed = tracker(state, proxy.url, "watch", "list", "--json", watchlist=watchlist)
        assert listed.returncode == 0, listed.stderr[-2000:]
        (row,) = json.loads(listed.stdout)
        assert (row["status"], row["consecutive_failures"], row["last_error"]) == (
            "failing", len(CASES), expected,
        )  # fmt: skip

        # whole answers again: the next poll reads the repo
        again = tracker(state, proxy.url, "poll", "--once", "--json", watchlist=watchlist)
        assert again.returncode == 0, again.stderr[-2000:]
        (report,) = json.loads(again.stdout)
        assert (report["status"], report["error"]) == ("ok", None)
        listed = tracker(state, proxy.url, "watch", "list", "--json", watchlist=watchlist)
        (row,) = json.loads(listed.stdout)
        assert (row["status"], row["revisions"], row["cursor"], row["last_error"]) == (
            "ok", 3, shas["head"], None,
        )  # fmt: skip


# -- the same bounds on answers no replica sends: an error body, a compressed body -----------------

_ANSWER: dict[str, Any] = {}


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        status, headers, body = _ANSWER["status"], _ANSWER["headers"], _ANSWER["body"]
        self.send_response(status)
        for name, value in {"Content-Type": "application/json", **headers}.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def test_an_error_answer_nested_too_deeply_keeps_its_status(server: str) -> None:
    """A 404 whose body is 3,000 arrays deep: before, huggingface_hub's error formatting parsed
    it ("response is JSON nested too deeply to read", a BadResponseError); the status is what
    counts, the body is dropped."""
    _ANSWER.update(status=404, headers={}, body=b"[" * 3000 + b"]" * 3000)
    src = HubSource(server, timeout_s=5, retry_attempts=1)
    with pytest.raises(NotFoundError) as caught:
        src.resolve_ref(RepoId("acme/x"), "main")
    assert str(caught.value) == (
        f"acme/x refs: HTTP 404 (Client error '404 Not Found' for url "
        f"'{server}/api/models/acme/x/refs')"
    )


def test_a_compressed_answer_is_capped_as_it_is_decoded(server: str) -> None:
    """100 MB of spaces gzipped to ~100 KB: the cap counts decoded bytes, so the read stops at
    64 MB instead of holding 100 MB (and json.loads never sees it)."""
    body = gzip.compress(b"[" + b" " * 100_000_000 + b"]", compresslevel=9)
    assert len(body) < 200_000
    _ANSWER.update(status=200, headers={"Content-Encoding": "gzip"}, body=body)
    src = HubSource(server, timeout_s=30, retry_attempts=1)
    result, peak = peak_of(lambda: src.resolve_ref(RepoId("acme/x"), "main"))
    assert isinstance(result, BadResponseError), repr(result)
    assert str(result) == (
        "could not read the answer to GET /api/models/acme/x/refs: over 64,000,000 bytes"
    )
    assert HUB_ANSWER.max_bytes < peak < HUB_ANSWER.max_bytes + 8 * MiB, peak
