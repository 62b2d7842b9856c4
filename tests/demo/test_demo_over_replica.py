"""The demo Hub as the real huggingface_hub client sees it through the replica server."""

from __future__ import annotations

from pathlib import Path

import pytest
from huggingface_hub import HfApi
from huggingface_hub.errors import GatedRepoError

from tracker.replica import Replica
from tracker.replica.demo import DEMO_DIR, DEMO_TOKEN, build_demo_hub, load_history

pytestmark = pytest.mark.replica


def test_demo_over_the_hub_client(tmp_path: Path) -> None:
    build_demo_hub(tmp_path, gated=True)
    with Replica(tmp_path) as hub:
        api = HfApi(endpoint=hub.url, token=False)
        rid = "ibm-granite/granite-3.1-1b-a400m-instruct"
        commits = api.list_repo_commits(rid)
        assert [c.title for c in commits] == [
            "Added bf16 tensors",
            "Updated chat template",
            "Model upload",
        ]
        assert commits[-1].authors == ["Matt Stallone"]
        first = api.get_safetensors_metadata(rid, revision=commits[-1].commit_id)
        last = api.get_safetensors_metadata(rid, revision=commits[0].commit_id)
        assert first.parameter_count == {"F32": 1_334_628_352}
        assert last.parameter_count == {"BF16": 1_334_628_352}
        mixtral = api.get_safetensors_metadata("mistralai/Mixtral-8x7B-v0.1")
        assert mixtral.parameter_count == {"BF16": 46_702_792_704}
        assert len(mixtral.files_metadata) == 19
        with pytest.raises(GatedRepoError):
            api.list_repo_commits("meta-llama/Llama-2-7b-hf")
        granted = HfApi(endpoint=hub.url, token=DEMO_TOKEN)
        rows = load_history(DEMO_DIR / "repos" / "meta-llama__Llama-2-7b-hf")
        assert len(granted.list_repo_commits("meta-llama/Llama-2-7b-hf")) == max(
            r.seq for r in rows
        )
