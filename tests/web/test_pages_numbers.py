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
    """The priced card is the cheapest listed card (by the job's USD, from each card's peak and
    price) that holds a full fine-tune at batch 1, on one card or split over two, and the page
    says how it holds it; where no listed card does, the page says that no card can run it and
    the price is a rate on the cheapest card per FLOP."""
    durations = set()
    runs = cannots = 0
    for repo, _, est, page in pages:
        durations |= set(re.findall(r"GB in ([\d.,]+ (?:hours|min|s)) at", page))
        if est is None or est.cost.hours is None:
            continue
        a = est.cost.assumptions
        gpu = a["gpu"]
        assert est.settings["cost_card"] is None, repo  # the demo's watchlist names none
        assert f"GPU-hours on {gpu}, ${est.cost.usd:,.0f}" in page, repo
        tree = lxml_html.fromstring(page)
        (cost,) = tree.xpath('//p[@id="cost"]')
        text = " ".join(cost.text_content().split())
        held = {
            c.name: c.full_finetune
            for c in est.cards
            if c.full_finetune.batch >= 1 or c.full_finetune.split is not None
        }
        listed = [*est.settings["cards"], *est.settings["extra_cards"]]
        util = a["utilization"]
        usd = {
            c["name"]: est.cost.flops
            / (c["bf16_tflops"] * 1e12 * util)
            / 3600
            * c["price_per_hour"]
            for c in listed
            if c["bf16_tflops"] > 0 and c["price_per_hour"] > 0
        }
        holders = [name for name in usd if name in held]
        # the shown hours and USD follow from the shown peak, utilization and price
        assert a["usd_per_hour"] == next(c for c in listed if c["name"] == gpu)["price_per_hour"]
        assert est.cost.usd == round(usd[gpu], 2), repo
        assert f"{est.cost.hours:.1f} GPU-hours" in text, repo
        if holders:
            assert gpu == min(holders, key=usd.__getitem__), (repo, gpu, holders)
            assert not tree.xpath('//*[@id="cost-card-cannot"]'), repo
            fit = held[gpu]
            how = (
                f"one card at batch {fit.batch}"
                if fit.batch >= 1
                else f"{len(fit.split or ())} cards, the layers split between them at batch 1"
            )
            (said,) = tree.xpath('//*[@id="cost-card-runs"]')
            assert " ".join(said.text_content().split()) == (
                f"({how}: the cheapest listed card that holds a full fine-tune at batch 1)"
            ), repo
            runs += 1
        else:
            assert gpu == min(usd, key=usd.__getitem__), (repo, gpu)
            assert not tree.xpath('//*[@id="cost-card-runs"]'), repo
            assert "No listed card can run this job: none holds a full fine-tune at batch 1, " in (
                text
            ), repo
            cannots += 1
    assert durations and not any(d.startswith("0.") for d in durations), durations
    assert runs >= 5 and cannots >= 1, (runs, cannots)


def _cost_paragraph(demo_run: Any, est: Estimate) -> str:
    """The Cost paragraph of the Llama-2 page with its estimate replaced by `est`, rendered
    by the pages' own template."""
    from tracker.web import environment, views
    from tracker.web.charts import charts

    view = replace(views.repo(demo_run.app, "meta-llama/Llama-2-7b-hf", None), estimate=est)
    body = (
        environment()
        .get_template("repo.html")
        .render(
            view=view,
            headline=headline("meta-llama/Llama-2-7b-hf", est),
            charts=charts(view.points),
            alternates=[],
        )
    )
    (cost,) = lxml_html.fromstring(body).xpath('//p[@id="cost"]')
    return " ".join(cost.text_content().split())


def test_a_named_priced_card_that_cannot_run_the_job(demo_run: Any) -> None:
    """A watchlist naming a `cost_card` (here the A10G, the default before issue 27) is priced
    as named; the page flags that it cannot run a 7B full fine-tune and prices the cheapest
    listed card that can. A report stored before the choice existed reads the same way."""
    import json
    from pathlib import Path

    from tracker.estimate import Card, EstimateSettings, estimate

    configs = Path(__file__).parents[1] / "data" / "configs"
    config = json.loads((configs / "meta-llama__Llama-2-7b-hf.json").read_text())
    a10g = Card("A10G 24 GB", 24.0, 1.006, 125.0)
    est = estimate(config, settings=replace(EstimateSettings(), cost_card=a10g))
    text = _cost_paragraph(demo_run, est)
    assert text.startswith("Training about 273.3 GPU-hours on A10G 24 GB, $275: "), text
    assert (
        "The priced card cannot run this job: a full fine-tune does not fit one A10G 24 GB "
        "(Card fit: a listed card with at least its memory does not hold it), so that price is "
        "a roofline rate, not a plan. On 2 H200 141 GB cards, which hold it split at batch 1: "
        "about 34.5 GPU-hours, $138 (the same FLOPs at 989 bf16 TFLOPS × 0.35 utilization, $4 "
        "an hour; the cheapest listed card that holds it)."
    ) in text, text
    # a report stored before the choice (priced on the A10G, the settings' card then, and no
    # `gpu_choice` or `gpu_cards`): Mixtral, which no listed card holds on one or two
    mixtral = json.loads((configs / "mistralai__Mixtral-8x7B-v0.1.json").read_text())
    stored = estimate(mixtral, settings=replace(EstimateSettings(), cost_card=a10g)).to_json()
    for key in ("gpu_choice", "gpu_cards"):
        del stored["cost"]["assumptions"][key]  # type: ignore[index, union-attr]
    text = _cost_paragraph(demo_run, Estimate.from_json(stored))
    assert text.startswith("Training about 512.9 GPU-hours on A10G 24 GB, $516: "), text
    assert text.endswith(
        "so that price is a roofline rate, not a plan. No listed card holds a full fine-tune "
        "at batch 1, on one card or split over two."
    ), text
    # the default: the cheapest card that runs it, and the page says how
    text = _cost_paragraph(demo_run, estimate(config))
    assert text.startswith(
        "Training about 34.5 GPU-hours on H200 141 GB, $138 (2 cards, the layers split between "
        "them at batch 1: the cheapest listed card that holds a full fine-tune at batch 1): "
    ), text
    assert "cannot run" not in text
