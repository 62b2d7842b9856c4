"""Numbers a reader can reproduce from the repo page, and words that mean one thing (issue 27),
over every demo repo at every revision (the session's demo store, the pages through HTTP):

- every card-fit cell follows from the figures the page shows: batch = ⌊(VRAM / headroom −
  fixed) ÷ per sample⌋ (training: fixed = weights, gradients and AdamW state, or LoRA's batch-1
  figure less the activations; serving: fixed = the weights, per sequence = KV cache + prefill
  working set, both shown), borderline when (fixed + per sample) × the factor exceeds the VRAM;
  the headline's card and batch are that card's cell;
- every headline sentence is one of its templates, each with its verb (fits, is borderline,
  needs), also for the variants the demo does not reach (built from a demo estimate);
- the headline writes each figure as the tables do ("2.15 GB", never "2,147 MB" beside it); no
  page says "0.0 hours" or "; .";
- "verified" only where a checkpoint census was compared, one legend of the words per page; a
  custom-code estimate with no census has no fit colours.
"""

from __future__ import annotations

import math
import re
from dataclasses import replace
from typing import Any

import pytest
from fastapi.testclient import TestClient
from lxml import html as lxml_html

from tracker.api import create_app
from tracker.shared.domain import Estimate
from tracker.shared.estimate_values import Fit
from tracker.web.views import gb_text, headline

G = r"[\d,]+\.\d{1,2} (?:GB|MB)"
VERB = (
    r"(?:fits one .+ at batch \d+|is borderline on one .+"
    r"|needs 2 .+ cards at batch 1 \(\d+ \+ \d+ layers\)"
    r"|fits no listed card, not even split over 2 cards)"
)
TRAIN = re.compile(
    rf"Fine-tuning \S+ at batch 1 and [\d,]+ tokens takes about {G} \({G} of it weights, "
    rf"gradients and AdamW state\), and {G} with LoRA r=\d+(?:: full fine-tuning {VERB}, "
    rf"LoRA {VERB})?\."
)
SERVE = re.compile(
    rf"Serving its {G} of weights as (?:shipped|set) \(.+\) with {G} of KV cache"
    rf"(?: and a {G} prefill working set)? per [\d,]+-token sequence"
    rf"(?: \(upcast to bf16: {G}\))?(?: {VERB})?\."
)
UNVOUCHED = "No card-fit verdict: the estimate is unverified."


def _sentence_ok(sentence: str, vouched: bool) -> bool:
    if not vouched:
        return sentence == UNVOUCHED or bool(
            (TRAIN.fullmatch(sentence) or SERVE.fullmatch(sentence)) and "fits" not in sentence
        )
    return bool(TRAIN.fullmatch(sentence) or SERVE.fullmatch(sentence))


@pytest.fixture(scope="module")
def pages(demo_run: Any) -> list[tuple[str, str, Estimate | None, str]]:
    """(repo, sha, stored estimate, page) of every demo repo at every stored revision."""
    app = demo_run.app
    client = TestClient(create_app(app))
    out = []
    for st in app.store.repo_states():
        for r in app.store.revisions(st.repo_id):
            page = client.get(f"/repos/{st.repo_id}", params={"rev": r.sha})
            assert page.status_code == 200, (st.repo_id, r.sha)
            stored = app.analysis.estimate(st.repo_id, r.sha)
            out.append((st.repo_id, r.sha, stored.estimate if stored else None, page.text))
    assert len(out) >= 50 and sum(1 for p in out if p[2] is not None) >= 40
    return out


def _value(tree: Any, id_: str) -> float:
    (el,) = tree.xpath(f'//*[@id="{id_}"]')
    return float(el.get("data-value"))


HALF_MB = 0.0005
"""The figures are shown (and stored) to the MB: each is within half of one of its true value."""


def _batch(vram: float, headroom: float, fixed: float, per: float) -> int:
    budget = vram / headroom
    if fixed >= budget:
        return 0
    return max(0, math.floor((budget - fixed) / per))


def _batches(vram: float, headroom: float, fixed: float, per: float, parts: int) -> range:
    """The batches the shown figures allow: from the figures at the top of their rounding to
    the bottom (`parts` figures summed into `per`); one batch unless a bound falls between."""
    lo = _batch(vram, headroom, fixed + HALF_MB, per + parts * HALF_MB)
    hi = _batch(vram, headroom, fixed - HALF_MB, max(per - parts * HALF_MB, 1e-9))
    return range(lo, hi + 1)


