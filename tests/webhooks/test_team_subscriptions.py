"""Webhook subscriptions filtered to a watchlist team (issue 29, "per-team doors: webhook
subscriptions filtered to affects this team"): two teams subscribe through the installed
`tracker subscribe add --team`, the installed `tracker poll --once` polls the demo's Llama-2-7b-hf
history from the Hub replica, publishes its advisories and delivers them to a real receiver on
loopback; every request is verified by the independent `standardwebhooks` package. The same
events give each team its own delivered set, each advisory with its verdict and reason; a
subscription with no team gets them all. The API takes `team` as the CLI does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from hookkit import Receiver
from standardwebhooks import Webhook

from tracker.api import create_app
from tracker.app import build
from tracker.cli.demo import ensure_demo_hub
from tracker.replica import Replica
from tracker.replica.demo import DEMO_TOKEN
from tracker.settings import load_settings
from tracker.shared.domain import Severity

ROOT = Path(__file__).resolve().parents[2]
TRACKER = Path(sys.executable).with_name("tracker")
LLAMA = "meta-llama/Llama-2-7b-hf"
WRITE = "write-token-team-subscriptions-01"
NOW = datetime(2026, 11, 30, 9, 30, tzinfo=UTC)
# The demo watchlist's support-bot and eval teams, on Llama-2 alone (revisions: the demo Hub's).
WATCHLIST = f"""\
defaults:
  preflight:
    transformers: ["4.57.1", "5.1.0", "5.24.0"]
repos:
  - id: {LLAMA}
teams:
  - name: support-bot
    cards: {{name: "L4 24 GB", count: 2}}
    transformers: "4.57.1"
    repos:
      - id: {LLAMA}
        revision: fa1b5d11b6cd
        workloads:
          - {{kind: lora, rank: 8, context: 4096, batch: 1}}
          - {{kind: serve, engine: vllm, context: 4096, batch: 8, tensor_parallel: 2}}
        generation: [do_sample, temperature, top_p, max_length, max_new_tokens]
        chat_template: false
        padding: true
        classification_head: false
        trust_remote_code: false
  - name: eval
    repos:
      - id: {LLAMA}
        revision: c25125528051545d7ab14f50a008a4cd210e5b34
