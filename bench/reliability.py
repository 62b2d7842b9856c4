"""Peak memory of every reader of upstream data on its worst inputs, at the size caps (issue 10,
hostile-inputs must-show, long form; the short form is tests/reliability/test_hostile_readers.py
with hypothesis-drawn inputs and the same bounds).

Each row: one reader on one input, its outcome (parsed, or the one-line reason it was refused),
the peak bytes traced by `tracemalloc` while it ran, and the bound the reader must keep (n: the
input's bytes). The inputs are real files blown up the hostile way (up to the value caps: 500k values
for config-like JSON, 4M for tokenizers and headers, 50k for card front matter):
openai/gpt-oss-20b's config.json, Mistral-7B-Instruct-v0.3's tokenizer.json, Llama-4-Maverick's
README front matter and the project's watchlist.yaml; for the rows added later: gpt-oss-20b's
generation_config.json, Llama-2-7b-hf's model.safetensors.index.json, Llama-3.2-3B-Instruct's
chat_template.jinja, DeepSeek-V3's config.json (auto_map) and transformers' modeling_deepseek_v3.py
(remote code, as the preflight parses it). The Hub API answers (refs, commits, tree) are served
whole by a loopback server in this process (its thread writes a prebuilt body, so it adds little
to the traced peak) to the HubSource the ingest uses.
"""

from __future__ import annotations

import json
import os
import struct
import threading
import time
import tracemalloc
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from tracker.diff._common import load_json_object
from tracker.diff.card import parse_card
from tracker.diff.conversations import CONVERSATIONS, template_variables
from tracker.diff.sandbox import render_in_process
from tracker.diff.tokenizer import summarise_tokenizer
from tracker.estimate import EstimateSettings, estimate, parse_config
from tracker.estimate.checkpoint import index_total_size as _total_size
from tracker.preflight import imports as preflight_imports
from tracker.preflight.census_lora import tensor_names
from tracker.shared.domain import RepoId, Sha
from tracker.shared.errors import TrackerError
from tracker.sources.hub import HubSource
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


GENERATION = (MODELS / "openai__gpt-oss-20b" / "generation_config.json").read_bytes()
INDEX = (MODELS / "meta-llama__Llama-2-7b-hf" / "model.safetensors.index.json").read_bytes()
TEMPLATE = (MODELS / "meta-llama__Llama-3.2-3B-Instruct" / "chat_template.jinja").read_bytes()
AUTO_MAP_CONFIG = (MODELS / "deepseek-ai__DeepSeek-V3" / "config.json").read_bytes()


def _modeling() -> bytes:
    import transformers

    root = Path(transformers.__file__).parent
    return (root / "models" / "deepseek_v3" / "modeling_deepseek_v3.py").read_bytes()


def _with(real: bytes, extra: bytes) -> bytes:
    return real.rstrip().rstrip(b"}") + b', "pad": ' + extra + b"}"


def _index_with(entries: int) -> bytes:
    more = b"".join(
        b'"model.layers.%d.mlp.experts.%d.weight": "model-%05d-of-09999.safetensors", '
        % (i // 9, i % 9, i % 9999)
        for i in range(entries)
    )
    return INDEX.replace(b'"weight_map": {', b'"weight_map": {' + more, 1)


def _special_tokens() -> dict[str, object]:
    return {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"}


def _render(source: bytes) -> object:
    variables = [template_variables(conv, _special_tokens()) for conv in CONVERSATIONS]
    return render_in_process(source.decode("utf-8", "replace"), variables)


def _remote_code(config: bytes, module: bytes) -> object:
    preflight_imports.read_module.cache_clear()  # the cache would hide the parse
    files = {"config.json": config, "modeling_deepseek.py": module}
    return preflight_imports.remote_code_modules(files)


class _Answer(BaseHTTPRequestHandler):
    body = b"{}"

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(_Answer.body)))
        self.end_headers()
        self.wfile.write(_Answer.body)


def _hub(server: str, call: str) -> Callable[[bytes], object]:
    def read(body: bytes) -> object:
        _Answer.body = body  # served whole, one page
        src = HubSource(server, timeout_s=30, retry_attempts=1)
        rid = RepoId("acme/x")
        if call == "refs":
            return src.resolve_ref(rid, "main")
        if call == "commits":
            return src.list_commits(rid, "main")
        return src.list_tree(rid, Sha("0" * 40))

    return read