def test_every_fit_is_recomputed_from_the_figures_on_the_page(
    pages: list[tuple[str, str, Estimate | None, str]],
) -> None:
    checked = exact = 0
    serve_batches: dict[tuple[str, str], int] = {}
    for repo, sha, est, page in pages:
        if est is None:
            continue
        tree = lxml_html.fromstring(page)
        (table,) = tree.xpath('//table[@id="fit"]')
        headroom = float(table.get("data-headroom"))
        factor = float(table.get("data-borderline-factor"))
        states, act = _value(tree, "full-states"), _value(tree, "activations")
        lora_fixed = _value(tree, "lora-batch1") - act
        weights, kv = _value(tree, "serve-weights"), _value(tree, "kv-cache")
        prefill = _value(tree, "serve-prefill")
        figures = {
            "full_finetune": (states, act, 1),
            "lora": (lora_fixed, act, 1),
            "serve": (weights, kv + prefill, 2),
        }
        if tree.xpath('//*[@id="serve-weights-upcast"]'):
            figures["serve_upcast"] = (_value(tree, "serve-weights-upcast"), kv + prefill, 2)
        shown: dict[tuple[str, str], int] = {}
        for row in table.xpath(".//tr[@data-card]"):
            card, vram = row.get("data-card"), float(row.get("data-vram"))
            for cell in row.xpath("./td[@data-setup]"):
                setup, batch = cell.get("data-setup"), int(cell.get("data-batch"))
                shown[(card, setup)] = batch
                if "per card on" in cell.text_content() or (
                    setup.startswith("serve") and est.memory.serve_weights_source == "settings"
                ):
                    continue  # sharded: the per-card figures are not the table's
                fixed, per, parts = figures[setup]
                allowed = _batches(vram, headroom, fixed, per, parts)
                assert batch in allowed, (repo, sha, card, setup, allowed)
                exact += len(allowed) == 1
                if batch >= 1 and len(allowed) == 1:
                    borderline = (fixed + per) * factor > vram
                    assert cell.get("data-borderline") == str(borderline).lower(), (
                        repo, sha, card, setup,
                    )  # fmt: skip
                checked += 1
                if repo == "meta-llama/Llama-2-7b-hf" and setup == "serve":
                    serve_batches[(sha, card)] = batch
                    assert len(allowed) == 1, (sha, card, allowed)
        # the headline's verdicts are the table's cells
        words = " ".join(p.text_content() for p in tree.xpath('//*[@id="headline"]/p'))
        for card, n in re.findall(r"fits one (.+?) at batch (\d+)", words):
            assert any(shown.get((card, s)) == int(n) for s in figures), (repo, sha, card, n)
        # one unit per magnitude: the headline writes the tables' figures
        assert f"{gb_text(kv)} of KV cache" in words, (repo, sha)
        assert gb_text(weights) in words
    assert checked >= 500 and exact >= 0.95 * checked, (checked, exact)
    # Llama-2 on an L4: the prefill working set, shown, decides the batch
    l4 = {b for (_, card), b in serve_batches.items() if card.startswith("L4")}
    assert l4 == {2}, serve_batches


def test_every_headline_sentence_has_its_verb(
    pages: list[tuple[str, str, Estimate | None, str]],
) -> None:
    estimates = [(repo, est) for repo, _, est, _ in pages if est is not None]
    seen: set[str] = set()
    for repo, est in estimates:
        for sentence in headline(repo, est):
            assert _sentence_ok(sentence, est.verification.vouched), sentence
            seen |= {
                v for v in ("fits one", "is borderline", "needs 2", "fits no") if v in sentence
            }
    # the variants the demo does not reach, from one demo estimate
    repo, base = next((r, e) for r, e in estimates if e.verification.vouched)

    def every(fit: Fit) -> Estimate:
        cards = tuple(
            replace(c, full_finetune=fit, lora=fit, serve=fit, serve_upcast=None)
            for c in base.cards
        )
        return replace(base, cards=cards)

    variants = {
        "borderline": every(Fit(1, True, None, "batch 1 (borderline: measure one step first)")),
        "split": every(Fit(0, False, (16, 16), "2 cards at batch 1 (16 + 16 layers)", 2)),
        "none": every(Fit(0, False, None, "does not fit on 2 cards")),
        "fits": every(Fit(3, False, None, "batch 3")),
    }
    made = {k: " ".join(headline(repo, est)) for k, est in variants.items()}
    for est in variants.values():
        for sentence in headline(repo, est):
            assert _sentence_ok(sentence, True), sentence
    assert "full fine-tuning is borderline on one" in made["borderline"]
    assert re.search(r"sequence needs 2 .+ cards at batch 1 \(16 \+ 16 layers\)\.", made["split"])
    assert made["none"].endswith("sequence fits no listed card, not even split over 2 cards.")
    assert "LoRA fits one" in made["fits"] and seen


