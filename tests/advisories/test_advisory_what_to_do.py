""" "What to do" follows the advisory's state and pins only revisions that load and lack the
change (issue 24, parts 4 and 5), through the installed `tracker` over a repo the Hub replica
serves: a regression introduced right after a revision without config.json pins the newest
earlier revision that has one; once fixed it says to upgrade to the fixing revision (never "stay
on the previous revision until a later revision fixes this"); reopened by a force-push that
drops the fix, it pins again.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tracker.replica import Replica
from tracker.replica.repos import commit, init_repo, set_ref
from tracker.replica.stgen import encode_header

pytestmark = pytest.mark.replica

TRACKER = Path(sys.executable).with_name("tracker")
CONFIG = Path(__file__).parents[1] / "data" / "configs" / "Qwen__Qwen2.5-1.5B.json"
RID = "acme/noconfig"
DAY = datetime(2025, 3, 1, 9, 30, tzinfo=UTC)


WEIGHTS = encode_header([], {"format": "pt"})[0]
"""A model.safetensors with no tensors: what `tracker.advisories.loading` asks of a revision that
loads is that the weights file is in the tree."""


def _gen(eos: int) -> bytes:
    return json.dumps({"bos_token_id": 151643, "eos_token_id": eos}).encode()


def _advice(record: dict[str, Any]) -> str:
    return str(record["details"]).split("## What to do\n\n", 1)[1].split("\n## ", 1)[0].strip()


def test_advice_pins_a_revision_that_loads_and_follows_the_state(tmp_path: Path) -> None:
    hub = tmp_path / "hub"
    repo = init_repo(hub, RID)
    config = CONFIG.read_bytes()
    vocab = json.loads(config)["vocab_size"]
    c0 = commit(repo, {"config.json": config, "generation_config.json": _gen(151643),
                       "model.safetensors": WEIGHTS}, "upload", date=DAY)  # fmt: skip
    c1 = commit(repo, {"config.json": None}, "Remove config", date=DAY.replace(day=2))
    c2 = commit(repo, {"config.json": config, "generation_config.json": _gen(vocab)}, "Set eos",
                date=DAY.replace(day=3))  # fmt: skip
    c3 = commit(repo, {"generation_config.json": _gen(151643)}, "Revert eos",
                date=DAY.replace(day=4))  # fmt: skip
    (tmp_path / "watchlist.yaml").write_text(f"repos:\n  - id: {RID}\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACKER_", "HF_"))}

    def tracker(*args: str) -> Any:
        done = subprocess.run([str(TRACKER), *args], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=300)  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
        return json.loads(done.stdout) if "--json" in args else done.stdout

    def eos_advisory() -> dict[str, Any]:
        listed = tracker("advisories", "list", "--json")
        (row,) = [a for a in listed if a["group"] == "special_tokens"]
        record: dict[str, Any] = tracker("advisories", "show", row["id"], "--json")
        return record

    with Replica(hub) as replica:
        env["TRACKER_HF_ENDPOINT"] = replica.url
        # up to c2 only: the regression is open
        set_ref(repo, "main", c2)
        tracker("poll", "--once")
        record = eos_advisory()
        assert record["database_specific"]["previous"] == c1
        advice = _advice(record)
        assert advice.startswith(
            f"The previous revision `{c1[:12]}` has no readable config.json, so it cannot be "
            f"loaded; `{c0[:12]}` is the newest earlier revision that can, and none of these "
            "changes holds there. Stay on the newest earlier revision that loads: pin "
            f'`{c0[:12]}` (`revision="{c0}"` in `from_pretrained`) until a later revision fixes '
            "this"
        ), advice
        assert c1[:12] not in advice.split("Stay on", 1)[1]
        # c3 reverts the eos id: fixed, and the advice says to take the fix
        set_ref(repo, "main", c3)
        tracker("poll", "--once")
        record = eos_advisory()
        assert record["database_specific"]["fixed"] == c3
        advice = _advice(record)
        assert advice.startswith(
            f"Upgrade to the fixing revision [`{c3[:12]}`](https://huggingface.co/{RID}/commit/"
            f'{c3}) (`revision="{c3}"` in `from_pretrained`) or later'
        ), advice
        assert "until a later revision fixes this" not in record["details"]
        assert "Stay on" not in record["details"]
        # a force-push drops the fix: open again, and the advice pins c0 again
        set_ref(repo, "main", c2)
        commit(repo, {"README.md": b"---\nlicense: mit\n---\n"}, "card", date=DAY.replace(day=5))
        tracker("poll", "--once")
        record = eos_advisory()
        assert "fixed" not in record["database_specific"]
        assert "open_advice" not in record["database_specific"]
        assert _advice(record).startswith(f"The previous revision `{c1[:12]}` has no readable")
        assert f'pin `{c0[:12]}` (`revision="{c0}"`' in _advice(record)


def test_a_revision_with_a_config_but_no_weights_is_never_pinned(tmp_path: Path) -> None:
    """Mixtral's first release had a config.json and its weights in Mistral's own format only:
    `from_pretrained` cannot load it, so advice on the next revision pins neither it nor a
    revision whose index names shards its tree lacks, and says why (issue 24, part 4)."""
    hub = tmp_path / "hub"
    repo = init_repo(hub, RID)
    config = CONFIG.read_bytes()
    vocab = json.loads(config)["vocab_size"]
    index = json.dumps({"metadata": {}, "weight_map": {"a": "model-00001-of-00002.safetensors",
                        "b": "model-00002-of-00002.safetensors"}}).encode()  # fmt: skip
    c0 = commit(repo, {"config.json": config, "generation_config.json": _gen(151643),
                       "consolidated.00.pt": b"not HF weights"}, "Release", date=DAY)  # fmt: skip
    c1 = commit(repo, {"model.safetensors.index.json": index,
                       "model-00001-of-00002.safetensors": WEIGHTS}, "half an upload",
                date=DAY.replace(day=2))  # fmt: skip
    c2 = commit(repo, {"generation_config.json": _gen(vocab)}, "Set eos", date=DAY.replace(day=3))
    (tmp_path / "watchlist.yaml").write_text(f"repos:\n  - id: {RID}\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACKER_", "HF_"))}
    with Replica(hub) as replica:
        env["TRACKER_HF_ENDPOINT"] = replica.url

        def tracker(*args: str) -> Any:
            done = subprocess.run([str(TRACKER), *args], cwd=tmp_path, env=env,
                                  capture_output=True, text=True, timeout=300)  # fmt: skip
            assert done.returncode == 0, done.stderr[-2000:]
            return json.loads(done.stdout)

        subprocess.run([str(TRACKER), "poll", "--once"], cwd=tmp_path, env=env, check=True,
                       capture_output=True, timeout=300)  # fmt: skip
        listed = tracker("advisories", "list", "--json")
        (row,) = [a for a in listed if a["group"] == "special_tokens"]
        record = tracker("advisories", "show", row["id"], "--json")
    assert record["affected"][0]["ranges"][0]["events"] == [{"introduced": c2}]
    advice = _advice(record)
    assert advice == (
        "No revision tracker ingested before this one both loads (a readable config.json and the "
        f"weights `from_pretrained` reads for it; the previous revision `{c1[:12]}` has "
        "a model.safetensors.index.json naming 1 shard its tree lacks "
        "(`model-00002-of-00002.safetensors`)) and lacks these changes, so there is none to pin. "
        f"To take the change, upgrade to `{c2[:12]}` or later once you check stop and pad "
        "handling in your generation and training code."
    ), advice
    assert c0[:12] not in advice
