"""Hub-shaped JSON bodies built from a replica git repo: model info, refs, commits, tree entries.

Shapes follow /work/shared/HUB-PROTOCOL.md §3-§6 (siblings use `blobId` and `lfs.sha256`; tree
entries use `oid` and `lfs.oid`; dates are `...000Z`; `xetHash` is never emitted, §6 "Xet trap").
"""

from __future__ import annotations

import hashlib
import html
import json
import math
import struct
from datetime import UTC, datetime
from typing import Any

import yaml

from tracker.replica import picklescan
from tracker.replica.gitread import CommitRecord, GitReadError, GitRepo, Ref, TreeItem

SAFETENSORS_HEADER_MAX = 25_000_000
"""The client refuses larger safetensors headers (HUB-PROTOCOL.md §9); so do we."""

MODEL_INFO_FIELDS = (
    "author", "cardData", "config", "createdAt", "disabled", "downloads", "downloadsAllTime",
    "gated", "lastModified", "library_name", "likes", "model-index", "pipeline_tag", "private",
    "safetensors", "securityRepoStatus", "sha", "siblings", "spaces", "tags", "transformersInfo",
    "trendingScore", "usedStorage", "widgetData", "inference", "baseModels", "childrenModelCount",
)  # fmt: skip
"""Properties `expand=` may name (the Hub answers 400 for others)."""

_TOKENIZER_KEYS = (
    "bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token",
    "chat_template", "use_default_system_prompt",
)  # fmt: skip
_TASKS = (
    ("ForCausalLM", "AutoModelForCausalLM", "text-generation"),
    ("LMHeadModel", "AutoModelForCausalLM", "text-generation"),
    ("ForSequenceClassification", "AutoModelForSequenceClassification", "text-classification"),
    ("ForTokenClassification", "AutoModelForTokenClassification", "token-classification"),
    ("ForQuestionAnswering", "AutoModelForQuestionAnswering", "question-answering"),
    ("ForMaskedLM", "AutoModelForMaskedLM", "fill-mask"),
    ("ForSpeechSeq2Seq", "AutoModelForSpeechSeq2Seq", "automatic-speech-recognition"),
    ("ForConditionalGeneration", "AutoModelForSeq2SeqLM", "text2text-generation"),
)


