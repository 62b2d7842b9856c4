# ruff: noqa: B023  (the nested helpers are called within their loop iteration)
"""Assemble tracker/demo_data/repos/ from ../shared/corpus: copy real files and write each repo's HISTORY.tsv.

Run once by hand (`python tracker/demo_data/assemble.py [CORPUS]`); the result is committed. `build_demo_hub`
only reads tracker/demo_data/repos/. Synthetic revisions are defined here, with their reasons in the message.
"""

from __future__ import annotations

import csv
import json
import shutil
import sys
from datetime import datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
CORPUS = Path(sys.argv[1] if len(sys.argv) > 1 else HERE.parents[2] / "shared" / "corpus")
SYN_AUTHOR = "tracker-demo"
COLUMNS = ["seq", "source_commit", "date", "author", "message", "path", "local_file", "synthetic"]

# repo -> (history files to replay, model-dir files added to the first commit, README source)
REPOS: dict[str, dict[str, object]] = {
    "meta-llama/Llama-2-7b-hf": {
        "skip": {"pytorch_model.bin.index.json"},
        "extra": ["model.safetensors.index.json"],
        "weights": ["1\tF16\tindex\t-"],
    },
    "mistralai/Mixtral-8x7B-v0.1": {
        "extra": ["generation_config.json", "tokenizer_config.json", "special_tokens_map.json"],
        # the real repo's HF-format safetensors and index arrived with "HF Transformers integration (#3)"
        "late_extra": {
            "4dd4b0f2d577d7b74152732d5543a92201481fe2": ["model.safetensors.index.json"]
        },
        "weights": ["2\tBF16\tindex\t-"],
    },
    "ibm-granite/granite-3.1-1b-a400m-instruct": {
        "extra": ["generation_config.json", "special_tokens_map.json"],
        # fp32 upload, then the real commit "Added bf16 tensors" (config torch_dtype float32 -> bfloat16)
        "weights": ["1\tF32\tsingle\t-", "3\tBF16\tsingle\t-"],
    },
    "deepseek-ai/DeepSeek-R1": {
        "extra": ["config.json", "generation_config.json"],
        # block-FP8 checkpoint (quantization_config); 163 shards like the real repo, split invented
        "weights": ["1\tBF16\teven:163\t-"],
    },
    "THUDM/chatglm2-6b": {"extra": []},
    "Qwen/Qwen-7B-Chat": {
        "extra": ["generation_config.json", "tokenizer_config.json"],
        "weights": ["1\tBF16\teven:8\t-"],
    },
    "bigscience/bloom-560m": {
        "extra": ["special_tokens_map.json"],
        # config.json arrives at seq 2 without `architectures`; bloom checkpoints are BloomModel state dicts
        "weights": ["2\tF16\tsingle\tBloomModel"],
    },
    "Qwen/Qwen3-Next-80B-A3B-Thinking": {
        "extra": ["config.json"],
        "no_history": "2025-09-22T00:00:00+00:00",
    },
    "Qwen/Qwen3-VL-32B-Instruct": {
        "extra": ["config.json"],
        "no_history": "2025-10-21T00:00:00+00:00",
        "weights": ["1\tBF16\teven:14\t-"],
    },
}

CHATGLM_CONFIG_V1 = '''"""Synthetic stand-in for THUDM/chatglm2-6b's configuration_chatglm.py (tracker demo).

The corpus does not hold THUDM's remote code; this file exists so that the demo has an
`auto_map` module whose source changes between revisions. It is not THUDM's code.
"""

from transformers import PretrainedConfig


class ChatGLMConfig(PretrainedConfig):
    model_type = "chatglm"

    def __init__(
        self,
        num_layers=28,
        padded_vocab_size=65024,
        hidden_size=4096,
        ffn_hidden_size=13696,
        kv_channels=128,
        num_attention_heads=32,
        seq_length=32768,
        multi_query_attention=True,
        multi_query_group_num=2,
        layernorm_epsilon=1e-5,
        **kwargs,
    ):
        self.num_layers = num_layers
        self.vocab_size = padded_vocab_size
        self.padded_vocab_size = padded_vocab_size
        self.hidden_size = hidden_size
        self.ffn_hidden_size = ffn_hidden_size
        self.kv_channels = kv_channels
        self.num_attention_heads = num_attention_heads
        self.seq_length = seq_length
        self.multi_query_attention = multi_query_attention
        self.multi_query_group_num = multi_query_group_num
        self.layernorm_epsilon = layernorm_epsilon
        super().__init__(**kwargs)
'''

