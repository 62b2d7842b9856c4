"""Lineage through the installed `tracker`, run as a process against the Hub replica (issue 28,
item 4): a base model and two derivatives, where the base fixes its chat template.

- the base `deepseek-ai/DeepSeek-R1-Distill-Qwen-32B`: its real config.json,
  generation_config.json, tokenizer_config.json and card front matter, with the chat template as
  llama.cpp captured it from the Hub (corpus history llamacpp__deepseek-ai-DeepSeek-R1-Distill-
  Qwen-32B, version 01) in chat_template.jinja, then llama.cpp's fix of it (version 02);
- `acme/R1-Distill-Qwen-32B-GGUF`, converted before the fix: a Q4_K_M GGUF written by gguf-py
  (ggufkit.write_qwen_like, the stand-in base tokens of test_gguf_history_cli) that embeds the old
  template and names the base in `general.base_model.0.*`, and a card with `base_model`;
- `acme/R1-Distill-Qwen-32B-ft`, fine-tuned after the fix: the base's files with the fixed template
  and a card with `base_model` and `base_model_relation: finetune`. STAND-IN: no weights (the
  lineage reads the template, ids, generation defaults and tokenizer only).

The GGUF gets a stale-derivative advisory on the poll that sees the fix, the fine-tune none; the
GGUF re-converted with the fixed template fixes it (a fixed event), and `tracker lineage` shows
each node's state before and after.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from ggufkit import CORPUS, write_qwen_like

from tracker.replica import Replica
from tracker.replica.repos import commit, init_repo

pytestmark = pytest.mark.replica

BASE = "deepseek-ai/DeepSeek-R1-Distill-Qwen-32B"
GGUF_REPO = "acme/R1-Distill-Qwen-32B-GGUF"
FT_REPO = "acme/R1-Distill-Qwen-32B-ft"
MODEL = CORPUS / "models/deepseek-ai__DeepSeek-R1-Distill-Qwen-32B"
HISTORY = CORPUS / "histories/llamacpp__deepseek-ai-DeepSeek-R1-Distill-Qwen-32B"
OLD = (HISTORY / "01_8b576b6c_deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja").read_text()
FIXED = (HISTORY / "02_c7f460ab_deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja").read_text()
ADDED = ["<｜end▁of▁sentence｜>", "<｜User｜>", "<｜Assistant｜>", "<｜begin▁of▁sentence｜>",
         "<|EOT|>", "<think>", "</think>"]  # fmt: skip
Q4 = "DeepSeek-R1-Distill-Qwen-32B-Q4_K_M.gguf"
T0 = datetime(2025, 2, 1, tzinfo=UTC)
HF = "https://huggingface.co"  # the public URL advisories name (TRACKER_HUB_PUBLIC_URL)
TRACKER = Path(sys.executable).with_name("tracker")  # the installed CLI


def _gguf(work: Path, template: str) -> bytes:
    (path,) = write_qwen_like(
        work / Q4, config=MODEL / "config.json", name="DeepSeek R1 Distill Qwen 32B",
        template=template, added=ADDED, specials={"bos": 151646, "eos": 151643, "pad": 151643},
        base_models=(("DeepSeek R1 Distill Qwen 32B", "Deepseek Ai",
                      f"https://huggingface.co/{BASE}"),),
    )  # fmt: skip
    data = path.read_bytes()
    path.unlink()
    return data


def _own_files(template: str) -> dict[str, bytes | None]:
    """The base's real files, with `template` as chat_template.jinja."""
    out: dict[str, bytes | None] = {
        name: (MODEL / name).read_bytes()
        for name in ("config.json", "generation_config.json", "tokenizer_config.json")
    }
    out["chat_template.jinja"] = template.encode()
    return out


def _card(front: str) -> bytes:
    return f"---\n{front}---\n# model\n".encode()


