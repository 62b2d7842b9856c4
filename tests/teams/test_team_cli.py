"""Three teams over the demo's Llama-2-7b-hf and chatglm2-6b histories: the same advisories give
different affected sets, each with its reason, through the installed `tracker team`; and a team
drafted by `tracker scan --draft-team` loads back as a watchlist team."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.scan.scankit import WATCHLIST, SmallStore, build_small_store, write_tree

LLAMA, GLM = "meta-llama/Llama-2-7b-hf", "THUDM/chatglm2-6b"


def teams_yaml(store: SmallStore) -> str:
    llama, glm = store.revisions[LLAMA], store.revisions[GLM]
    return f"""
teams:
  - name: support-bot
    description: LoRA r=8 at 4k tokens on two L4s, served with vLLM, passes its own sampling
    cards: {{name: "L4 24 GB", count: 2}}
    transformers: "4.57.1"
    vllm: "0.6.3"
    repos:
      - id: {LLAMA}
        revision: {llama[3][:12]}
        workloads:
          - {{kind: lora, rank: 8, context: 4096, batch: 1}}
          - {{kind: serve, engine: vllm, context: 4096, batch: 8, tensor_parallel: 2}}
        generation: [do_sample, temperature, top_p, max_length, max_new_tokens]
        chat_template: false
        padding: true
        classification_head: false
        trust_remote_code: false
  - name: research
    cards: {{name: "A100/H100 80 GB", count: 1}}
    transformers: "5.24.0"
    repos:
      - id: {LLAMA}
        workloads:
          - {{kind: full, context: 2048, batch: 1}}
        padding: false
        classification_head: true
      - id: {GLM}
        revision: {glm[5][:12]}
        trust_remote_code: true
        workloads:
          - {{kind: serve, engine: transformers, context: 8192, batch: 1}}
          - {{kind: lora, rank: 64, context: 4096, batch: 2}}
  - name: eval
    repos:
      - id: {LLAMA}
        revision: {llama[11]}