CHATGLM_CONFIG_V2 = CHATGLM_CONFIG_V1.replace(
    "        layernorm_epsilon=1e-5,\n        **kwargs,",
    "        layernorm_epsilon=1e-5,\n        rope_ratio=1,\n        **kwargs,",
).replace(
    "        self.layernorm_epsilon = layernorm_epsilon\n",
    "        self.layernorm_epsilon = layernorm_epsilon\n        self.rope_ratio = rope_ratio\n",
)


def readme(front: bytes, repo: str, extra: str = "") -> bytes:
    body = (
        f"\n# {repo.split('/')[1]}\n\n"
        f"Replica of the Hugging Face repo `{repo}` for the tracker demo. Only the YAML front matter\n"
        "above is the publisher's; this body is synthetic (the corpus keeps front matter only).\n"
    )
    return front + body.encode() + extra.encode()


def load_history(name: str) -> list[dict[str, str]]:
    path = CORPUS / "histories" / name / "HISTORY.tsv"
    if not path.is_file():
        return []
    rows = []
    for line in path.read_text().splitlines():
        nn, sha, date, author, subject, file = line.split("\t")
        rows.append(
            {"nn": nn, "sha": sha, "date": date, "author": author, "subject": subject, "path": file}
        )
    return rows


def main() -> None:
    out_root = HERE / "repos"
    shutil.rmtree(out_root, ignore_errors=True)
    for repo, spec in REPOS.items():
        name = repo.replace("/", "__")
        src_models = CORPUS / "models" / name
        out = out_root / name
        out.mkdir(parents=True)
        skip = spec.get("skip", set())
        hist = [r for r in load_history(name) if r["path"] not in skip]  # type: ignore[operator]
        rows: list[dict[str, str]] = []
        commits: dict[str, tuple[datetime, str, str, str]] = {}
        for r in hist:
            commits[r["sha"]] = (
                datetime.fromisoformat(r["date"]),
                r["date"],
                r["author"],
                r["subject"],
            )
        if not commits:
            date = str(spec["no_history"])
            commits["synthetic-1"] = (
                datetime.fromisoformat(date),
                date,
                SYN_AUTHOR,
                "[synthetic] Add the corpus files (no Hub history available for this repo; date approximate)",
            )
        order = sorted(commits, key=lambda s: commits[s][0])
        seq_of = {sha: i + 1 for i, sha in enumerate(order)}

        def add(seq: int, sha: str, path: str, local: str | None, synthetic: str) -> None:
            _, date, author, msg = commits[sha]
            rows.append(
                {
                    "seq": str(seq),
                    "source_commit": sha,
                    "date": date,
                    "author": author,
                    "message": msg,
                    "path": path,
                    "local_file": local or "-",
                    "synthetic": synthetic,
                }
            )

        first = order[0]
        for r in hist:
            local = f"{r['nn']}_{r['sha'][:8]}_{r['path']}"
            shutil.copyfile(CORPUS / "histories" / name / local, out / local)
            add(seq_of[r["sha"]], r["sha"], r["path"], local, "no")
        for f in [".gitattributes", "README.md", *spec.get("extra", [])]:  # type: ignore[misc]
            if f == ".gitattributes":
                local = "gitattributes"
                from tracker.replica.repos import HUB_GITATTRIBUTES

                (out / local).write_bytes(HUB_GITATTRIBUTES)
                add(1, first, f, local, "generated")
            elif f == "README.md":
                fm = src_models / "README.frontmatter.md"
                front = fm.read_bytes() if fm.is_file() else b""
                local = "README.0.md"
                (out / local).write_bytes(readme(front, repo))
                add(
                    1, first, f, local, "front-matter-real-body-synthetic" if front else "synthetic"
                )
            else:
                local = f"base_{f}"
                shutil.copyfile(src_models / f, out / local)
                add(1, first, f, local, "added-at-first-commit")
        for sha, files in spec.get("late_extra", {}).items():  # type: ignore[attr-defined]
            for f in files:
                local = f"base_{f}"
                shutil.copyfile(src_models / f, out / local)
                add(seq_of[sha], sha, f, local, "added-at-this-commit")
        next_seq = len(order) + 1

        def synthetic(date: str, msg: str, files: dict[str, bytes | None]) -> None:
            nonlocal next_seq
            sha = f"synthetic-{next_seq}"
            commits[sha] = (datetime.fromisoformat(date), date, SYN_AUTHOR, msg)
            for path, data in files.items():
                local = None
                if data is not None:
                    local = f"syn_{next_seq:02d}_{path.replace('/', '_')}"
                    (out / local).write_bytes(data)
                add(next_seq, sha, path, local, "yes")
            next_seq += 1

        if repo == "meta-llama/Llama-2-7b-hf":
            gen = (out / "05_6fdf2e60_generation_config.json").read_bytes()
            assert b'"eos_token_id": 2,' in gen
            synthetic(
                "2024-02-01T12:00:00+00:00",
                "[synthetic] generation_config.json: eos_token_id 2 -> 32000 (an eos change; no real history in the corpus has one)",
                {
                    "generation_config.json": gen.replace(
                        b'"eos_token_id": 2,', b'"eos_token_id": 32000,'
                    )
                },
            )
            front = (src_models / "README.frontmatter.md").read_bytes()
            synthetic(
                "2024-02-02T12:00:00+00:00",
                "[synthetic] README.md: edit the body only, front matter untouched (a README-only change)",
                {
                    "README.md": readme(
                        front, repo, "\nSee the tracker documentation for what this demo shows.\n"
                    )
                },
            )
            synthetic(
                "2024-02-03T12:00:00+00:00",
                "[synthetic] generation_config.json: revert eos_token_id to 2 (restores the bytes of revision 6fdf2e60; a revert)",
                {"generation_config.json": gen},
            )
        if repo == "mistralai/Mixtral-8x7B-v0.1":
            cfg = json.loads((out / "08_58301445_config.json").read_bytes())
            moved = {k: cfg[k] for k in reversed(list(cfg))}
            synthetic(
                "2024-01-10T12:00:00+00:00",
                "[synthetic] config.json: re-serialise with 4-space indent and reversed key order, same JSON value (a no-op change)",
                {"config.json": (json.dumps(moved, indent=4) + "\n").encode()},
            )
        if repo == "THUDM/chatglm2-6b":
            synthetic(
                "2023-08-01T12:00:00+00:00",
                "[synthetic] add configuration_chatglm.py named by auto_map (a stand-in: the corpus lacks THUDM's remote code)",
                {"configuration_chatglm.py": CHATGLM_CONFIG_V1.encode()},
            )
            synthetic(
                "2023-08-02T12:00:00+00:00",
                "[synthetic] configuration_chatglm.py: add a rope_ratio argument (a custom-code change)",
                {"configuration_chatglm.py": CHATGLM_CONFIG_V2.encode()},
            )
        if "weights" in spec:
            lines = ["seq\tdtype\tlayout\tarchitecture", *spec["weights"]]  # type: ignore[misc]
            (out / "WEIGHTS.tsv").write_text("\n".join(lines) + "\n")
        rows.sort(key=lambda r: (int(r["seq"]), r["path"]))
        with (out / "HISTORY.tsv").open("w", newline="") as fh:
            w = csv.DictWriter(fh, COLUMNS, delimiter="\t", lineterminator="\n")
            w.writeheader()
            w.writerows(rows)
        print(repo, len(order), "real/no-history commits,", next_seq - 1, "in all")