"""


def x(n: int) -> str:
    return f"x_TRACKER-2026-{n}"


def _tracker(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(TRACKER), *args], env=env, capture_output=True, text=True, timeout=600
    )


def _delivered(secret: str, bodies: list[Any]) -> list[Any]:
    return [Webhook(secret).verify(r.body, r.headers) for r in bodies]


def test_two_teams_get_their_own_advisories_of_the_same_events(tmp_path: Path) -> None:
    ensure_demo_hub(tmp_path / "hub")
    watchlist = tmp_path / "watchlist.yaml"
    watchlist.write_text(WATCHLIST)
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("TRACKER_", "HF_", "HUGGINGFACE_"))
    }
    env.update(
        TRACKER_STATE_DIR=str(tmp_path / "state"),
        TRACKER_WATCHLIST=str(watchlist),
        TRACKER_WEBHOOK_ALLOW_NETWORKS="127.0.0.0/8",
        TRACKER_WEBHOOK_TIMEOUT_S="5",
        TRACKER_ADVISORY_PREFIX="TRACKER",
        TRACKER_PREFLIGHT_CACHE_DIR=str(ROOT / "state" / "cache" / "preflight"),
        HF_TOKEN=DEMO_TOKEN,
    )
    with Receiver() as rx, Replica(tmp_path / "hub") as hub:
        env["TRACKER_HF_ENDPOINT"] = hub.url
        unknown = _tracker(env, "subscribe", "add", rx.url, "--team", "nobody")
        assert (unknown.returncode, unknown.stderr) == (
            2,
            "error: no team 'nobody' in the watchlist (teams: support-bot, eval)\n",
        )
        subs: dict[str, Any] = {}
        for who, extra in (("bot", ["--team", "support-bot"]), ("eval", ["--team", "eval"])):
            added = _tracker(env, "subscribe", "add", f"{rx.url}?to={who}", *extra, "--json")
            assert added.returncode == 0, added.stderr
            subs[who] = json.loads(added.stdout)
        everyone = _tracker(env, "subscribe", "add", f"{rx.url}?to=all", "--json")
        subs["all"] = json.loads(everyone.stdout)
        assert [subs[w]["team"] for w in ("bot", "eval", "all")] == ["support-bot", "eval", None]
        listed = _tracker(env, "subscribe", "list")
        assert " support-bot " in listed.stdout and " any " in listed.stdout, listed.stdout

        polled = _tracker(env, "poll", "--once")
        assert polled.returncode == 0, polled.stderr[-3000:]

    def got(who: str) -> list[Any]:
        mine = [r for r in rx.received if r.path.endswith(f"?to={who}")]
        return _delivered(subs[who]["secret"], mine)

    def ids(payloads: list[Any], key: str = "advisories") -> list[int]:
        return sorted(int(a["id"].rsplit("-", 1)[1]) for p in payloads for a in p["data"][key])

    bot, ev, every = got("bot"), got("eval"), got("all")
    # the same events: every advisory of the history, to the subscription with no team
    assert ids(every) == list(range(1, 14))
    assert all("team" not in p["data"] for p in every)
    # Each team only what affects it when it is published, with the verdict and why. Judged
    # live, over the history as far as it is analysed then: x-2 (introduced and fixed before
    # support-bot's pin) and x-12 (introduced after both pins, fixed before HEAD) were in effect
    # when published, so both teams heard of them and of their fixes, where `tracker team
    # affected` (judged over the whole history) no longer lists them.
    assert [(p["data"]["commit"][:12], ids([p]), ids([p], "fixed")) for p in bot] == [
        ("be11a9a87307", [1], []), ("2272b24c354c", [2, 3], []), ("2359bbfaf86e", [], [2]),
        ("6b180d66f2cc", [], [1]), ("c94cd5d745fc", [5], []), ("42577fcae9e6", [9], []),
        ("f50399f48301", [10], []), ("74f34ee0814e", [12], []), ("ef1050a86f9e", [], [12]),
    ]  # fmt: skip
    assert [(p["data"]["commit"][:12], ids([p]), ids([p], "fixed")) for p in ev] == [
        ("2272b24c354c", [2], []), ("2359bbfaf86e", [], [2]), ("c94cd5d745fc", [5], []),
        ("74f34ee0814e", [12], []), ("ef1050a86f9e", [], [12]),
    ]  # fmt: skip
    verdicts = {
        (p["data"]["team"]["name"], p["data"]["commit"][:12], v["advisory"]): (
            v["impact"], v["reason"],
        )
        for p in bot + ev
        for v in p["data"]["team"]["verdicts"]
    }  # fmt: skip
    assert verdicts[("support-bot", "c94cd5d745fc", x(5))] == (
        "affects your next upgrade",
        "introduced after its pinned revision (fa1b5d11b6cd): the team loads config: "
        "`max_position_embeddings` changed",
    )
    assert verdicts[("eval", "c94cd5d745fc", x(5))] == (
        "affected",
        "the team loads config: `max_position_embeddings` changed",
    )
    assert verdicts[("support-bot", "2272b24c354c", x(3))] == (
        "affected",
        "the team pads with the tokenizer (`pad_token` changed)",
    )
    # eval's profile does not say whether it pads: x-3 is unknown to it, so not sent
    assert ("eval", "2272b24c354c", x(3)) not in verdicts
    assert verdicts[("eval", "ef1050a86f9e", x(12))] == (
        "relevant",
        "the team loads special tokens: `eos_token_id` changed",
    )
    # each subscription numbers its own events of the repo
    assert [p["data"]["sequence"] for p in ev] == [1, 2, 3, 4, 5]


def test_the_api_takes_a_team_and_refuses_an_unknown_one(tmp_path: Path) -> None:
    watchlist = tmp_path / "watchlist.yaml"
    watchlist.write_text(WATCHLIST)
    settings = load_settings(
        state_dir=tmp_path / "state", watchlist=watchlist, api_write_token=WRITE,
        webhook_allow_networks="127.0.0.0/8",
    )  # fmt: skip
    app = build(settings)
    auth = {"Authorization": f"Bearer {WRITE}"}
    try:
        with TestClient(create_app(app)) as client:
            url = "http://127.0.0.1:9/hook"
            r = client.post("/v1/subscriptions", json={"url": url, "team": "eval"}, headers=auth)
            assert r.status_code == 201, r.text
            assert r.json()["team"] == "eval"
            assert (
                client.get(f"/v1/subscriptions/{r.json()['id']}", headers=auth).json()["team"]
                == "eval"
            )
            bad = client.post("/v1/subscriptions", json={"url": url, "team": "x"}, headers=auth)
            assert bad.status_code == 422
            assert bad.headers["content-type"] == "application/problem+json"
            assert bad.json()["detail"] == (
                "no team 'x' in the watchlist (teams: support-bot, eval)"
            )
            plain = client.post("/v1/subscriptions", json={"url": url}, headers=auth)
            assert plain.json()["team"] is None
    finally:
        app.close()


def test_a_withdrawal_reaches_the_team_it_concerns_only(tmp_path: Path) -> None:
    """The lifecycle events (here `advisory.withdrawn`, after a force-push drops the revision)
    go through the same team filter as publications: the team that uses the repo gets the
    withdrawal with its verdict ("relevant") and reason; the team that does not, nothing."""
    from hookkit import REPO, SHAS, change, publish

    from tracker.advisories import service
    from tracker.shared.domain import Artifact
    from tracker.store.advisories import AdvisoryStore
    from tracker.store.webhooks import WebhookStore
    from tracker.teams.audience import TeamAudience
    from tracker.teams.facts import StoreFacts
    from tracker.teams.profile import TeamFields, team_of

    settings = load_settings(state_dir=tmp_path / "state", webhook_allow_networks="127.0.0.0/8")
    app = build(settings)
    try:
        hooks = WebhookStore(app.store.engine)
        subs = {
            name: hooks.add_subscription(
                url=f"http://127.0.0.1:9/{name}", repos=["*"], min_severity=Severity.LOW,
                kinds=[], secret="whsec_" + "QUJD" * 8, description="", now=NOW, team=name,
            )
            for name in ("users", "others")
        }  # fmt: skip
        teams = [
            team_of(TeamFields.model_validate({"name": "users", "repos": [{"id": REPO}]})),
            team_of(TeamFields.model_validate({"name": "others", "repos": [{"id": "a/b"}]})),
        ]
        audience = TeamAudience(lambda: teams, StoreFacts(app.store, app.preflight))
        eos = change(Artifact.CONFIG, "eos_token_id", 2, 32000, "config.json")
        publish(app.store, SHAS[0], None, [], audience=audience)
        [adv] = publish(app.store, SHAS[1], SHAS[0], [eos], audience=audience)
        gone = service.withdraw_rewritten(
            AdvisoryStore(app.store.engine), REPO, [SHAS[1]], NOW, None, audience
        )
        assert [a.id for a in gone] == [adv.id]

        def bodies(name: str) -> list[tuple[str, Any]]:
            out = hooks.deliveries(subscription_id=subs[name].id)
            return [(d.event, json.loads(d.body)["data"]["team"]) for d in reversed(out)]

        reason = "the team loads config: `eos_token_id` changed"
        assert bodies("users") == [
            ("revision.advisories", {"name": "users", "verdicts": [
                {"advisory": adv.id, "impact": "affected", "reason": reason}]}),
            ("advisory.withdrawn", {"name": "users", "verdicts": [
                {"advisory": adv.id, "impact": "relevant", "reason": reason}]}),
        ]  # fmt: skip
        assert bodies("others") == []
    finally:
        app.close()