"""


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> SmallStore:
    built = build_small_store(tmp_path_factory.mktemp("team-store"))
    built.watchlist.write_text(WATCHLIST + teams_yaml(built))
    return built


def _affected(store: SmallStore, team: str) -> dict[str, tuple[str, str]]:
    done = store.run("team", "affected", team, "--json")
    assert done.returncode == 0, done.stderr
    return {r["advisory"]: (r["impact"], r["reason"]) for r in json.loads(done.stdout)}


def x(n: int) -> str:
    return f"x_TRACKER-2026-{n}"


def test_the_same_advisories_give_each_team_its_own_affected_set(store: SmallStore) -> None:
    llama, glm = store.revisions[LLAMA], store.revisions[GLM]
    bot, research, ev = (_affected(store, t) for t in ("support-bot", "research", "eval"))
    # the Llama-2 advisories x-1 … x-13 for every team; chatglm2's x-14 … x-22 only for research
    assert set(bot) == set(ev) == {x(n) for n in range(1, 14)}
    assert set(research) == {x(n) for n in range(1, 23)}

    def by(impacts: dict[str, tuple[str, str]]) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for aid in sorted(impacts, key=lambda a: int(a.rsplit("-", 1)[1])):
            out.setdefault(impacts[aid][0], []).append(aid)
        return out

    assert by(bot) == {
        "affected": [x(1), x(3)],
        "not affected": [x(2), x(4), x(6), x(7), x(8), x(11), x(12), x(13)],
        "affects your next upgrade": [x(5), x(9), x(10)],
    }
    assert by(research) == {
        "not affected": [x(1), x(2), x(3), x(4), x(6), x(7), x(8), x(10), x(11), x(12), x(13),
                         x(17)],
        "affected": [x(5), x(9), x(14), x(15)],
        "unknown": [x(16), x(18)],
        "affects your next upgrade": [x(19), x(20), x(21), x(22)],
    }  # fmt: skip
    assert by(ev) == {
        "not affected": [x(1), x(2), x(8), x(12), x(13)],
        "unknown": [x(3), x(4), x(6), x(7), x(9), x(10), x(11)],
        "affected": [x(5)],
    }
    pinned = llama[3][:12]
    # generation defaults: not a team that passes them, not a team that only trains
    assert bot[x(11)] == (
        "not affected",
        "the team passes `do_sample`, `temperature`, `top_p` itself",
    )
    assert research[x(11)] == (
        "not affected",
        "the team does not generate with it (fine-tuning only)",
    )
    assert ev[x(11)] == (
        "unknown",
        "the profile does not say which generation settings the team passes (`do_sample`, "
        "`temperature`, `top_p` changed)",
    )
    # padding and the pad id: the team that pads, the one with a classification head
    assert bot[x(10)] == (
        "affects your next upgrade",
        f"introduced after its pinned revision ({pinned}): the team pads with the tokenizer "
        "(`padding_side` changed)",
    )
    assert research[x(10)] == ("not affected", "the team does not pad with the tokenizer")
    assert research[x(9)] == (
        "affected",
        "the classification head reads the pad id (`pad_token_id` changed)",
    )
    # reverted before HEAD: the next upgrade skips it
    assert bot[x(12)][0] == ev[x(12)][0] == "not affected"
    assert bot[x(12)][1].endswith("the next upgrade skips it")
    assert bot[x(13)] == ("not affected", "a model card change: nothing the team loads or runs")
    # a fit move that crosses the team's own workload on its own cards
    assert research[x(15)] == (
        "affected",
        "LoRA r=64, 4096 tokens, batch 2 no longer fits 1 × A100/H100 80 GB (largest batch 2 → 1)",
    )
    # remote code: the import on the version the team runs, after its pin
    assert research[x(21)] == (
        "affects your next upgrade",
        f"introduced after its pinned revision ({glm[5][:12]}): the remote code does not import "
        "on transformers 5.24.0 (modules absent: modeling_chatglm.py, tokenization_chatglm.py)",
    )
    # unknown says what the profile lacks
    done = store.run("team", "affected", "research", "--json")
    rows = {r["advisory"]: r for r in json.loads(done.stdout)}
    assert rows[x(16)]["missing"] == ["padding", "classification_head"]


def test_team_list_show_and_the_text_summary(store: SmallStore) -> None:
    shown = store.run("team", "show", "support-bot")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines()[:5] == [
        "team support-bot: LoRA r=8 at 4k tokens on two L4s, served with vLLM, passes its own "
        "sampling",
        "  cards: 2 × L4 24 GB",
        "  transformers: 4.57.1; vLLM: 0.6.3",
        f"  {LLAMA}: pins {store.revisions[LLAMA][3][:12]}",
        "    workload: LoRA r=8, 4096 tokens, batch 1",
    ]
    listed = json.loads(store.run("team", "list", "--json").stdout)
    assert [t["name"] for t in listed] == ["support-bot", "research", "eval"]
    assert listed[2]["cards"] is None and listed[2]["repos"][0]["generation"] is None
    text = store.run("team", "affected", "eval")
    assert text.stdout.splitlines()[-1] == (
        "team eval: 13 advisories: 1 affected, 0 affects your next upgrade, 7 unknown, "
        "5 not affected"
    )
    every = json.loads(store.run("team", "affected", "support-bot", "--all", "--json").stdout)
    assert len(every) == 22
    assert {(r["impact"], r["reason"]) for r in every if r["repo"] == GLM} == {
        ("not affected", f"the team does not use {GLM}")
    }
    missing = store.run("team", "show", "nobody")
    assert (missing.returncode, missing.stderr.strip()) == (
        3,
        "error: no team 'nobody' in the watchlist (teams: support-bot, research, eval)",
    )


def test_a_bad_teams_block_is_refused_with_every_problem(store: SmallStore, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        WATCHLIST
        + """teams:
  - name: a
    cards: {name: "Z9 7 GB"}
    repos:
      - {id: org/m, revision: abc, follows: main}
  - name: a
    repos:
      - id: org/m
        workloads: [{kind: serve, rank: 8}]