def _tree(files: int) -> bytes:
    return json.dumps([
        {"type": "file", "oid": f"{i:040x}", "size": 1000 + i,
         "path": f"shards/model-{i:06d}-of-{files:06d}.safetensors",
         "lfs": {"oid": f"{i:064x}", "size": 1000 + i, "pointerSize": 134}}
        for i in range(files)
    ]).encode()  # fmt: skip


def _commits(n: int) -> bytes:
    return json.dumps([
        {"id": f"{i:040x}", "title": f"Upload shard {i}", "message": "x" * 200,
         "date": "2026-11-30T12:00:00.000Z", "authors": [{"user": f"user{i}"}]}
        for i in range(n)
    ]).encode()  # fmt: skip


def _refs(branches: int) -> bytes:
    return json.dumps({
        "branches": [{"name": f"b{i}", "ref": f"refs/heads/b{i}", "targetCommit": f"{i:040x}"}
                     for i in range(branches)] + [
            {"name": "main", "ref": "refs/heads/main", "targetCommit": "a" * 40}],
        "tags": [], "converts": [],
    }).encode()  # fmt: skip


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
            result = fn()
            outcome = "parsed"
            if isinstance(result, list) and result and hasattr(result[0], "outcome"):
                kinds = sorted({str(r.outcome) for r in result})  # the sandbox's verdicts
                outcome = f"rendered {len(result)}: " + ", ".join(kinds)
                reasons = sorted({r.error for r in result if r.error})
                outcome += (" (" + reasons[0][:60] + ")") if reasons else ""
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
    cases += _more_cases(json_bound, deep, wide, values)
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Answer)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    server = f"http://127.0.0.1:{httpd.server_address[1]}"
    cases += [
        ("Hub refs (JSON)", "100,000 branches", _refs(100_000), _hub(server, "refs"), json_bound),
        ("Hub refs (JSON)", "3,000-deep array", b"[" * 3000 + b"]" * 3000,
         _hub(server, "refs"), json_bound),
        ("Hub commits (JSON)", "100,000 commits", _commits(100_000), _hub(server, "commits"),
         json_bound),
        ("Hub tree (JSON)", "100,000 LFS files", _tree(100_000), _hub(server, "tree"), json_bound),
        ("Hub tree (JSON)", "3,000-deep array", b"[" * 3000 + b"]" * 3000,
         _hub(server, "tree"), json_bound),
    ]  # fmt: skip
    out = []
    try:
        for reader, what, data, fn, bound in cases:
            outcome, peak, seconds = _peak(lambda fn=fn, data=data: fn(data))  # type: ignore[misc]
            out.append((reader, what, len(data), outcome, peak, bound(len(data)), seconds))
    finally:
        httpd.shutdown()
        httpd.server_close()
    return out


Case = tuple[str, str, bytes, Callable[[bytes], object], Callable[[int], int]]


