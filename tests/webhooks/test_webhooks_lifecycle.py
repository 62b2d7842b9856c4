"""Advisory state changes after publication reach subscribers: a fix (in the fixing revision's
delivery), a withdrawal by a history rewrite, the reopening of an advisory whose fix the rewrite
dropped, and the restoring of withdrawn advisories when their commit returns; each written to the
outbox in the transaction that changes the advisories, delivered signed to a real receiver on
loopback (verified with the independent `standardwebhooks` package), filtered per subscription."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hookkit import NOW, REPO, SHAS, Receiver, change, publish
from standardwebhooks import Webhook

from tracker.advisories import service
from tracker.settings import load_settings
from tracker.shared.domain import Artifact
from tracker.store import Store
from tracker.store.advisories import AdvisoryStore
from tracker.store.webhooks import DeliveryState, WebhookStore
from tracker.webhooks import subscriptions as subs
from tracker.webhooks.deliver import Deliverer
from tracker.webhooks.events import EVENT, REOPENED, RESTORED, WITHDRAWN

EOS = change(Artifact.CONFIG, "eos_token_id", 2, 32000, "config.json")
EOS_BACK = change(Artifact.CONFIG, "eos_token_id", 32000, 2, "config.json")
TEMP = change(Artifact.GENERATION_CONFIG, "temperature", 0.7, 0.6, "generation_config.json")
REWRITE = "the force-push to `main`: head `2e54f233da37` → `4dd4b0f2d577`"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store.open(f"sqlite:///{tmp_path / 'hooks.db'}")
    yield s
    s.close()


def _deliver_all(deliverer: Deliverer, rx: Receiver, n: int) -> None:
    deadline = time.monotonic() + 20
    while len(rx.received) < n and time.monotonic() < deadline:
        if not deliverer.run_once():
            time.sleep(0.02)
    rx.wait_for(n, timeout=1)
    assert deliverer.run_once() == 0  # nothing else is due


def test_fix_withdrawal_reopening_and_restoring_are_delivered(store: Store) -> None:
    settings = load_settings(webhook_allow_networks="127.0.0.0/8", webhook_timeout_s=5.0)
    hooks = WebhookStore(store.engine)
    advisories = AdvisoryStore(store.engine)
    with Receiver() as everything, Receiver() as configs, Receiver() as rewrites_only:
        sub_all, secret_all = subs.add(
            hooks, settings, url=everything.url, repos=["mistralai/*"], min_severity="low",
            kinds=[], secret=None, description="", now=NOW,
        )  # fmt: skip
        sub_cfg, secret_cfg = subs.add(
            hooks, settings, url=configs.url, repos=["*"], min_severity="low",
            kinds=["config"], secret=None, description="", now=NOW,
        )  # fmt: skip
        sub_rw, secret_rw = subs.add(
            hooks, settings, url=rewrites_only.url, repos=["*"], min_severity="low",
            kinds=[], secret=None, description="", now=NOW,
            events=[WITHDRAWN, RESTORED],
        )  # fmt: skip
        assert sub_rw.events == (WITHDRAWN, RESTORED)
        publish(store, SHAS[0], None, [])
        [eos] = publish(store, SHAS[1], SHAS[0], [EOS])  # config advisory
        [temp] = publish(store, SHAS[2], SHAS[1], [TEMP])  # generation_config advisory
        assert publish(store, SHAS[3], SHAS[2], [EOS_BACK]) == []  # the revert fixes `eos`

        # A force-push drops SHAS[2] and SHAS[3]: `temp` is withdrawn, `eos` (fixed at SHAS[3])
        # is open again. Asked twice (the pipeline does, each cycle), it changes things once.
        later = NOW + timedelta(hours=1)
        dropped = [SHAS[2], SHAS[3]]
        rewrites = {SHAS[2]: REWRITE, SHAS[3]: REWRITE}
        gone = service.withdraw_rewritten(advisories, REPO, dropped, later, rewrites)
        assert [a.id for a in gone] == [temp.id]
        assert service.withdraw_rewritten(advisories, REPO, dropped, later, rewrites) == []
        # A later push brings SHAS[2] back: `temp` is live again; then another rewrite drops
        # it again, and that withdrawal is delivered too.
        back = service.restore_revived(advisories, REPO, list(SHAS[:3]), later)
        assert [a.id for a in back] == [temp.id]
        again = service.withdraw_rewritten(advisories, REPO, [SHAS[2]], later, rewrites)
        assert [a.id for a in again] == [temp.id]

        deliverer = Deliverer(hooks, settings, lambda: datetime.now(UTC))
        _deliver_all(deliverer, everything, 7)
        _deliver_all(deliverer, configs, 3)
        _deliver_all(deliverer, rewrites_only, 3)
        deliverer.close()

    got = [(Webhook(secret_all).verify(r.body, r.headers), r.id) for r in everything.received]
    kinds = [(p["type"], p["data"]["commit"]) for p, _ in got]
    assert kinds == [
        (EVENT, SHAS[1]),
        (EVENT, SHAS[2]),
        (EVENT, SHAS[3]),  # the fix
        (WITHDRAWN, SHAS[2]),
        (REOPENED, SHAS[3]),
        (RESTORED, SHAS[2]),
        (WITHDRAWN, SHAS[2]),
    ]
    assert len({msg_id for _, msg_id in got}) == 7  # each its own webhook-id
    payloads = [p for p, _ in got]
    fixed = payloads[2]["data"]
    assert fixed["advisories"] == []
    assert [a["id"] for a in fixed["fixed"]] == [eos.id]
    assert fixed["fixed"][0]["database_specific"]["fixed"] == SHAS[3]
    withdrawn = payloads[3]["data"]
    assert withdrawn["repo"] == REPO and withdrawn["repo_url"] == f"https://huggingface.co/{REPO}"
    assert withdrawn["reason"] == (
        f"introducing commit {SHAS[2]} was removed by a history rewrite ({REWRITE})"
    )
    [record] = withdrawn["advisories"]
    assert record["id"] == temp.id
    assert record["withdrawn"] == "2026-11-30T10:30:00Z" == record["modified"]
    reopened = payloads[4]["data"]
    assert [a["id"] for a in reopened["advisories"]] == [eos.id]
    assert reopened["reason"] == (
        f"fixing commit {SHAS[3]} was removed by a history rewrite ({REWRITE})"
    )
    assert "fixed" not in reopened["advisories"][0]["database_specific"]
    restored = payloads[5]["data"]
    assert [a["id"] for a in restored["advisories"]] == [temp.id]
    assert "withdrawn" not in restored["advisories"][0]
    assert payloads[6]["data"]["advisories"][0]["withdrawn"] == "2026-11-30T10:30:00Z"

    # The config-only subscriber hears about `eos` only: its publication, fix and reopening.
    cfg = [Webhook(secret_cfg).verify(r.body, r.headers) for r in configs.received]
    assert [(p["type"], p["data"]["commit"]) for p in cfg] == [  # type: ignore[index]
        (EVENT, SHAS[1]),
        (EVENT, SHAS[3]),
        (REOPENED, SHAS[3]),
    ]
    log = hooks.deliveries(subscription_id=sub_all.id)
    assert [d.event for d in reversed(log)] == [k for k, _ in kinds]
    assert {d.state for d in log} == {DeliveryState.DELIVERED}
    assert len(hooks.deliveries(subscription_id=sub_cfg.id)) == 3

    # The event-type filter: withdrawals and restorings only, numbered 1, 2, 3 for the repo
    # (issue 27: a per-repo sequence a receiver can order by); the first subscriber's 1..7.
    rw = [Webhook(secret_rw).verify(r.body, r.headers) for r in rewrites_only.received]
    assert [(p["type"], p["data"]["commit"], p["data"]["sequence"]) for p in rw] == [  # type: ignore[index]
        (WITHDRAWN, SHAS[2], 1),
        (RESTORED, SHAS[2], 2),
        (WITHDRAWN, SHAS[2], 3),
    ]
    assert [p["data"]["sequence"] for p in payloads] == [1, 2, 3, 4, 5, 6, 7]