"""
    )
    done = store.run("team", "list", env={"TRACKER_WATCHLIST": str(bad)})
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert lines[0].startswith(f"error: {bad} is invalid")
    text = "\n".join(lines)
    assert "'Z9 7 GB' is not in the estimate's catalogue" in text
    assert "give the revision it pins or the ref it follows, not both" in text
    assert "rank and sharding are fine-tune settings" in text


def test_scan_drafts_a_team_that_loads_back(store: SmallStore, tmp_path: Path) -> None:
    glm = store.revisions[GLM]
    tree = write_tree(
        tmp_path / "code",
        {
            "serve.sh": f"vllm serve {GLM} --revision {glm[5][:12]} --tensor-parallel-size 2 "
            "--max-model-len 8192 --trust-remote-code\n",
            "train.py": "from peft import LoraConfig\nfrom transformers import AutoModel\n"
            f'm = AutoModel.from_pretrained("{LLAMA}", revision="{store.revisions[LLAMA][3]}")\n'
            "c = LoraConfig(r=8)\n",
            "requirements.txt": "transformers==4.57.1\nvllm==0.6.3\n",
        },
    )
    done = store.run("scan", str(tree), "--draft-team", "drafted")
    assert done.returncode == 0, done.stderr
    drafted = yaml.safe_load(done.stdout)
    assert drafted == {
        "teams": [
            {
                "name": "drafted",
                "transformers": "4.57.1",
                "vllm": "0.6.3",
                "repos": [
                    {
                        "id": GLM,
                        "revision": glm[5][:12],
                        "workloads": [
                            {"kind": "serve", "engine": "vllm", "context": 8192,
                             "tensor_parallel": 2}
                        ],
                        "trust_remote_code": True,
                    },
                    {
                        "id": LLAMA,
                        "revision": store.revisions[LLAMA][3],
                        "workloads": [{"kind": "lora", "rank": 8}],
                    },
                ],
            }
        ]
    }  # fmt: skip
    assert "# not seen in code (unknown until you add them): cards, generation" in done.stdout
    wl = tmp_path / "wl.yaml"
    wl.write_text(WATCHLIST + done.stdout)
    shown = store.run("team", "affected", "drafted", "--json", env={"TRACKER_WATCHLIST": str(wl)})
    assert shown.returncode == 0, shown.stderr
    rows = {r["advisory"]: r for r in json.loads(shown.stdout)}
    assert rows[x(19)]["impact"] == "affects your next upgrade"
    assert rows[x(19)]["reason"].endswith(
        "the remote code does not import on transformers 4.57.1 (modules absent: "
        "configuration_chatglm.py, modeling_chatglm.py, tokenization_chatglm.py)"
    )
    # the draft saw a LoRA config and no engine for Llama-2: a fine-tune, not generation
    assert (rows[x(11)]["impact"], rows[x(11)]["reason"]) == (
        "not affected",
        "the team does not generate with it (fine-tuning only)",
    )


def test_upgrade_report_of_a_pinned_llama2_names_exactly_what_applies(store: SmallStore) -> None:
    llama = store.revisions[LLAMA]
    done = store.run("team", "report", "support-bot", LLAMA, "--json")
    assert done.returncode == 0, done.stderr
    r = json.loads(done.stdout)
    assert (r["pinned"], r["head"], r["behind"]) == (llama[3], llama[-1], 11)
    assert r["verdict"] == "upgrade with these changes"
    # between the pin and HEAD: x-5 … x-13; for this profile only these three apply
    assert [(a["id"], a["severity"]) for a in r["applies"]] == [
        (x(5), "moderate"),
        (x(9), "high"),
        (x(10), "moderate"),
    ]
    assert r["unknown"] == []
    assert [a["id"] for a in r["fixed_by_upgrade"]] == [x(1)]
    assert [a["id"] for a in r["stays"]] == [x(3)]
    assert r["fits"] == [
        {
            "workload": "LoRA r=8, 4096 tokens, batch 1 on 2 × L4 24 GB",
            "batch": 1,
            "largest_batch_at_pin": 0,
            "largest_batch_at_head": 0,
            "note": None,
        },
        {
            "workload": "serve (vllm), tensor parallel 2, 4096 tokens, batch 8 on 2 × L4 24 GB",
            "batch": 8,
            "largest_batch_at_pin": 11,
            "largest_batch_at_head": 11,
            "note": None,
        },
    ]
    text = store.run("team", "report", "support-bot", LLAMA).stdout.splitlines()
    assert text[:2] == [
        f"team support-bot on {LLAMA}: {llama[3][:12]} → HEAD {llama[-1][:12]} (11 revisions)",
        "verdict: upgrade with these changes",
    ]
    # the remote-code team on chatglm2: critical advisories apply after its pin
    glm = json.loads(store.run("team", "report", "research", GLM, "--json").stdout)
    assert glm["verdict"] == "do not upgrade yet"
    assert [a["id"] for a in glm["applies"]] == [x(19), x(20), x(21), x(22)]
    assert glm["remote_code"] == {
        "transformers": "5.24.0",
        "imports_at_pin": False,
        "imports_at_head": False,
    }
    # the eval team pinned three revisions from HEAD: nothing between applies
    ev = json.loads(store.run("team", "report", "eval", LLAMA, "--json").stdout)
    assert (ev["verdict"], ev["why"]) == (
        "safe",
        ["no advisory between the pin and HEAD applies to this profile"],
    )
    unused = store.run("team", "report", "eval", GLM)
    assert (unused.returncode, unused.stderr.strip()) == (
        3,
        f"error: team eval does not use {GLM}",
    )


def test_the_api_answers_as_the_cli(store: SmallStore) -> None:
    from fastapi.testclient import TestClient

    from tracker.api import create_app
    from tracker.app import build
    from tracker.settings import load_settings

    app = build(load_settings(state_dir=store.state, watchlist=store.watchlist), read_only=True)
    try:
        with TestClient(create_app(app)) as client:
            for team in ("support-bot", "research", "eval"):
                got = client.get(f"/v1/teams/{team}/affected")
                assert got.status_code == 200
                cli = json.loads(store.run("team", "affected", team, "--json").stdout)
                assert got.json() == cli
            only = client.get(
                "/v1/teams/research/affected", params={"impact": "affects your next upgrade"}
            ).json()
            assert [r["advisory"] for r in only] == [x(19), x(20), x(21), x(22)]
            report = client.get(f"/v1/teams/support-bot/report/{LLAMA}").json()
            assert [a["id"] for a in report["applies"]] == [x(5), x(9), x(10)]
            listed = client.get("/v1/teams").json()
            assert [t["name"] for t in listed] == ["support-bot", "research", "eval"]
            missing = client.get("/v1/teams/nobody")
            assert missing.status_code == 404
            assert missing.headers["content-type"].startswith("application/problem+json")
            bad = client.get("/v1/teams/eval/affected", params={"impact": "sometimes"})
            assert bad.status_code == 400
    finally:
        app.close()


def test_team_feeds_hold_what_affects_each_team(store: SmallStore) -> None:
    import feedparser
    from fastapi.testclient import TestClient

    from tests.feeds.feedkit import check_json_feed
    from tracker.api import create_app
    from tracker.app import build
    from tracker.settings import load_settings

    app = build(load_settings(state_dir=store.state, watchlist=store.watchlist), read_only=True)
    try:
        with TestClient(create_app(app)) as client:
            expected = {
                "support-bot": [1, 3, 5, 9, 10],
                "research": [5, 9, 14, 15, 19, 20, 21, 22],
                "eval": [5],
            }
            for team, numbers in expected.items():
                got = client.get(f"/v1/teams/{team}/feed.atom")
                assert got.status_code == 200
                parsed = feedparser.parse(got.content)
                assert not parsed.bozo, parsed.get("bozo_exception")
                assert parsed.feed.title == f"tracker: advisories that affect team {team}"
                ids = sorted(int(e.link.rsplit("-", 1)[1]) for e in parsed.entries)
                assert ids == numbers, team
                doc = client.get(f"/v1/teams/{team}/feed.json").json()
                check_json_feed(doc)
                assert sorted(int(i["url"].rsplit("-", 1)[1]) for i in doc["items"]) == numbers
            atom = feedparser.parse(client.get("/v1/teams/support-bot/feed.atom").content)
            by_id = {e.link.rsplit("/", 1)[1]: e for e in atom.entries}
            assert by_id[x(10)].summary.startswith(
                "affects your next upgrade (team support-bot): introduced after its pinned revision"
            )
            assert client.get("/v1/teams/nobody/feed.atom").status_code == 404
    finally:
        app.close()


def test_scan_updates_an_existing_team_from_the_code(store: SmallStore, tmp_path: Path) -> None:
    llama = store.revisions[LLAMA]
    tree = write_tree(
        tmp_path / "code",
        {
            "infer.py": "from vllm import LLM\n"
            f'llm = LLM(model="{LLAMA}", revision="{llama[-1][:12]}", tensor_parallel_size=2)\n',
            "requirements.txt": "transformers==4.57.2\n",
        },
    )
    done = store.run("scan", str(tree), "--draft-team", "support-bot")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[:3] == [
        "# team support-bot, updated by `tracker scan` from the pins found:",
        "#   transformers: 4.57.1 → 4.57.2",
        f"#   {LLAMA}: revision {llama[3][:12]} → {llama[-1][:12]}",
    ]
    (updated,) = yaml.safe_load(done.stdout)["teams"]
    assert updated["transformers"] == "4.57.2"
    assert updated["repos"][0]["revision"] == llama[-1][:12]
    # what the profile said and code cannot see is kept
    assert updated["cards"] == {"name": "L4 24 GB", "count": 2}
    assert updated["repos"][0]["padding"] is True
    assert updated["repos"][0]["generation"] == [
        "do_sample", "temperature", "top_p", "max_length", "max_new_tokens"
    ]  # fmt: skip
    wl = tmp_path / "wl.yaml"
    wl.write_text(WATCHLIST + done.stdout)
    report = store.run(
        "team", "report", "support-bot", LLAMA, "--json", env={"TRACKER_WATCHLIST": str(wl)}
    )
    assert report.returncode == 0, report.stderr
    r = json.loads(report.stdout)
    assert (r["behind"], r["verdict"], r["applies"]) == (0, "safe", [])
