"""The fault-injecting proxy breaks exactly the answers a rule selects, the way each mode says.

Driven with httpx (a real client) over loopback, in front of the Hub replica serving the
`acme/llama` test repo (real Llama-2 config, see tests/replica/helpers_replica.py).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

import httpx
import pytest
from helpers_replica import make_llama

from tracker.replica import Replica
from tracker.replica.faultproxy import Fault, FaultProxy, Mode

pytestmark = pytest.mark.replica


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Replica, dict[str, object]]]:
    root = tmp_path_factory.mktemp("hub")
    info = make_llama(root)
    with Replica(root) as replica:
        yield replica, info


@pytest.fixture
def proxy(hub: tuple[Replica, dict[str, object]]) -> Iterator[FaultProxy]:
    with FaultProxy(hub[0].url, seed=3) as p:
        yield p


def _blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _config_url(proxy: FaultProxy, hub: tuple[Replica, dict[str, object]]) -> str:
    return f"{proxy.url}/acme/llama/resolve/{hub[1]['first']}/config.json"


def _real_config(hub: tuple[Replica, dict[str, object]]) -> bytes:
    files = hub[1]["files"]
    assert isinstance(files, dict)
    data = files["config.json"]
    assert isinstance(data, bytes)
    return data


def test_passes_answers_through_unchanged_and_records_them(
    proxy: FaultProxy, hub: tuple[Replica, dict[str, object]]
) -> None:
    r = httpx.get(_config_url(proxy, hub))
    assert (r.status_code, r.content) == (200, _real_config(hub))
    assert r.headers["etag"] == f'"{_blob_id(_real_config(hub))}"'
    info = httpx.get(f"{proxy.url}/api/models/acme/llama")
    assert info.json()["id"] == "acme/llama"
    assert [(rec.status, rec.fault) for rec in proxy.records] == [(200, None), (200, None)]


def test_lfs_redirects_come_back_through_the_proxy(
    proxy: FaultProxy, hub: tuple[Replica, dict[str, object]]
) -> None:
    url = f"{proxy.url}/acme/llama/resolve/{hub[1]['first']}/model.safetensors"
    r = httpx.get(url, headers={"Range": "bytes=0-7"}, follow_redirects=True)
    assert r.status_code == 206 and len(r.content) == 8
    assert r.url.host == "127.0.0.1" and r.url.port == proxy.port
    assert [rec.status for rec in proxy.records] == [302, 206]


def test_each_content_mode_breaks_the_body_its_way(
    proxy: FaultProxy, hub: tuple[Replica, dict[str, object]]
) -> None:
    real = _real_config(hub)
    url = _config_url(proxy, hub)
    proxy.add(Fault(Mode.LYING_LENGTH, path="config.json", times=1))
    lied = httpx.get(url)
    assert lied.status_code == 200 and len(lied.content) < len(real)
    assert real.startswith(lied.content)
    assert int(lied.headers["content-length"]) == len(lied.content)

    proxy.add(Fault(Mode.CORRUPT, path="config.json", times=1))
    bad = httpx.get(url)
    assert bad.status_code == 200 and len(bad.content) == len(real) and bad.content != real
    diff = [i for i, (a, b) in enumerate(zip(bad.content, real, strict=True)) if a != b]
    assert len(diff) >= 1 and diff[-1] - diff[0] < 16

    proxy.add(Fault(Mode.MALFORMED_JSON, path="config.json", times=1))
    half = httpx.get(url)
    assert half.content == real[: len(real) // 2]

    proxy.add(Fault(Mode.SHORT_BODY, path="config.json", times=1))
    with pytest.raises(httpx.RemoteProtocolError):
        httpx.get(url)

    assert httpx.get(url).content == real  # every rule was used up
    assert proxy.applied() == {
        Mode.LYING_LENGTH: 1,
        Mode.CORRUPT: 1,
        Mode.MALFORMED_JSON: 1,
        Mode.SHORT_BODY: 1,
    }


def test_early_modes_never_reach_upstream(
    proxy: FaultProxy, hub: tuple[Replica, dict[str, object]]
) -> None:
    before = len(hub[0].requests)
    proxy.add(Fault(Mode.STATUS, path="/api/", times=2, status=502))
    proxy.add(Fault(Mode.RATE_LIMIT, path="/api/", times=1, retry_after=3600))
    proxy.add(Fault(Mode.RESET, path="/api/", times=1))
    url = f"{proxy.url}/api/models/acme/llama"
    assert [httpx.get(url).status_code for _ in range(3)] == [502, 502, 429]
    with pytest.raises(httpx.TransportError):
        httpx.get(url)
    assert httpx.get(url).status_code == 200
    assert len(hub[0].requests) == before + 1
    limited = [r for r in proxy.records if r.fault is Mode.RATE_LIMIT]
    assert [(r.status, r.path) for r in limited] == [(429, "/api/models/acme/llama")]


def test_trickle_sends_the_real_body_slowly(
    proxy: FaultProxy, hub: tuple[Replica, dict[str, object]]
) -> None:
    proxy.add(Fault(Mode.TRICKLE, path="config.json", times=1, chunk=200, interval_s=0.05))
    chunks = []
    with httpx.stream("GET", _config_url(proxy, hub)) as r:
        chunks = list(r.iter_raw())
    assert b"".join(chunks) == _real_config(hub)
    assert len(chunks) >= 3


def test_probability_is_drawn_from_the_seed(hub: tuple[Replica, dict[str, object]]) -> None:
    def run() -> list[int]:
        with FaultProxy(hub[0].url, seed=11) as p:
            p.add(Fault(Mode.STATUS, path="/api/", probability=0.5))
            return [httpx.get(f"{p.url}/api/models/acme/llama").status_code for _ in range(20)]

    first, second = run(), run()
    assert first == second
    assert set(first) == {200, 503}


def test_only_status_leaves_redirects_alone(
    proxy: FaultProxy, hub: tuple[Replica, dict[str, object]]
) -> None:
    proxy.add(Fault(Mode.CORRUPT, path="model.safetensors", only_status=frozenset({206})))
    url = f"{proxy.url}/acme/llama/resolve/{hub[1]['first']}/model.safetensors"
    clean = httpx.get(f"{hub[0].url}/acme/llama/resolve/{hub[1]['first']}/model.safetensors",
                      headers={"Range": "bytes=0-63"}, follow_redirects=True)  # fmt: skip
    broken = httpx.get(url, headers={"Range": "bytes=0-63"}, follow_redirects=True)
    assert broken.status_code == 206 and broken.content != clean.content
    assert [(r.status, r.fault) for r in proxy.records] == [(302, None), (206, Mode.CORRUPT)]


def test_answers_that_look_like_content_past_the_cap(
    proxy: FaultProxy, hub: tuple[Replica, dict[str, object]]
) -> None:
    """Issue 26's transport faults: each breaks only the Nth answer (`every`), the others pass."""
    real = _real_config(hub)
    url = _config_url(proxy, hub)
    proxy.add(Fault(Mode.LONG_LENGTH, path="config.json", size=100_000_000, every=2, times=1))
    assert httpx.get(url).content == real  # the 1st: not selected
    with httpx.stream("GET", url) as r:  # the 2nd: the true body under a 100 MB length
        assert int(r.headers["content-length"]) == 100_000_000
        got = b""
        with pytest.raises(httpx.RemoteProtocolError):
            for chunk in r.iter_raw():
                got += chunk
    assert got == real

    proxy.add(Fault(Mode.HUGE_BODY, path="config.json", size=80_000_000, times=1))
    with httpx.stream("GET", url) as r:
        assert int(r.headers["content-length"]) == 80_000_000
        first = b""
        for chunk in r.iter_raw():
            first += chunk
            if len(first) > 3 * len(real):
                break
    assert first.startswith(real) and first[len(real) :].strip(b"\n") == b""

    proxy.add(Fault(Mode.GZIP_BOMB, path="config.json", size=100_000_000, times=1))
    with httpx.stream("GET", url) as r:
        assert r.headers["content-encoding"] == "gzip"
        assert int(r.headers["content-length"]) < 200_000
        decoded = 0
        for chunk in r.iter_bytes():
            assert chunk.count(0) == len(chunk)
            decoded += len(chunk)
    assert decoded == 100_000_000

    proxy.add(Fault(Mode.STATUS, path="config.json", status=404, every=3, times=1,
                    headers={"X-Error-Code": "EntryNotFound"}))  # fmt: skip
    answers = [httpx.get(url) for _ in range(4)]
    assert [a.status_code for a in answers] == [200, 200, 404, 200]
    assert answers[2].headers["x-error-code"] == "EntryNotFound"
    assert proxy.applied() == {
        Mode.LONG_LENGTH: 1,
        Mode.HUGE_BODY: 1,
        Mode.GZIP_BOMB: 1,
        Mode.STATUS: 1,
    }
