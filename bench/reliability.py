"""Peak memory of every reader of upstream data on its worst inputs, at the size caps (issue 10,
hostile-inputs must-show, long form; the short form is tests/reliability/test_hostile_readers.py
with hypothesis-drawn inputs and the same bounds).

Each row: one reader on one input, its outcome (parsed, or the one-line reason it was refused),
the peak bytes traced by `tracemalloc` while it ran, and the bound the reader must keep (n: the
input's bytes). The inputs are real files blown up the hostile way (up to the value caps: 500k values
for config-like JSON, 4M for tokenizers and headers, 50k for card front matter):
openai/gpt-oss-20b's config.json, Mistral-7B-Instruct-v0.3's tokenizer.json, Llama-4-Maverick's
README front matter and the project's watchlist.yaml.
"""

from __future__ import annotations

import json
import struct
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

from tracker.diff._common import load_json_object
from tracker.diff.card import parse_card
from tracker.diff.tokenizer import summarise_tokenizer
from tracker.errors import TrackerError
from tracker.estimate import EstimateSettings, estimate, parse_config
from tracker.sources.safetensors import parse_file_prefix
from tracker.watchlist import load_watchlist

MiB = 1024 * 1024
CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus"
MODELS = CORPUS / "models"
CONFIG = (MODELS / "openai__gpt-oss-20b" / "config.json").read_bytes()
TOKENIZER = (
    CORPUS / "pairs/mistralai__Mistral-7B-Instruct-v0.3/rev-main-83e9aa1/tokenizer.json"
).read_bytes()
CARD = (
    MODELS / "meta-llama__Llama-4-Maverick-17B-128E-Instruct" / "README.frontmatter.md"
).read_bytes()


def _config_with(extra: bytes) -> bytes:
    return CONFIG.rstrip().rstrip(b"}") + b', "pad": ' + extra + b"}"


def _header(tensors: int) -> bytes:
    header: dict[str, object] = {"__metadata__": {"format": "pt"}}
    for i in range(tensors):
        header[f"model.layers.{i // 9}.mlp.experts.{i % 9}.weight"] = {
            "dtype": "BF16", "shape": [16, 16], "data_offsets": [i * 512, (i + 1) * 512],
        }  # fmt: skip
    raw = json.dumps(header).encode()
    return struct.pack("<Q", len(raw)) + raw


def _laughs(levels: int) -> bytes:
    doc = 'a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    for i in range(1, levels):
        doc += f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]\n"
    return b"---\n" + doc.encode() + b"---\n# card\n"


def _big_card() -> bytes:
    body = CARD.split(b"---", 2)[1]
    extra = b"".join(b"tag_%d: value %d\n" % (i, i) for i in range(40_000))
    return b"---" + body + extra + b"---\n# card\n"


def _watchlist(path: Path, repos: int) -> Path:
    path.write_text("repos:\n" + "".join(f"  - id: org{i}/model-{i}\n" for i in range(repos)))
    return path


def _peak(fn: Callable[[], object]) -> tuple[str, int, float]:
    tracemalloc.start()
    started = time.perf_counter()
    try:
        try:
            fn()
            outcome = "parsed"
        except TrackerError as exc:
            outcome = "refused: " + str(exc)[:90]
        return outcome, tracemalloc.get_traced_memory()[1], time.perf_counter() - started
    finally:
        tracemalloc.stop()


def rows(tmp: Path) -> list[tuple[str, str, int, str, int, int, float]]:
    def json_bound(n: int) -> int:
        return 40 * n + 4 * MiB

    card_bound: Callable[[int], int] = lambda n: min(200 * n + 4 * MiB, 64 * MiB)  # noqa: E731
    deep = b"[" * 900 + b"]" * 900
    wide = b"[" + b"[]," * 5_000_000 + b"[]]"  # 15 MB of empty arrays
    values = b"[" + b",".join(b"%d" % i for i in range(400_000)) + b"]"
    cases: list[tuple[str, str, bytes, Callable[[bytes], object], Callable[[int], int]]] = [
        ("config (JSON)", "gpt-oss-20b config + 900-deep array", _config_with(deep),
         lambda d: load_json_object("config.json", d), json_bound),
        ("config (JSON)", "gpt-oss-20b config + 5M empty arrays", _config_with(wide),
         lambda d: load_json_object("config.json", d), json_bound),
        ("config (JSON)", "gpt-oss-20b config + 400k numbers",
         _config_with(values), lambda d: load_json_object("config.json", d), json_bound),
        ("estimate's config reading", "gpt-oss-20b config + 5M empty arrays",
         _config_with(wide), lambda d: estimate(parse_config(d), None, EstimateSettings()),
         json_bound),
        ("tokenizer.json", "Mistral-7B-Instruct-v0.3 (real)", TOKENIZER,
         lambda d: summarise_tokenizer("tokenizer.json", d), json_bound),
        ("tokenizer.json", "Mistral v0.3 + 262,144 more vocab entries",
         TOKENIZER.replace(b'"vocab": {', b'"vocab": {' + b"".join(
             b'"x%d_%d": %d, ' % (k, i, i) for k in range(8) for i in range(32768)), 1),
         lambda d: summarise_tokenizer("tokenizer.json", d), json_bound),
        ("safetensors header", "100,000 tensors", _header(100_000),
         lambda d: parse_file_prefix(d, 100_000_000), json_bound),
        ("safetensors header", "declares 10 GB (8 bytes read)", struct.pack("<Q", 10 * 1024**3),
         lambda d: parse_file_prefix(d, 100_000_000), json_bound),
        ("card front matter (YAML)", "billion laughs, 9 levels", _laughs(9),
         lambda d: parse_card("README.md", d), card_bound),
        ("card front matter (YAML)", "Llama-4-Maverick front matter + 40k keys",
         _big_card(), lambda d: parse_card("README.md", d), card_bound),
        ("watchlist (YAML)", "10,000 repos",
         _watchlist(tmp / "w10k.yaml", 10_000).read_bytes(),
         lambda d: load_watchlist(tmp / "w10k.yaml"), lambda n: 200 * n + 4 * MiB),
    ]  # fmt: skip
    out = []
    for reader, what, data, fn, bound in cases:
        outcome, peak, seconds = _peak(lambda fn=fn, data=data: fn(data))  # type: ignore[misc]
        out.append((reader, what, len(data), outcome, peak, bound(len(data)), seconds))
    return out


def run() -> str:
    import tempfile

    with tempfile.TemporaryDirectory(prefix="tracker-readers-") as tmp:
        measured = rows(Path(tmp))
    lines = [
        "## Hostile inputs: peak memory per reader (`make bench`, `python -m bench.run reliability`)",
        "",
        "Peak bytes traced by `tracemalloc` while each reader of upstream data ran on a hostile "
        "input at or near its size cap; the bound is the one tests/reliability/"
        "test_hostile_readers.py asserts on hypothesis-drawn inputs (n = input bytes). Only typed "
        "one-line errors escaped.",
        "",
        "| reader | input | bytes | outcome | peak MiB | bound MiB | within | s |",
        "|---|---|---:|---|---:|---:|---|---:|",
    ]
    for reader, what, n, outcome, peak, bound, seconds in measured:
        lines.append(
            f"| {reader} | {what} | {n:,} | {outcome.replace('|', '/')} | {peak / MiB:.1f} "
            f"| {bound / MiB:.1f} | {'yes' if peak <= bound else 'NO'} | {seconds:.2f} |"
        )
    return "\n".join(lines) + "\n"
