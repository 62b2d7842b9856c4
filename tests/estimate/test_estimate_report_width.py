"""`tracker estimate`'s plain report fits the terminal (issue 11 item 7): the installed executable,
piped (80 columns), keeps every line within 80 and every number whole; COLUMNS=200 gives the wide
one-line rows; a width too narrow for the fit table drops its columns and names them."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

TRACKER = Path(sys.executable).with_name("tracker")
CONFIGS = Path(__file__).parents[1] / "data" / "configs"
NUMBER = re.compile(r"\d[\d,.]*\d|\d")


def estimate(config: str, columns: str | None) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACKER_", "COLUMNS"))}
    if columns is not None:
        env["COLUMNS"] = columns
    done = subprocess.run(
        [str(TRACKER), "estimate", config],
        cwd=CONFIGS,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert (done.returncode, done.stderr) == (0, "")
    return done.stdout


A100_AT_80 = """\
A100 40 GB       does not fit on     does not fit on      2 cards at batch 1 (24
                 2 cards; 90 cards   2 cards; 10 cards    + 24 layers)
                 with FSDP at        with FSDP at
                 batch 1             batch 1
"""


def test_piped_report_fits_80_columns_with_exact_values() -> None:
    text = estimate("Qwen__Qwen3-30B-A3B.json", None)
    lines = text.splitlines()
    assert max(len(line) for line in lines) == 80
    assert (
        "parameters: 30,532,122,624 total, 3,353,032,704 active per token (with the\n"
        "  embedding; 3,041,867,776 without), 311,164,928 embedding; 48 layers\n"
    ) in text
    assert "routed_experts  28,991,029,248  95.0%" in lines
    assert "card             full fine-tune      LoRA                 serving" in lines
    assert A100_AT_80 in text
    assert (
        "memory (GB): full fine-tune 608.454 at batch 1 (586.217\n"
        "  weights+grads+optimizer), LoRA 114.648 (base bf16, 996,507,648 adapter\n"
        "  parameters; the routed experts adapted), serving weights 61.064 as shipped\n"
        "  (bf16) + KV 0.403 + prefill working set 0.22 per 4096-token sequence\n"
    ) in text
    assert "not shown" not in text
    wide = estimate("Qwen__Qwen3-30B-A3B.json", "200")
    assert max(len(line) for line in wide.splitlines()) == 196  # the cost line (cheapest card)
    assert (
        "A100 40 GB       does not fit on 2 cards; 90 cards with FSDP at batch 1  "
        "does not fit on 2 cards; 10 cards with FSDP at batch 1  2 cards at batch 1 (24 + 24 "
        "layers)"
    ) in wide.splitlines()
    # Nothing was cut or left out at 80 columns: the same numbers (wrapped cells reorder them).
    assert sorted(NUMBER.findall(text)) == sorted(NUMBER.findall(wide))


@pytest.mark.parametrize(
    "config",
    [
        "Qwen__Qwen-7B-Chat.json",  # a finding and a note
        "microsoft__Phi-4-reasoning-vision-15B.json",  # unverified: the long "NO VERDICT" title
        "deepseek-ai__DeepSeek-R1.json",
        "moonshotai__Kimi-K3.json",
    ],
)
def test_every_line_fits_and_no_number_is_lost(config: str) -> None:
    narrow, wide = estimate(config, None), estimate(config, "250")
    assert max(len(line) for line in narrow.splitlines()) <= 80
    assert max(len(line) for line in wide.splitlines()) > 80
    assert sorted(NUMBER.findall(narrow)) == sorted(NUMBER.findall(wide))


def test_too_narrow_for_the_fit_table_names_the_columns_left_out() -> None:
    text = estimate("Qwen__Qwen3-30B-A3B.json", "40")
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 40
    assert "card             serving" in lines
    assert "A100/H100 80 GB  batch 13 (borderline:" in lines
    assert "(not shown at 40 columns: full\n  fine-tune, LoRA; --json has\n  everything)\n" in text
