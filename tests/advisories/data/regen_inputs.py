"""Regenerate `inputs.json`: real diff and estimate outputs over real corpus histories, frozen for the tests.

Run by hand from the repo root (`.venv/bin/python tests/advisories/data/regen_inputs.py`) with
../shared beside the checkout; review the diff of inputs.json. Freezing keeps the advisory
golden files independent of later changes in the diff and estimate stages.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from tracker.diff import diff_snapshots
from tracker.estimate import estimate, estimate_delta, parse_config
from tracker.shared.domain import RepoId, Sha, Snapshot, TreeEntry

HERE = Path(__file__).parent
CORPUS = HERE.parents[2].parent / "shared" / "corpus" / "histories"


def _history(name: str, file: str) -> list[tuple[str, bytes]]:
    rows = [
        line.split("\t")
        for line in (CORPUS / name / "HISTORY.tsv").read_text().splitlines()
        if line
    ]
    out = []
    for nn, sha, *_, which in rows:
        if which != file:
            continue
        [path] = (CORPUS / name).glob(f"{nn}_{sha[:8]}_{file}")
        out.append((sha, path.read_bytes()))
    return out


def _snap(repo: str, sha: str, file: str, data: bytes) -> Snapshot:
    entry = TreeEntry(file, hashlib.sha1(data).hexdigest(), len(data))
    return Snapshot(RepoId(repo), Sha(sha), (entry,), {file: data})


def _changes(repo: str, file: str, history: list[tuple[str, bytes]]) -> list[dict[str, object]]:
    revs: list[dict[str, object]] = []
    prev = None
    for sha, data in history:
        snap = _snap(repo, sha, file, data)
        changes = diff_snapshots(prev, snap)
        revs.append(
            {
                "sha": sha,
                "previous": prev.sha if prev else None,
                "changes": [c.to_json() for c in changes],
            }
        )
        prev = snap
    return revs


def main() -> None:
    mixtral = _history("mistralai__Mixtral-8x7B-v0.1", "config.json")
    reports = [estimate(parse_config(data)).to_json() for _, data in mixtral]
    revs = _changes("mistralai/Mixtral-8x7B-v0.1", "config.json", mixtral)
    for i, rev in enumerate(revs):
        rev["estimate"] = reports[i]
        if i:
            rev["changes"] += [
                c.to_json()
                for c in estimate_delta(
                    estimate(parse_config(mixtral[i - 1][1])), estimate(parse_config(mixtral[i][1]))
                )
            ]
    out = {
        "mistralai/Mixtral-8x7B-v0.1": revs,
        "ibm-granite/granite-3.1-1b-a400m-instruct": _changes(
            "ibm-granite/granite-3.1-1b-a400m-instruct",
            "tokenizer_config.json",
            _history("ibm-granite__granite-3.1-1b-a400m-instruct", "tokenizer_config.json"),
        ),
        "deepseek-ai/DeepSeek-R1": _changes(
            "deepseek-ai/DeepSeek-R1",
            "tokenizer_config.json",
            _history("deepseek-ai__DeepSeek-R1", "tokenizer_config.json"),
        ),
    }
    (HERE / "inputs.json").write_text(
        json.dumps(out, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
    )


if __name__ == "__main__":
    main()
