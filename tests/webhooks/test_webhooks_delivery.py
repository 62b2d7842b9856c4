"""Outgoing webhooks in process: the outbox written by publish, signed deliveries to a real
receiver on loopback (verified with the independent `standardwebhooks` package), retries with
backoff and Retry-After, 410 Gone, rotation, the SSRF guard, one delivery per revision."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hookkit import NOW, REPO, SHAS, Received, Receiver, change, publish
from standardwebhooks import Webhook, WebhookVerificationError

from tracker.settings import Settings, load_settings
from tracker.shared.domain import Artifact, RepoId, Severity, Sha
from tracker.store import Store
from tracker.store.webhooks import DeliveryState, Outcome, WebhookStore
from tracker.webhooks import subscriptions as subs
from tracker.webhooks.deliver import Deliverer, parse_retry_after, retry_delay
from tracker.webhooks.events import EVENT

EOS = change(Artifact.CONFIG, "eos_token_id", 2, 32000, "config.json")
TEMP = change(Artifact.GENERATION_CONFIG, "temperature", 0.7, 0.6, "generation_config.json")


def _now() -> datetime:
    return datetime.now(UTC)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store.open(f"sqlite:///{tmp_path / 'hooks.db'}")
    yield s
    s.close()


def _settings(**kw: object) -> Settings:
    base: dict[str, object] = {
        "webhook_allow_networks": "127.0.0.0/8",
        "webhook_retry_base_s": 0.2,
        "webhook_timeout_s": 5.0,
    }
    return load_settings(**{**base, **kw})


def _subscribe(store: Store, url: str, settings: Settings, **kw: object) -> tuple[int, str]:
    args: dict[str, object] = {
        "url": url,
        "repos": ["mistralai/*"],
        "min_severity": "low",
        "kinds": [],
        "secret": None,
        "description": "",
    }
    sub, secret = subs.add(WebhookStore(store.engine), settings, now=NOW, **{**args, **kw})  # type: ignore[arg-type]
    return sub.id, secret


def _deliver_until(deliverer: Deliverer, receiver: Receiver, n: int, timeout: float = 20) -> None:
    """Run delivery passes (as the daemon does) until the receiver got `n` requests."""
    deadline = time.monotonic() + timeout
    while len(receiver.received) < n and time.monotonic() < deadline:
        if not deliverer.run_once():
            time.sleep(0.02)
    receiver.wait_for(n, timeout=1)


def _readme_verifier() -> Any:
    """The `verify` function the README shows receivers (its first python block after
    "Verifying, in Python"), executed as written."""
    text = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    block = text.split("Verifying, in Python:", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    scope: dict[str, Any] = {}
    exec(block, scope)
    return scope["verify"]


def _verify(secret: str, r: Received) -> object:
    return Webhook(secret).verify(r.body, r.headers)


def test_one_signed_delivery_per_revision_verified_independently(store: Store) -> None:
    settings = _settings()
    with Receiver() as rx:
        sub_id, secret = _subscribe(store, rx.url, settings)
        publish(store, SHAS[0], None, [])
        advisories = publish(store, SHAS[1], SHAS[0], [EOS, TEMP])
        assert len(advisories) == 2  # two groups: config and generation_config
        deliverer = Deliverer(WebhookStore(store.engine), settings, _now)
        _deliver_until(deliverer, rx, 1)
        for _ in range(3):
            deliverer.run_once()
        time.sleep(0.3)
    [got] = rx.received  # one delivery for the revision, not one per advisory
    payload = _verify(secret, got)  # the independent implementation accepts the signature
    assert got.id.startswith("msg_")
    assert got.headers["content-type"] == "application/json"
    assert abs(int(got.headers["webhook-timestamp"]) - time.time()) < 30
    assert payload == got.json()
    assert payload["type"] == EVENT
    data = payload["data"]
    assert (data["repo"], data["commit"], data["previous"]) == (REPO, SHAS[1], SHAS[0])
    assert [a["id"] for a in data["advisories"]] == [a.id for a in advisories]
    assert data["advisories"][0]["affected"][0]["ranges"][0]["events"][0] == {"introduced": SHAS[1]}
    assert data["fixed"] == []
    readme_verify = _readme_verifier()  # the README's receiver code agrees
    assert readme_verify(secret, got.headers, got.body) is True
    assert readme_verify(secret, got.headers, got.body + b" ") is False
    with pytest.raises(WebhookVerificationError):  # another secret, or a changed byte, fails
        Webhook("whsec_" + "QUJD" * 8).verify(got.body, got.headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify(got.body.replace(b"eos_token_id", b"eos_token_iD"), got.headers)
    [d] = WebhookStore(store.engine).deliveries(subscription_id=sub_id)
    assert (d.msg_id, d.state, d.attempts, d.last_status) == (
        got.id,
        DeliveryState.DELIVERED,
        1,
        204,
    )


def test_filters_choose_what_each_subscriber_gets(store: Store) -> None:
    settings = _settings()
    w = WebhookStore(store.engine)
    with Receiver() as rx:
        high, _ = _subscribe(store, rx.url, settings, min_severity="high")
        chat, _ = _subscribe(store, rx.url, settings, kinds=["chat_template"])
        other, _ = _subscribe(store, rx.url, settings, repos=["meta-llama/*"])
        gen, _ = _subscribe(store, rx.url, settings, kinds=["generation_config"])
        publish(store, SHAS[0], None, [])
        advisories = publish(store, SHAS[1], SHAS[0], [EOS, TEMP])
    by_group = {a.group: a for a in advisories}
    assert by_group[Artifact.CONFIG].severity is Severity.HIGH
    assert by_group[Artifact.GENERATION_CONFIG].severity is Severity.MODERATE
    bodies = {d.subscription_id: d for d in w.deliveries()}
    assert set(bodies) == {high, gen}  # nothing for the chat-template or the other-repo one
    import json

    def ids(sub: int) -> list[str]:
        return [a["id"] for a in json.loads(bodies[sub].body)["data"]["advisories"]]

    assert ids(high) == [by_group[Artifact.CONFIG].id]
    assert ids(gen) == [by_group[Artifact.GENERATION_CONFIG].id]
    assert chat and other


def test_the_outbox_commits_with_the_advisories_and_only_once(store: Store) -> None:
    settings = _settings()
    w = WebhookStore(store.engine)
    _subscribe(store, "http://127.0.0.1:9/hook", settings)
    publish(store, SHAS[0], None, [])
    first = publish(store, SHAS[1], SHAS[0], [EOS])
    again = publish(store, SHAS[1], SHAS[0], [EOS])  # a redone analysis publishes nothing new
    assert [a.id for a in again] == [a.id for a in first]
    assert len(w.deliveries()) == 1
    # A publish that fails after the outbox row was written leaves neither advisory nor delivery.
    from tracker.shared.errors import AdvisoryError
    from tracker.store.advisories import AdvisoryTx

    original = AdvisoryTx.mark_revision

    def crash(self: AdvisoryTx, *a: object) -> None:
        raise AdvisoryError("crash after the outbox row")

    AdvisoryTx.mark_revision = crash  # type: ignore[method-assign]
    try:
        with pytest.raises(AdvisoryError):
            publish(store, SHAS[2], SHAS[1], [TEMP])
    finally:
        AdvisoryTx.mark_revision = original  # type: ignore[method-assign]
    assert [d.sha for d in w.deliveries()] == [SHAS[1]]
    redone = publish(store, SHAS[2], SHAS[1], [TEMP])
    assert redone and [d.sha for d in w.deliveries()] == [SHAS[2], SHAS[1]]


def test_500s_are_retried_with_backoff_then_never_again(store: Store) -> None:
    settings = _settings(webhook_retry_base_s=0.3)
    replies = iter([(500, {}), (502, {}), (200, {})])
    with Receiver(reply=lambda n, r: next(replies)) as rx:
        sub_id, secret = _subscribe(store, rx.url, settings)
        publish(store, SHAS[0], None, [])
        publish(store, SHAS[1], SHAS[0], [EOS])
        deliverer = Deliverer(WebhookStore(store.engine), settings, _now, rng=lambda: 1.0)
        _deliver_until(deliverer, rx, 3)
        for _ in range(5):  # acknowledged: later passes send nothing
            deliverer.run_once()
            time.sleep(0.1)
    got = rx.received
    assert len(got) == 3
    assert {r.id for r in got} == {got[0].id} and {r.body for r in got} == {got[0].body}
    for r in got:
        _verify(secret, r)
    gaps = [b.at - a.at for a, b in itertools.pairwise(got)]
    assert gaps[0] >= 0.3 and gaps[1] >= 0.6  # 0.3 s, then doubled (jitter pinned at the top)
    log = subs.log_json(WebhookStore(store.engine), sub_id, 10)
    assert [(a["n"], a["status"], a["outcome"]) for a in log[0]["attempts"]] == [
        (1, 500, "retry"),
        (2, 502, "retry"),
        (3, 200, "delivered"),
    ]
    assert log[0]["state"] == "delivered"


def test_retry_after_is_honoured(store: Store) -> None:
    settings = _settings(webhook_retry_base_s=0.05)
    replies = iter([(503, {"Retry-After": "1"}), (204, {})])
    with Receiver(reply=lambda n, r: next(replies)) as rx:
        _subscribe(store, rx.url, settings)
        publish(store, SHAS[0], None, [])
        publish(store, SHAS[1], SHAS[0], [EOS])
        _deliver_until(Deliverer(WebhookStore(store.engine), settings, _now), rx, 2)
    assert rx.received[1].at - rx.received[0].at >= 1.0


def test_410_gone_disables_the_subscription_and_holds_its_queue_until_enabled(
    store: Store,
) -> None:
    """A 410 disables the subscription: its pending delivery and the event that happens while it
    is disabled are held (never sent, nothing lost; they were cancelled and dropped before), and
    go out in order, verified, once it is enabled again."""
    settings = _settings()
    w = WebhookStore(store.engine)
    replies = [410]
    with Receiver(reply=lambda n, r: ((replies.pop(0) if replies else 204), {})) as rx:
        sub_id, secret = _subscribe(store, rx.url, settings)
        publish(store, SHAS[0], None, [])
        publish(store, SHAS[1], SHAS[0], [EOS])
        publish(store, SHAS[2], SHAS[1], [TEMP])
        deliverer = Deliverer(w, settings, _now)
        deliverer.attempt(*w.claim_due(_now(), lease=timedelta(seconds=30), limit=1)[0])
        for _ in range(3):
            assert deliverer.run_once() == 0
        assert w.next_due() is None  # held: the daemon does not wake for them
        time.sleep(0.2)
        assert len(rx.received) == 1
        publish(
            store,
            SHAS[3],
            SHAS[2],
            [change(Artifact.CONFIG, "eos_token_id", 32000, 7, "config.json")],
        )
        assert deliverer.run_once() == 0
        sub = w.subscription(sub_id)
        assert not sub.enabled and "410 Gone" in (sub.disabled_reason or "")
        states = {d.sha: d.state for d in w.deliveries(subscription_id=sub_id)}
        assert states == {
            SHAS[1]: DeliveryState.FAILED,
            SHAS[2]: DeliveryState.PENDING,
            SHAS[3]: DeliveryState.PENDING,
        }
        [log] = [d for d in subs.log_json(w, sub_id, 10) if d["commit"] == SHAS[1]]
        assert [a["outcome"] for a in log["attempts"]] == [Outcome.GONE.value]
        w.set_enabled(sub_id, True, None, _now())
        _deliver_until(deliverer, rx, 3)
    commits = [_verify(secret, r)["data"]["commit"] for r in rx.received[1:]]  # type: ignore[index]
    assert commits == [SHAS[2], SHAS[3]]
    states = {d.sha: d.state for d in w.deliveries(subscription_id=sub_id)}
    assert states == {
        SHAS[1]: DeliveryState.FAILED,
        SHAS[2]: DeliveryState.DELIVERED,
        SHAS[3]: DeliveryState.DELIVERED,
    }


def test_rotation_signs_with_both_secrets_until_the_grace_ends(store: Store) -> None:
    settings = _settings()
    w = WebhookStore(store.engine)
    with Receiver() as rx:
        sub_id, old = _subscribe(store, rx.url, settings)
        _, new = subs.rotate(w, sub_id, secret=None, grace=timedelta(hours=1), now=_now())
        publish(store, SHAS[0], None, [])
        publish(store, SHAS[1], SHAS[0], [EOS])
        deliverer = Deliverer(w, settings, _now)
        _deliver_until(deliverer, rx, 1)
        # After the grace period only the new secret signs.
        later = _now() + timedelta(hours=2)
        publish(store, SHAS[2], SHAS[1], [TEMP])
        _deliver_until(Deliverer(w, settings, lambda: later), rx, 2)
    during, after = rx.received
    assert len(during.headers["webhook-signature"].split(" ")) == 2
    _verify(old, during)
    _verify(new, during)
    assert len(after.headers["webhook-signature"].split(" ")) == 1
    with pytest.raises(WebhookVerificationError):
        Webhook(old).verify(
            after.body, {**after.headers, "webhook-timestamp": str(int(time.time()))}
        )


def test_ssrf_guard_refuses_internal_targets_unless_allowed(store: Store) -> None:
    from tracker.shared.errors import ConfigError

    closed = _settings(webhook_allow_networks="")
    for url in (
        "http://127.0.0.1:8080/hook",
        "http://localhost/hook",
        "http://169.254.169.254/latest/meta-data/",
        "http://168.63.129.16/machine?comp=goalstate",  # Azure's WireServer, a public address
        "http://[::ffff:168.63.129.16]/",
        "http://10.1.2.3/hook",
        "http://192.168.0.10/hook",
        "http://[::1]/hook",
        "http://[::ffff:127.0.0.1]/hook",
        "http://[2002:7f00:1::]/hook",  # 6to4 around 127.0.0.1
        "http://[2002:a01:203::1]/hook",  # 6to4 around 10.1.2.3
        "http://[2001:0:4136:e378:8000:63bf:80ff:fffe]/hook",  # Teredo, client 127.0.0.1
        "http://0.0.0.0/hook",
        "http://100.64.0.1/hook",
        "ftp://example.org/hook",
        "http://user:pw@127.0.0.1/hook",
    ):
        with pytest.raises(ConfigError, match="webhook URL refused"):
            _subscribe(store, url, closed)
    with Receiver() as rx:
        sub_id, _ = _subscribe(store, rx.url, _settings())  # loopback allowed explicitly
        publish(store, SHAS[0], None, [])
        publish(store, SHAS[1], SHAS[0], [EOS])
        # The guard runs again before each attempt: with the setting gone, nothing is sent.
        Deliverer(WebhookStore(store.engine), closed, _now).run_once()
        time.sleep(0.2)
    assert rx.received == []
    [d] = subs.log_json(WebhookStore(store.engine), sub_id, 10)
    assert d["state"] == "pending" and d["attempts"][0]["outcome"] == "retry"
    assert d["attempts"][0]["error"].startswith("refused: 127.0.0.1 is a loopback address")


def test_backoff_and_retry_after_parsing() -> None:
    assert [retry_delay(n, base_s=5, max_s=60, rng=lambda: 1.0) for n in (1, 2, 3, 4, 5, 9)] == [
        5,
        10,
        20,
        40,
        60,
        60,
    ]
    assert retry_delay(3, base_s=5, max_s=60, rng=lambda: 0.0) == 10  # jitter: upper half
    now = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)
    assert parse_retry_after("120", now) == 120
    assert parse_retry_after("Mon, 30 Nov 2026 12:01:30 GMT", now) == 90
    assert parse_retry_after("soon", now) is None
    assert parse_retry_after(None, now) is None
    assert parse_retry_after("99999999", now) == 86400


def test_unmatched_repo_and_withdrawn_subscription_get_nothing(store: Store) -> None:
    settings = _settings()
    w = WebhookStore(store.engine)
    sub_id, _ = _subscribe(store, "http://127.0.0.1:9/hook", settings)
    w.remove_subscription(sub_id)
    other = RepoId("meta-llama/Llama-2-7b-hf")
    publish(store, SHAS[0], None, [])
    publish(store, SHAS[1], SHAS[0], [EOS])
    _subscribe(store, "http://127.0.0.1:9/hook", settings)
    publish(store, Sha("a" * 40), None, [], repo=other)
    publish(store, Sha("b" * 40), Sha("a" * 40), [EOS], repo=other)
    assert w.deliveries() == []


def _claims_one_per_subscription(store: Store) -> None:
    settings = _settings()
    w = WebhookStore(store.engine)
    a, _ = _subscribe(store, "http://127.0.0.1:9/a", settings)
    b, _ = _subscribe(store, "http://127.0.0.1:9/b", settings)
    publish(store, SHAS[0], None, [])
    publish(store, SHAS[1], SHAS[0], [EOS])
    publish(store, SHAS[2], SHAS[1], [TEMP])
    now, lease = _now() + timedelta(seconds=1), timedelta(seconds=30)
    claimed = w.claim_due(now, lease=lease, exclude={b}, one_per_subscription=True)
    assert [(d.subscription_id, d.sha) for d, _ in claimed] == [(a, SHAS[1])]  # a's oldest only
    assert w.next_due(exclude={a, b}) is None
    assert w.next_due(exclude={a}) is not None
    claimed = w.claim_due(now, lease=lease, one_per_subscription=True)
    assert [(d.subscription_id, d.sha) for d, _ in claimed] == [(b, SHAS[1])]  # a's 2nd waits
    w.release(claimed[0][0])
    claimed = w.claim_due(now, lease=lease)
    assert sorted((d.subscription_id, d.sha) for d, _ in claimed) == [
        (a, SHAS[2]),
        (b, SHAS[1]),
        (b, SHAS[2]),
    ]


def test_claim_due_one_per_subscription_and_exclusions(store: Store) -> None:
    _claims_one_per_subscription(store)


@pytest.mark.postgres
def test_claim_due_one_per_subscription_on_postgresql(
    pg_database: Any,
) -> None:
    with pg_database("hooks_claim") as url:
        s = Store.open(url)
        try:
            _claims_one_per_subscription(s)
        finally:
            s.close()


def test_a_slow_receiver_holds_its_own_slot_only(store: Store) -> None:
    # In process: one subscription's receiver holds every answer 3 s; the other's deliveries all
    # go out meanwhile, each subscription's one at a time, never two of the slow one at once.
    settings = _settings(webhook_timeout_s=10.0)
    w = WebhookStore(store.engine)
    with (
        Receiver(reply=lambda n, r: (204, {}, 3.0)) as slow,
        Receiver() as fast,
    ):
        _subscribe(store, slow.url, settings)
        _subscribe(store, fast.url, settings)
        publish(store, SHAS[0], None, [])
        publish(store, SHAS[1], SHAS[0], [EOS])
        publish(store, SHAS[2], SHAS[1], [TEMP])
        deliverer = Deliverer(w, settings, _now)
        t0 = time.monotonic()
        started = deliverer.start_due()
        assert len(started) == 2  # one per subscription
        fast.wait_for(1, timeout=5)
        while not started[1].done() or len(fast.received) < 2:  # the fast one's next
            started += deliverer.start_due()
            time.sleep(0.01)
        fast_done = time.monotonic() - t0
        assert len(slow.received) == 1  # the slow one's second waits for its slot
        deliverer.close()
        assert len(slow.received) == 1
    assert fast_done < 3.0, f"the fast subscription waited {fast_done:.2f} s"
    assert [r.json()["data"]["commit"] for r in fast.received] == [SHAS[1], SHAS[2]]