def _lineage(run: Any, rid: str) -> dict[str, Any]:
    out = run("lineage", rid, "--json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)  # type: ignore[no-any-return]


def test_base_fixes_its_template_the_gguf_converted_before_is_stale_until_reconverted(
    tmp_path: Path,
) -> None:
    root, work, state = tmp_path / "hub", tmp_path / "work", tmp_path / "state"
    for d in (root, work, state):
        d.mkdir()
    base, gg = init_repo(root, BASE), init_repo(root, GGUF_REPO)
    real_card = (MODEL / "README.frontmatter.md").read_bytes() + b"\n# DeepSeek-R1\n"
    b1 = commit(base, {"README.md": real_card, **_own_files(OLD)}, "Upload", date=T0)
    g1 = commit(gg, {"README.md": _card(f"base_model: {BASE}\n"), Q4: _gguf(work, OLD)},
                "Upload Q4_K_M", date=T0 + timedelta(hours=1))  # fmt: skip
    # the base is not watched: it is fetched for comparison (within the rate budget)
    watchlist = tmp_path / "watchlist.yaml"
    watchlist.write_text(f"repos:\n  - id: {GGUF_REPO}\n")
    with Replica(root) as hub:

        def run(*args: str) -> subprocess.CompletedProcess[str]:
            env = dict(os.environ, TRACKER_STATE_DIR=str(state), TRACKER_HF_ENDPOINT=hub.url,
                       TRACKER_WATCHLIST=str(watchlist))  # fmt: skip
            return subprocess.run([str(TRACKER), *args], capture_output=True, text=True,
                                  env=env, timeout=600, check=False)  # fmt: skip

        def advisories() -> list[dict[str, Any]]:
            out = run("advisories", "list", "--json")
            assert out.returncode == 0, out.stderr
            return json.loads(out.stdout)  # type: ignore[no-any-return]

        # poll 1: the GGUF links to the base (card and GGUF header), compared at b1: nothing stale
        polled = run("poll", "--once", "--json")
        assert polled.returncode == 0, polled.stderr
        tree = _lineage(run, BASE)
        assert tree["watched"] is False and tree["head"] is None and tree["bases"] == []
        (node,) = tree["derivatives"]
        assert (node["repo"], node["relation"], node["via"], node["state"]) == (
            GGUF_REPO, "quantized", "card+gguf", "up to date")  # fmt: skip
        assert (node["head"], node["base_compared_at"], node["advisories"]) == (g1, b1, [])
        assert [a for a in advisories() if a["group"] == "lineage"] == []

        # the base fixes its template; the fine-tune is made after the fix
        b2 = commit(base, {"chat_template.jinja": FIXED.encode()},
                    "Fix tool-call of DeepSeek R1 Qwen", date=T0 + timedelta(days=1))  # fmt: skip
        ft = init_repo(root, FT_REPO)
        watchlist.write_text(f"repos:\n  - id: {GGUF_REPO}\n  - id: {FT_REPO}\n")
        ft_card = _card(f"base_model: {BASE}\nbase_model_relation: finetune\n")
        f1 = commit(ft, {"README.md": ft_card, **_own_files(FIXED)}, "Fine-tune",
                    date=T0 + timedelta(days=2))  # fmt: skip

        # poll 2 (one poll after the fix): the GGUF is stale, the fine-tune is not
        polled = run("poll", "--once", "--json")
        assert polled.returncode == 0, polled.stderr
        stale = [a for a in advisories() if a["group"] == "lineage"]
        assert [(a["repo"], a["severity"], a["introduced"], a["state"]) for a in stale] == [
            (GGUF_REPO, "high", g1, "open")
        ]
        assert stale[0]["summary"] == (
            f"{GGUF_REPO}: stale derivative: converted before {BASE} changed its chat template "
            f"at {b2[:12]}"
        )
        shown = run("advisories", "show", stale[0]["id"], "--json")
        assert shown.returncode == 0, shown.stderr
        record = json.loads(shown.stdout)
        assert record["details"].startswith(
            f"**Severity: high**: converted before [{BASE}]({HF}/{BASE}) changed its chat "
            f"template at [`{b2[:12]}`]({HF}/{BASE}/commit/{b2}) (“Fix tool-call of DeepSeek "
            f"R1 Qwen”); your GGUF `{Q4}` still renders the old prompt."
        )  # the unwatched base's commit, read when the stale value is found
        assert record["database_specific"]["lineage"]["base_sha"] == b2
        assert [(s["key"], s["file"]) for s in record["database_specific"]["lineage"]["stale"]] == [
            ("chat_template", Q4)
        ]

        tree = _lineage(run, BASE)
        states = {n["repo"]: (n["relation"], n["via"], n["state"]) for n in tree["derivatives"]}
        assert states == {
            GGUF_REPO: ("quantized", "card+gguf", "stale"),
            FT_REPO: ("finetune", "card", "up to date"),
        }
        ft_node = next(n for n in tree["derivatives"] if n["repo"] == FT_REPO)
        assert (ft_node["head"], ft_node["base_compared_at"], ft_node["advisories"]) == (f1, b2, [])
        # a finding at the base's newest revision: the GGUF's template differs, the fine-tune's not
        differs = {n["repo"]: n["differs_from_base"] for n in tree["derivatives"]}
        assert differs == {GGUF_REPO: [{"file": Q4, "key": "chat_template"}], FT_REPO: []}
        text = run("lineage", GGUF_REPO)
        assert text.returncode == 0, text.stderr
        assert text.stdout.splitlines() == [
            f"{GGUF_REPO} (watched, head {g1[:12]})",
            f"  base {BASE} (quantized, via card+gguf; not watched): stale",
            f"      the derivative differs at the base revision compared: chat_template ({Q4})",
            f"      {stale[0]['id']} [high, open] {stale[0]['summary']}",
        ]

        # a poll with nothing new changes nothing (no second advisory for the same stale value)
        again = run("poll", "--once", "--json")
        assert again.returncode == 0, again.stderr
        assert [a["id"] for a in advisories() if a["group"] == "lineage"] == [stale[0]["id"]]

        # the GGUF is re-converted from the fixed base: the advisory is fixed there
        g2 = commit(gg, {Q4: _gguf(work, FIXED)}, "Re-convert after the template fix",
                    date=T0 + timedelta(days=3))  # fmt: skip
        polled = run("poll", "--once", "--json")
        assert polled.returncode == 0, polled.stderr
        after = [a for a in advisories() if a["repo"] == GGUF_REPO]
        assert [(a["group"], a["introduced"], a["state"]) for a in after] == [
            ("lineage", g1, "fixed"),
            ("chat_template", g2, "open"),  # the GGUF's own template did change for its users
        ]
        fixed = json.loads(run("advisories", "show", stale[0]["id"], "--json").stdout)
        assert fixed["database_specific"]["fixed"] == g2
        assert fixed["affected"][0]["versions"] == [g1]
        assert {"fixed": g2} in fixed["affected"][0]["ranges"][0]["events"]
        assert "it no longer has any value its base model left" in fixed["details"]
        tree = _lineage(run, GGUF_REPO)
        (base_node,) = tree["bases"]
        assert (base_node["repo"], base_node["state"], base_node["head"]) == (
            BASE,
            "up to date",
            None,
        )
        assert base_node["differs_from_base"] == []
        assert [(a["id"], a["state"]) for a in base_node["advisories"]] == [
            (stale[0]["id"], "fixed")
        ]

        unknown = run("lineage", "acme/nothing-here")
        assert unknown.returncode == 3  # not found
        assert unknown.stderr.strip().endswith(
            "acme/nothing-here is not in the store, and no watched repo names it as its base"
        )


def test_a_watched_base_changes_template_and_eos_the_finetune_made_before_is_stale(
    tmp_path: Path,
) -> None:
    """The base watched too (read from the store revision by revision, with its commit title),
    and a safetensors-side fine-tune made before the base changed both its template and its
    generation eos: one advisory naming both, fixed when the fine-tune takes the new files."""
    root, state = tmp_path / "hub", tmp_path / "state"
    root.mkdir()
    state.mkdir()
    base, ft = init_repo(root, BASE), init_repo(root, FT_REPO)
    generation = json.loads((MODEL / "generation_config.json").read_text())
    b1 = commit(base, _own_files(OLD), "Upload", date=T0)
    ft_card = _card(f"base_model: {BASE}\nbase_model_relation: finetune\n")
    f1 = commit(ft, {"README.md": ft_card, **_own_files(OLD)}, "Fine-tune",
                date=T0 + timedelta(hours=1))  # fmt: skip
    new_generation = json.dumps({**generation, "eos_token_id": [151643, 151647]}).encode()
    b2 = commit(base, {"chat_template.jinja": FIXED.encode(),
                       "generation_config.json": new_generation},
                "Fix the template and stop on EOT too", date=T0 + timedelta(days=1))  # fmt: skip
    watchlist = tmp_path / "watchlist.yaml"
    watchlist.write_text(f"repos:\n  - id: {BASE}\n  - id: {FT_REPO}\n")
    with Replica(root) as hub:

        def run(*args: str) -> subprocess.CompletedProcess[str]:
            env = dict(os.environ, TRACKER_STATE_DIR=str(state), TRACKER_HF_ENDPOINT=hub.url,
                       TRACKER_WATCHLIST=str(watchlist))  # fmt: skip
            return subprocess.run([str(TRACKER), *args], capture_output=True, text=True,
                                  env=env, timeout=600, check=False)  # fmt: skip

        # one poll sees the whole history: the fine-tune is compared with every base revision
        polled = run("poll", "--once", "--json")
        assert polled.returncode == 0, polled.stderr
        listed = json.loads(run("advisories", "list", "--json").stdout)
        stale = [a for a in listed if a["group"] == "lineage"]
        assert [(a["repo"], a["severity"], a["introduced"], a["state"]) for a in stale] == [
            (FT_REPO, "high", f1, "open")
        ]
        assert stale[0]["summary"] == (
            f"{FT_REPO}: stale derivative: fine-tuned before {BASE} changed its chat template "
            f"(and 1 more) at {b2[:12]}"
        )
        record = json.loads(run("advisories", "show", stale[0]["id"], "--json").stdout)
        assert record["details"].startswith(
            f"**Severity: high**: fine-tuned before [{BASE}]({HF}/{BASE}) changed its chat "
            f"template at [`{b2[:12]}`]({HF}/{BASE}/commit/{b2}) (“Fix the template and stop on "
            "EOT too”); this repo still renders the old prompt."
        )
        assert (
            "- **high** `eos_token_id`: this repo still has eos_token_id = 151643; the base now has another."
            in record["details"]
        )
        assert [(s["key"], s["file"]) for s in record["database_specific"]["lineage"]["stale"]] == [
            ("chat_template", ""),
            ("eos_token_id", ""),
        ]
        tree = _lineage(run, BASE)
        assert (tree["watched"], tree["head"]) == (True, b2)
        (node,) = tree["derivatives"]
        assert (node["repo"], node["relation"], node["via"], node["state"]) == (
            FT_REPO, "finetune", "card", "stale")  # fmt: skip

        # the fine-tune takes the base's new template and generation config: fixed there
        f2 = commit(ft, {"chat_template.jinja": FIXED.encode(),
                         "generation_config.json": new_generation},
                    "Take the base's fixes", date=T0 + timedelta(days=2))  # fmt: skip
        assert run("poll", "--once", "--json").returncode == 0
        fixed = json.loads(run("advisories", "show", stale[0]["id"], "--json").stdout)
        assert fixed["database_specific"]["fixed"] == f2
        assert _lineage(run, FT_REPO)["bases"][0]["state"] == "up to date"
        assert b1 != b2


def test_a_stale_advisory_reaches_the_team_subscriptions_it_concerns(tmp_path: Path) -> None:
    """A stale-derivative advisory is delivered to a webhook subscription filtered to a watchlist
    team (`tracker subscribe add --team`) as a revision's own advisories are: judged by the team's
    profile. The GGUF's stale value is its chat template: the team that applies the template gets
    it with the verdict and why; the team that does not, nothing; a subscription with no team, it."""
    from standardwebhooks import Webhook

    from bench.webhook_receiver import Receiver

    root, work, state = tmp_path / "hub", tmp_path / "work", tmp_path / "state"
    for d in (root, work, state):
        d.mkdir()
    base, gg = init_repo(root, BASE), init_repo(root, GGUF_REPO)
    commit(base, _own_files(OLD), "Upload", date=T0)
    g1 = commit(gg, {"README.md": _card(f"base_model: {BASE}\n"), Q4: _gguf(work, OLD)},
                "Upload Q4_K_M", date=T0 + timedelta(hours=1))  # fmt: skip
    watchlist = tmp_path / "watchlist.yaml"
    watchlist.write_text(
        f"repos:\n  - id: {GGUF_REPO}\nteams:\n"
        f"  - name: chat\n    repos:\n      - id: {GGUF_REPO}\n        chat_template: true\n"
        f"  - name: raw\n    repos:\n      - id: {GGUF_REPO}\n        chat_template: false\n"
    )
    with Receiver() as rx, Replica(root) as hub:

        def run(*args: str) -> subprocess.CompletedProcess[str]:
            env = dict(os.environ, TRACKER_STATE_DIR=str(state), TRACKER_HF_ENDPOINT=hub.url,
                       TRACKER_WATCHLIST=str(watchlist), TRACKER_WEBHOOK_TIMEOUT_S="5",
                       TRACKER_WEBHOOK_ALLOW_NETWORKS="127.0.0.0/8")  # fmt: skip
            return subprocess.run([str(TRACKER), *args], capture_output=True, text=True,
                                  env=env, timeout=600, check=False)  # fmt: skip

        secrets = {}
        for who, extra in (("chat", ["--team", "chat"]), ("raw", ["--team", "raw"]), ("all", [])):
            added = run("subscribe", "add", f"{rx.url}?to={who}", *extra, "--json")
            assert added.returncode == 0, added.stderr
            secrets[who] = json.loads(added.stdout)["secret"]
        assert run("poll", "--once").returncode == 0
        b2 = commit(base, {"chat_template.jinja": FIXED.encode()},
                    "Fix tool-call of DeepSeek R1 Qwen", date=T0 + timedelta(days=1))  # fmt: skip
        polled = run("poll", "--once")
        assert polled.returncode == 0, polled.stderr
        listed = json.loads(run("advisories", "list", "--json").stdout)
        (stale,) = [a for a in listed if a["group"] == "lineage"]
        assert (stale["introduced"], stale["state"]) == (g1, "open")

    def got(who: str) -> list[Any]:
        mine = [r for r in rx.received if r.path.endswith(f"?to={who}")]
        return [Webhook(secrets[who]).verify(r.body, r.headers) for r in mine]

    def stale_in(payloads: list[Any]) -> list[Any]:
        return [p for p in payloads if any(a["id"] == stale["id"] for a in p["data"]["advisories"])]

    (chat,) = stale_in(got("chat"))
    assert chat["data"]["commit"] == g1
    assert chat["data"]["team"]["verdicts"] == [
        {
            "advisory": stale["id"],
            "impact": "affected",
            "reason": f"the team applies the chat template, which {BASE} has since fixed",
        }
    ]
    assert stale_in(got("raw")) == []
    (everyone,) = stale_in(got("all"))
    assert "team" not in everyone["data"] and b2 != g1


def test_a_gguf_whose_template_differs_from_its_base_at_head_is_a_finding(tmp_path: Path) -> None:
    """A GGUF converted with llama.cpp's fixed template (corpus version 02) while its base on the
    Hub still has the template llama.cpp captured from it (version 01): nothing the base changed
    explains it, so it is not stale, but it differs from its base at HEAD in its chat template: a
    moderate "differs from its base" advisory (once, not on every poll), fixed when the GGUF is
    re-converted with the base's template."""
    root, work, state = tmp_path / "hub", tmp_path / "work", tmp_path / "state"
    for d in (root, work, state):
        d.mkdir()
    base, gg = init_repo(root, BASE), init_repo(root, GGUF_REPO)
    b1 = commit(base, _own_files(OLD), "Upload", date=T0)
    g1 = commit(gg, {"README.md": _card(f"base_model: {BASE}\n"), Q4: _gguf(work, FIXED)},
                "Upload Q4_K_M", date=T0 + timedelta(hours=1))  # fmt: skip
    watchlist = tmp_path / "watchlist.yaml"
    watchlist.write_text(f"repos:\n  - id: {GGUF_REPO}\n")
    with Replica(root) as hub:

        def run(*args: str) -> subprocess.CompletedProcess[str]:
            env = dict(os.environ, TRACKER_STATE_DIR=str(state), TRACKER_HF_ENDPOINT=hub.url,
                       TRACKER_WATCHLIST=str(watchlist))  # fmt: skip
            return subprocess.run([str(TRACKER), *args], capture_output=True, text=True,
                                  env=env, timeout=600, check=False)  # fmt: skip

        def lineage_advisories() -> list[dict[str, Any]]:
            out = run("advisories", "list", "--json")
            assert out.returncode == 0, out.stderr
            return [a for a in json.loads(out.stdout) if a["group"] == "lineage"]

        assert run("poll", "--once").returncode == 0
        (found,) = lineage_advisories()
        assert (found["severity"], found["introduced"], found["state"], found["summary"]) == (
            "moderate", g1, "open",
            f"{GGUF_REPO}: differs from its base {BASE} at {b1[:12]}: chat template",
        )  # fmt: skip
        record = json.loads(run("advisories", "show", found["id"], "--json").stdout)
        assert record["details"].startswith(
            f"**Severity: moderate**: your GGUF `{Q4}` has another chat template than "
            f"[{BASE}]({HF}/{BASE}) at [`{b1[:12]}`]({HF}/{BASE}/commit/{b1}) (“Upload”), and no "
            "change of the base that tracker read explains it."
        )
        assert (
            f"- **moderate** chat template in your GGUF `{Q4}`\n"
            f"  - the GGUF's: {len(FIXED):,} characters; the base's: {len(OLD):,} characters"
        ) in record["details"]
        lineage = record["database_specific"]["lineage"]
        assert (lineage["kind"], lineage["base_sha"]) == ("differs", b1)
        assert [(s["key"], s["file"]) for s in lineage["stale"]] == [("chat_template", Q4)]
        (node,) = _lineage(run, GGUF_REPO)["bases"]
        assert (node["state"], node["differs_from_base"]) == (
            "differs from base", [{"file": Q4, "key": "chat_template"}])  # fmt: skip

        # polled again with nothing new: the same finding, not a second one
        assert run("poll", "--once").returncode == 0
        assert [a["id"] for a in lineage_advisories()] == [found["id"]]

        # re-converted with the base's template: fixed there
        g2 = commit(gg, {Q4: _gguf(work, OLD)}, "Re-convert with the Hub's template",
                    date=T0 + timedelta(days=1))  # fmt: skip
        assert run("poll", "--once").returncode == 0
        (fixed,) = lineage_advisories()
        assert (fixed["id"], fixed["state"]) == (found["id"], "fixed")
        shown = json.loads(run("advisories", "show", found["id"], "--json").stdout)
        assert shown["database_specific"]["fixed"] == g2
        (node,) = _lineage(run, GGUF_REPO)["bases"]
        assert (node["state"], node["differs_from_base"]) == ("up to date", [])
