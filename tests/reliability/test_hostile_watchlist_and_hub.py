"""Hostile inputs for the two readers tests/reliability/test_hostile_readers.py does not cover:
the watchlist file and the Hub's API answers. Only typed errors escape (a ConfigError for the
watchlist, a SourceError for the Hub) with one-line reasons, and the watchlist reader's peak
memory stays under 200·n + 4 MiB (n: the file's bytes; YAML nodes are heavy), the Hub readers'
under 40·n + 4 MiB (n: the answer's bytes).

The Hub answers are served by a loopback server in front of the replica that replaces one
endpoint's JSON body (refs, commits, tree, paths-info) with hypothesis-drawn JSON: wrong types,
missing keys, absurd values, deep nesting, lone surrogates in file names.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from hostile import peak_of, yaml_bombs
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tracker.shared.domain import RepoId, Sha
from tracker.shared.errors import ConfigError, SourceError
from tracker.sources.hub import HubSource
from tracker.watchlist import load_watchlist

MiB = 1024 * 1024
WATCHLIST = Path(__file__).resolve().parents[2] / "watchlist.yaml"
"""The project's own watchlist (real repo ids)."""


def _mutate_watchlist(real: bytes, at: float, payload: bytes) -> bytes:
    i = int(at * len(real))
    return real[:i] + payload + real[i:]


def hostile_watchlists() -> st.SearchStrategy[bytes]:
    real = WATCHLIST.read_bytes()
    payloads = st.one_of(
        st.binary(max_size=40),
        st.sampled_from([b"\n  - id: *a\n", b"&a ", b"!!python/name:os.system ", b"\t", b"\x00",
                         b"\n  - id: acme/x\n    ref: " + b"[" * 3000, b"\xef\xbb\xbf"]),
        yaml_bombs().map(lambda b: b.replace(b"---\n", b"")),
    )  # fmt: skip
    return st.one_of(
        st.builds(_mutate_watchlist, st.just(real), st.floats(0, 1), payloads),
        yaml_bombs().map(lambda b: b.replace(b"---\n", b"") + b"repos:\n  - id: acme/x\n"),
    )


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=hostile_watchlists())
def test_hostile_watchlists_are_one_line_config_errors(tmp_path_factory: Any, data: bytes) -> None:
    path = tmp_path_factory.mktemp("w") / "watchlist.yaml"
    path.write_bytes(data)
    result, peak = peak_of(lambda: load_watchlist(path))
    if isinstance(result, BaseException):
        assert isinstance(result, ConfigError), repr(result)
        assert str(result).strip(), repr(result)
    assert peak <= 200 * len(data) + 4 * MiB, (len(data), peak)


# -- the Hub's API answers -------------------------------------------------------------------------

_ANSWER: dict[str, bytes] = {}


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        body = _ANSWER.get("body", b"{}")
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_POST = do_GET


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
    | st.text(max_size=12) | st.sampled_from(["\udcff.json", "a" * 41, "../x", "0" * 40]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["path", "type", "oid", "size", "lfs", "id", "name", "targetCommit",
                         "branches", "tags", "converts", "title", "date", "authors", "sha256",
                         "security", "commit"]), inner, max_size=6),
    max_leaves=20,
)  # fmt: skip
_SHAPED = st.one_of(
    _json.map(lambda v: json.dumps(v).encode()),
    st.integers(1, 3000).map(lambda d: b"[" * d + b"]" * d),
    st.just(b'{"branches": [{"name": "main", "ref": "refs/heads/main", "targetCommit": 7}]}'),
    st.just(b'[{"type": "file", "path": "\\udcff.json", "oid": "' + b"a" * 40 + b'", "size": 1}]'),
    st.just(b'[{"type": "file", "path": "x", "oid": "a", "size": -1, "lfs": {"oid": 3}}]'),
    st.binary(max_size=64),
)

SHA = Sha("0" * 40)


@pytest.mark.parametrize("call", ["refs", "commits", "tree"])
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow,
          HealthCheck.function_scoped_fixture])  # fmt: skip
@given(body=_SHAPED)
@example(body=b"[" * 3000 + b"]" * 3000)
def test_hostile_hub_answers_raise_only_source_errors(server: str, call: str, body: bytes) -> None:
    _ANSWER["body"] = body
    src = HubSource(server, timeout_s=5, retry_attempts=1)
    rid = RepoId("acme/x")

    def read() -> object:
        if call == "refs":
            return src.resolve_ref(rid, "main")
        if call == "commits":
            return src.list_commits(rid, "main")
        for entry in src.list_tree(rid, SHA):
            entry.path.encode("utf-8")  # storable: no lone surrogate reaches the store
        return None

    result, peak = peak_of(read)
    if isinstance(result, BaseException):
        assert isinstance(result, SourceError), repr(result)
        assert str(result) and "\n" not in str(result), repr(result)
        # every reason named, never the catch-all "unexpected SomeError: ..."
        assert not re.search(r"unexpected [A-Z]\w*(Error|Exception)\b", str(result)), repr(result)
    # the bound of every JSON reader (bench/reliability.py measures it at 100,000 entries)
    assert peak <= 40 * len(body) + 4 * MiB, (call, len(body), peak)