def iso(timestamp: int) -> str:
    """Unix seconds as the Hub's `YYYY-MM-DDTHH:MM:SS.000Z` (the only form the client parses)."""
    return datetime.fromtimestamp(timestamp, UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")


def fake_object_id(repo_id: str) -> str:
    """A stable 24-hex stand-in for the Hub's Mongo `_id`."""
    return hashlib.sha1(repo_id.encode()).hexdigest()[:24]


def refs_json(refs: list[Ref], include_prs: bool) -> dict[str, Any]:
    """The `/refs` body: branches, converts, tags (and pullRequests when asked)."""
    out: dict[str, list[dict[str, str]]] = {"branches": [], "converts": [], "tags": []}
    if include_prs:
        out["pullRequests"] = []
    for ref in refs:
        for prefix, key in (
            ("refs/heads/", "branches"),
            ("refs/tags/", "tags"),
            ("refs/convert/", "converts"),
        ):
            if ref.ref.startswith(prefix):
                name = ref.ref[len(prefix) :]
                out[key].append({"name": name, "ref": ref.ref, "targetCommit": ref.target})
        if include_prs and ref.ref.startswith("refs/pr/"):
            out["pullRequests"].append(
                {"name": ref.ref, "ref": ref.ref, "targetCommit": ref.target}
            )
    return out


def commit_json(commit: CommitRecord, formatted: bool) -> dict[str, Any]:
    """One `/commits` item; `formatted` adds the HTML-escaped title and message."""
    item: dict[str, Any] = {
        "id": commit.sha,
        "title": commit.title,
        "message": commit.message,
        "date": iso(commit.timestamp),
        "authors": [{"user": commit.author_name, "avatar": None}],
    }
    if formatted:
        item["formatted"] = {
            "title": html.escape(commit.title),
            "message": html.escape(commit.message),
        }
    return item


def tree_entry(repo: GitRepo, sha: str, item: TreeItem, expand: bool) -> dict[str, Any]:
    """One tree / paths-info entry; with `expand`, `lastCommit` and (files) `securityFileStatus`."""
    entry: dict[str, Any]
    if item.is_dir:
        entry = {"type": "directory", "oid": item.oid, "size": 0, "path": item.path}
    else:
        entry = {"type": "file", "oid": item.oid, "size": item.size, "path": item.path}
        if item.lfs is not None:
            entry["lfs"] = {
                "oid": item.lfs.oid,
                "size": item.lfs.size,
                "pointerSize": item.lfs.pointer_size,
            }
    if expand:
        last = repo.last_commits(sha).get(item.path)
        if last is not None:
            entry["lastCommit"] = {"id": last.sha, "title": last.title, "date": iso(last.timestamp)}
        if not item.is_dir:
            entry["securityFileStatus"] = security_status(repo, item)
    return entry


def security_status(repo: GitRepo, item: TreeItem) -> dict[str, Any]:
    """The Hub-shaped `securityFileStatus` of a file (pickles are really scanned, statically)."""
    if not picklescan.is_pickle_path(item.path):
        return picklescan.file_status(None, pickle=False)
    if item.lfs is None:
        blob = item.oid
        result = repo.memo(("pickle", blob), lambda: picklescan.scan(repo.read_blob(blob)))
        return picklescan.file_status(result, pickle=True)
    path = repo.lfs_object(item.lfs.oid)
    result = repo.memo(
        ("pickle", item.lfs.oid), lambda: picklescan.scan(path) if path.exists() else None
    )
    return picklescan.file_status(result, pickle=True)


def read_head(repo: GitRepo, item: TreeItem, length: int, offset: int = 0) -> bytes:
    """Up to `length` bytes of a file's content from `offset` (LFS object or git blob)."""
    if item.lfs is None:
        return repo.read_blob(item.oid)[offset : offset + length]
    path = repo.lfs_object(item.lfs.oid)
    with path.open("rb") as handle:
        handle.seek(offset)
        return handle.read(length)


def safetensors_header(repo: GitRepo, item: TreeItem) -> dict[str, Any] | None:
    """The parsed JSON header of a .safetensors file, or None when absent or malformed (cached)."""

    def compute() -> dict[str, Any] | None:
        try:
            prefix = read_head(repo, item, 8)
            if len(prefix) < 8:
                return None
            (length,) = struct.unpack("<Q", prefix)
            if length > SAFETENSORS_HEADER_MAX or length + 8 > item.size:
                return None
            header = json.loads(read_head(repo, item, length, 8))
        except (OSError, GitReadError, ValueError):
            return None
        return header if isinstance(header, dict) else None

    return repo.memo(("st", item.lfs.oid if item.lfs else item.oid), compute)


def safetensors_totals(repo: GitRepo, items: list[TreeItem]) -> dict[str, Any] | None:
    """`{"parameters": {dtype: n}, "total": n}` over every readable .safetensors file, or None."""
    params: dict[str, int] = {}
    seen = False
    for item in items:
        if item.is_dir or not item.path.endswith(".safetensors"):
            continue
        header = safetensors_header(repo, item)
        if header is None:
            continue
        seen = True
        for name, info in header.items():
            if name == "__metadata__" or not isinstance(info, dict):
                continue
            shape = info.get("shape")
            dtype = info.get("dtype")
            if not isinstance(dtype, str) or not isinstance(shape, list):
                continue
            if not all(isinstance(d, int) and d >= 0 for d in shape):
                continue
            params[dtype] = params.get(dtype, 0) + math.prod(shape)
    if not seen:
        return None
    return {"parameters": dict(sorted(params.items())), "total": sum(params.values())}


def _json_file(repo: GitRepo, by_path: dict[str, TreeItem], path: str) -> dict[str, Any]:
    item = by_path.get(path)
    if item is None or item.lfs is not None or item.size > 16 * 1024 * 1024:
        return {}
    try:
        data = json.loads(repo.read_blob(item.oid))
    except (ValueError, GitReadError):
        return {}
    return data if isinstance(data, dict) else {}


def card_data(text: bytes) -> dict[str, Any] | None:
    """The YAML front matter of a README.md as a dict (None when absent or not a mapping)."""
    body = text.decode("utf-8", errors="replace").replace("\r\n", "\n")
    if not body.startswith("---\n"):
        return None
    end = body.find("\n---", 4)
    if end < 0:
        return None
    try:
        data = yaml.safe_load(body[4:end])
    except yaml.YAMLError:
        return None
    if not isinstance(data, dict):
        return None
    result: dict[str, Any] = json.loads(json.dumps(data, default=str))  # dates become strings
    return result


def model_info_json(
    repo: GitRepo,
    repo_id: str,
    sha: str,
    settings: dict[str, Any],
    *,
    blobs: bool,
    security: bool,
    expand: list[str] | None,
) -> dict[str, Any]:
    """The `/api/models/{repo}[/revision/{rev}]` body at commit `sha`.

    `settings` is the repo's `.replica.json` (private/gated). With `expand`, only `_id`, `id` and the
    named properties are returned (callers validate names against MODEL_INFO_FIELDS).
    """
    items = repo.tree(sha)
    files = [i for i in items if not i.is_dir]
    by_path = {i.path: i for i in files}
    history = repo.commits(sha)
    readme = by_path.get("README.md")
    card = card_data(repo.read_blob(readme.oid)) if readme and readme.lfs is None else None
    config_json = _json_file(repo, by_path, "config.json")
    tok_json = _json_file(repo, by_path, "tokenizer_config.json")

    config: dict[str, Any] = {}
    for key in ("architectures", "model_type", "auto_map", "quantization_config"):
        if key in config_json:
            config[key] = config_json[key]
    tok = {k: tok_json[k] for k in _TOKENIZER_KEYS if k in tok_json}
    if tok:
        config["tokenizer_config"] = tok

    library = (card or {}).get("library_name") or ("transformers" if config_json else None)
    pipeline = (card or {}).get("pipeline_tag")
    transformers_info = None
    architectures = config_json.get("architectures")
    if isinstance(architectures, list) and architectures and isinstance(architectures[0], str):
        for suffix, auto_model, task in _TASKS:
            if architectures[0].endswith(suffix):
                pipeline = pipeline or task
                transformers_info = {"auto_model": auto_model, "pipeline_tag": pipeline}
                if tok_json:
                    transformers_info["processor"] = "AutoTokenizer"
                break

    tags: list[str] = []
    card_tags = (card or {}).get("tags")
    for tag in [
        library,
        *(card_tags if isinstance(card_tags, list) else []),
        "safetensors" if any(p.endswith(".safetensors") for p in by_path) else None,
        config.get("model_type"),
        pipeline,
        f"license:{card['license']}" if card and isinstance(card.get("license"), str) else None,
    ]:
        if isinstance(tag, str) and tag and tag not in tags:
            tags.append(tag)

    siblings: list[dict[str, Any]] = []
    for item in files:
        sibling: dict[str, Any] = {"rfilename": item.path}
        if blobs:
            sibling["blobId"] = item.oid
            sibling["size"] = item.size
            if item.lfs is not None:
                sibling["lfs"] = {
                    "sha256": item.lfs.oid,
                    "size": item.lfs.size,
                    "pointerSize": item.lfs.pointer_size,
                }
        siblings.append(sibling)

    gated = settings.get("gated", False)
    info: dict[str, Any] = {
        "_id": fake_object_id(repo_id),
        "id": repo_id,
        "modelId": repo_id,
        "author": repo_id.split("/")[0],
        "sha": sha,
        "lastModified": iso(history[0].timestamp),
        "createdAt": iso(history[-1].timestamp),
        "private": bool(settings.get("private", False)),
        "gated": gated if gated in ("auto", "manual") else False,
        "disabled": False,
        "downloads": 0,
        "likes": 0,
        "tags": tags,
        "library_name": library,
        "pipeline_tag": pipeline,
        "cardData": card,
        "config": config or None,
        "transformersInfo": transformers_info,
        "siblings": siblings,
        "safetensors": safetensors_totals(repo, files),
        "spaces": [],
        "usedStorage": sum(i.size for i in files),
    }
    if security or (expand and "securityRepoStatus" in expand):
        statuses = {i.path: security_status(repo, i) for i in files}
        info["securityRepoStatus"] = {
            "scansDone": True,
            "filesWithIssues": [
                {"path": p, "level": s["status"]}
                for p, s in statuses.items()
                if s["status"] != "safe"
            ],
        }
    if expand is not None:
        fields = {k: info[k] for k in expand if info.get(k) is not None}
        return {"_id": info["_id"], "id": repo_id, **fields}
    return {k: v for k, v in info.items() if v is not None}