def _more_cases(
    json_bound: Callable[[int], int], deep: bytes, wide: bytes, values: bytes
) -> list[Case]:
    """Generation config, index files, chat templates and the preflight's readers."""

    def template_bound(n: int) -> int:
        return 100 * n + 64 * MiB

    def ast_bound(n: int) -> int:
        return 400 * n + 4 * MiB

    gen = lambda d: load_json_object("generation_config.json", d)  # noqa: E731
    index = lambda d: load_json_object("model.safetensors.index.json", d)  # noqa: E731
    index_name = "model.safetensors.index.json"
    big_index = _index_with(200_000)
    two_sizes = big_index.replace(b'"metadata": {', b'"metadata": {"total_size": 1, ', 1)
    auto_map = lambda d: preflight_imports.auto_map_modules({"config.json": d})  # noqa: E731
    many_maps = AUTO_MAP_CONFIG.replace(
        b'"auto_map": {',
        b'"auto_map": {'
        + b"".join(b'"Auto%d": "modeling_%d.M%d", ' % (i, i % 50, i) for i in range(100_000)),
        1,
    )
    modeling = _modeling()
    big_module = modeling * (1_000_000 // len(modeling) + 1)
    many_statements = b"".join(b"x%d = (%d, 'v%d')\n" % (i, i, i) for i in range(60_000))
    loop_bomb = (
        b"{% for i in range(1000000) %}{% for j in range(1000000) %}"
        b"{{ 'x' * 1000000 }}{% endfor %}{% endfor %}"
    )
    deep_ifs = b"{% if true %}" * 500 + b"x" + b"{% endif %}" * 500
    padded = TEMPLATE + b"{#" + b"x" * (511_000 - len(TEMPLATE)) + b"#}"
    return [
        ("generation config (JSON)", "gpt-oss-20b generation config + 900-deep array",
         _with(GENERATION, deep), gen, json_bound),
        ("generation config (JSON)", "gpt-oss-20b generation config + 5M empty arrays",
         _with(GENERATION, wide), gen, json_bound),
        ("generation config (JSON)", "gpt-oss-20b generation config + 400k numbers",
         _with(GENERATION, values), gen, json_bound),
        ("index (JSON)", "Llama-2-7b-hf index + 200,000 weight_map entries", big_index, index,
         json_bound),
        ("index (JSON)", "Llama-2-7b-hf index + 5M empty arrays", _with(INDEX, wide), index,
         json_bound),
        ("index (JSON)", "Llama-2-7b-hf index + 900-deep array", _with(INDEX, deep), index,
         json_bound),
        ("chat template (render, sandbox)", "Llama-3.2-3B-Instruct (real), 8 conversations",
         TEMPLATE, _render, template_bound),
        ("chat template (render, sandbox)", "real + comment up to the 511,000-char source cap",
         padded, _render, template_bound),
        ("chat template (render, sandbox)", "nested loops of 1M-char strings", loop_bomb,
         _render, template_bound),
        ("chat template (render, sandbox)", "500 nested ifs", deep_ifs, _render, template_bound),
        ("preflight auto_map scan", "DeepSeek-V3 config + 100,000 auto_map entries", many_maps,
         auto_map, json_bound),
        ("preflight auto_map scan", "DeepSeek-V3 config + 5M empty arrays (bounded parse refuses; no modules)",
         _with(AUTO_MAP_CONFIG, wide), auto_map, json_bound),
        ("preflight index metadata", "index + 200,000 entries, total_size twice", two_sizes,
         lambda d: _total_size({index_name: d}), json_bound),
        ("preflight index weight_map names", "index + 200,000 weight_map entries", big_index,
         lambda d: tensor_names({index_name: d}, {}), json_bound),
        ("preflight index weight_map names", "index + 5M empty arrays in weight_map",
         INDEX.replace(b'"weight_map": {', b'"weight_map": {"pad": ' + wide + b", ", 1),
         lambda d: tensor_names({index_name: d}, {}), json_bound),
        ("preflight remote code (AST)", "transformers' modeling_deepseek_v3.py (real)", modeling,
         lambda d: _remote_code(AUTO_MAP_CONFIG, d), ast_bound),
        ("preflight remote code (AST)", "modeling_deepseek_v3.py repeated to 1 MB", big_module,
         lambda d: _remote_code(AUTO_MAP_CONFIG, d), ast_bound),
        ("preflight remote code (AST)", "60,000 tuple assignments", many_statements,
         lambda d: _remote_code(AUTO_MAP_CONFIG, d), ast_bound),
        ("preflight remote code (AST)", "5,000-deep parentheses",
         b"x = " + b"(" * 5000 + b"1" + b")" * 5000 + b"\n",
         lambda d: _remote_code(AUTO_MAP_CONFIG, d), ast_bound),
    ]  # fmt: skip


def run() -> str:
    import tempfile

    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="tracker-readers-") as tmp:
        measured = rows(Path(tmp))
    load_after = os.getloadavg()
    over = [f"{r} ({w})" for r, w, _, _, peak, bound, _ in measured if peak > bound]
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
    lines += [
        "",
        f"Load average (1 min) {load_before[0]:.1f} before, {load_after[0]:.1f} after. "
        + ("Over the bound: " + "; ".join(over) + "." if over else "Every peak within its bound."),
        "Bounds: JSON readers (configs, indexes, Hub answers, the preflight's scans) 40·n + 4 MiB; "
        "card front matter 200·n + 4 MiB, at most 64 MiB; watchlist 200·n + 4 MiB; chat template "
        "render (compile + the 8 canonical conversations in the sandbox) 100·n + 64 MiB; remote code AST parse "
        "400·n + 4 MiB.",
    ]
    return "\n".join(lines) + "\n"