def _visible(page: str) -> str:
    """The page's text as a reader sees it (no style sheets, no chart drawing)."""
    tree = lxml_html.fromstring(page)
    for el in tree.xpath('//style | //*[local-name()="svg"]'):
        el.drop_tree()
    return " ".join(str(tree.text_content()).split())


def test_words_and_units_mean_one_thing(
    pages: list[tuple[str, str, Estimate | None, str]],
) -> None:
    words: dict[str, str] = {}
    uncoloured = 0
    for repo, sha, est, page in pages:
        tree = lxml_html.fromstring(page)
        text = _visible(page)
        for bad in ("; .", "0.0 hours"):
            at = text.find(bad)
            assert at < 0, (repo, sha, text[max(0, at - 300) : at + 40])
        if est is None:
            continue
        (word,) = tree.xpath('//*[@id="estimate-word"]/text()')
        words[repo] = word
        census = est.verification.census_delta_pct is not None
        assert (word == "verified") == (census and est.verification.status == "verified"), (
            repo, sha, word,
        )  # fmt: skip
        assert len(tree.xpath('//dl[@id="estimate-legend"]')) == 1
        legend = tree.xpath('//dl[@id="estimate-legend"]//dt/text()')
        assert legend == ["verified", "checked", "derived", "unverified"]
        coloured = tree.xpath('//table[@id="fit"]//td[@class]')
        if est.custom_code and not census:
            assert coloured == [], (repo, sha)
            uncoloured += 1
        elif est.verification.vouched:
            assert coloured, (repo, sha)
    assert words["THUDM/chatglm2-6b"] == words["Qwen/Qwen3-Next-80B-A3B-Thinking"] == "derived"
    assert words["meta-llama/Llama-2-7b-hf"] == "verified"
    assert uncoloured >= 1


def test_download_times_and_the_priced_card(
    pages: list[tuple[str, str, Estimate | None, str]],
) -> None:
    durations = set()
    cannots = priced_again = 0
    for repo, _, est, page in pages:
        durations |= set(re.findall(r"GB in ([\d.,]+ (?:hours|min|s)) at", page))
        if est is None or est.cost.hours is None:
            continue
        gpu = est.cost.assumptions["gpu"]
        assert f"GPU-hours on {gpu}, $" in page, repo
        vram = est.settings["cost_card"]["vram_gb"]
        cannot = any(c.vram_gb >= vram and c.full_finetune.batch < 1 for c in est.cards)
        assert ('id="cost-card-cannot"' in page) == cannot, repo
        cannots += cannot
        if not cannot:
            continue
        # priced again on the cheapest listed card that holds a full fine-tune, from the
        # numbers shown: the FLOPs, that card's peak and price, the utilization
        tree = lxml_html.fromstring(page)
        runnable = tree.xpath('//*[@id="cost-runnable"]')
        held = {
            c.name: c.full_finetune
            for c in est.cards
            if c.full_finetune.batch >= 1 or c.full_finetune.split is not None
        }
        holders = [card for card in est.settings["cards"] if card["name"] in held]
        assert bool(runnable) == bool(holders), repo
        if not holders:
            continue
        util = est.cost.assumptions["utilization"]
        usd = {
            c["name"]: est.cost.flops
            / (c["bf16_tflops"] * 1e12 * util)
            / 3600
            * c["price_per_hour"]
            for c in holders
        }
        name = min(usd, key=usd.__getitem__)
        text = " ".join(runnable[0].text_content().split())
        hours = usd[name] / next(c for c in holders if c["name"] == name)["price_per_hour"]
        fit = held[name]
        where = (
            f"On one {name}, which holds it at batch {fit.batch}"
            if fit.batch >= 1
            else f"On {len(fit.split or ())} {name} cards, which hold it split at batch 1"
        )
        assert text.startswith(f"{where}: about {hours:.1f} GPU-hours, ${usd[name]:,.0f} "), (
            repo, text,
        )  # fmt: skip
        priced_again += 1
    assert durations and not any(d.startswith("0.") for d in durations), durations
    assert cannots >= 5 and priced_again >= 5, (cannots, priced_again)