def write_sources() -> None:
    """Write tracker/demo_data/SOURCES.md: the provenance of every file under tracker/demo_data/repos/."""
    sources = {}
    for line in (CORPUS / "SOURCES.tsv").read_text().splitlines()[1:]:
        local, repo, path, commit, note = line.split("\t")
        sources[local] = (repo, path, commit, note)
    out = [
        "# Demo data sources",
        "",
        "Generated by `tracker/demo_data/assemble.py` from `../shared/corpus` (the corpus keeps publisher files",
        "byte-identical to their source blob; see its NOTES.md). Per repo: each file under",
        "`tracker/demo_data/repos/<org>__<name>/`, what it is, and where it came from. Columns of HISTORY.tsv:",
        "seq (replica commit number), source_commit (upstream commit, or `synthetic-N`), date, author,",
        "message, repo path, local file (`-` = delete), synthetic flag:",
        "",
        "- `no`: the real file version at the real commit (from `corpus/histories`).",
        "- `added-at-first-commit` / `added-at-this-commit`: a real file from `corpus/models` (its latest",
        "  known version) that has no history in the corpus, added at that commit; the upstream commit that",
        "  really introduced it is unknown.",
        "- `front-matter-real-body-synthetic`: README.md = the publisher's YAML front matter (verbatim) +",
        "  a short synthetic body (the corpus keeps front matter only). `synthetic`: no front matter known.",
        "- `generated`: `.gitattributes` with the Hub's default LFS lines for the replica's LFS patterns.",
        "- `yes`: a synthetic revision (message starts with `[synthetic]` and says what and why).",
        "",
        "Weights (`WEIGHTS.tsv`: seq, dtype of unquantized tensors, layout, architecture override; a block-FP8",
        "`quantization_config` makes the linears F8_E4M3 + F32 `weight_scale_inv`) are generated at build time by",
        "`tracker/replica/stgen.py`: safetensors headers with the tensor names of the architecture's",
        "standard HF state dict (or the real index's weight_map when the layout is `index`), shapes from the",
        "config.json in effect at that commit, data all zeros; stored as sparse LFS objects of the real size.",
        "Their sha256 oids are cached in `tracker/demo_data/lfs-oids.tsv` (sha256 of head, size, oid), computed by",
        "`python -m tracker.replica.demo --refresh-cache`; tests recompute the entries under 1.2 GB.",
        "Shard layouts other than `index` (`single`, `even:N`) are invented: the real repos' layouts are",
        "not in the corpus. DeepSeek-R1's tensors are those of DeepseekV3ForCausalLM with block-FP8",
        "linears (F8_E4M3 weight + F32 weight_scale_inv) and its MTP layer 61, 688.6 GB in 163 shards.",
        "No weights: Qwen3-Next-80B (its checkpoint naming, incl. the MTP module, could not be checked",
        "here) and chatglm2-6b (its real checkpoint is pickled .bin files, not safetensors).",
        "",
        "`deepseek_v3_config.json`: `corpus/models/deepseek-ai__DeepSeek-V3/config.json`",
        f"({' '.join(sources.get('models/deepseek-ai__DeepSeek-V3/config.json', ('?',) * 4)[:3])}), used by",
        "`build_sharded_repo` (a DeepSeek-V3-shaped 163-shard checkpoint with every dimension scaled down;",
        "the corpus has no DeepSeek-V3/R1 model.safetensors.index.json, so the index is generated).",
        "",
    ]
    for d in sorted((HERE / "repos").iterdir()):
        name = d.name
        out += [
            f"## {name.replace('__', '/', 1)}",
            "",
            "| local file | repo path | seq | provenance |",
            "|---|---|---|---|",
        ]
        rows = list(csv.DictReader((d / "HISTORY.tsv").open(), delimiter="\t"))
        for r in rows:
            local, flag = r["local_file"], r["synthetic"]
            if local == "-":
                prov = "deletion"
            elif flag == "no":
                key = f"histories/{name}/{local}"
                repo, path, commit, _ = sources[key]
                prov = f"`corpus/{key}` = `{path}` of {repo} @ {commit[:12]}"
            elif flag.startswith("added"):
                key = f"models/{name}/{r['path']}"
                repo, path, commit, _ = sources[key]
                prov = f"`corpus/{key}` = `{path}` of {repo} @ {commit[:12]} (added here; see flag)"
            elif flag == "front-matter-real-body-synthetic":
                key = f"models/{name}/README.frontmatter.md"
                repo, path, commit, _ = sources[key]
                prov = f"front matter: `corpus/{key}` ({path} of {repo} @ {commit[:12]}); body synthetic"
            elif flag == "generated":
                prov = "generated (Hub-style LFS attributes)"
            else:
                prov = f"synthetic: {r['message']}"
            out.append(f"| `{local}` | `{r['path']}` | {r['seq']} | {prov} |")
        if (d / "WEIGHTS.tsv").is_file():
            for w in csv.DictReader((d / "WEIGHTS.tsv").open(), delimiter="\t"):
                out.append(
                    f"| (generated) | `*.safetensors` | {w['seq']} | weights: {w['dtype']}, layout `{w['layout']}`"
                    + (f", architecture {w['architecture']}" if w["architecture"] != "-" else "")
                    + " |"
                )
        out.append("")
    (HERE / "SOURCES.md").write_text("\n".join(out))


if __name__ == "__main__":
    main()
    write_sources()
