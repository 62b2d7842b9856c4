"""Remote code is tracked with its relative imports, and auto_map in processor configs counts too."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tracker.app import build
from tracker.ingest.snapshots import relative_imports
from tracker.replica import Replica
from tracker.replica.repos import commit, init_repo
from tracker.settings import load_settings


def test_relative_imports_resolve_within_the_repo() -> None:
    code = b"from .helper import f\nfrom . import utils, more\nfrom ..up import x\nimport os\nfrom transformers import PreTrainedModel\n"
    assert relative_imports("modeling_x.py", code) == {
        "helper.py",
        "helper/__init__.py",
        "utils.py",
        "more.py",
    }
    assert relative_imports("pkg/modeling_x.py", b"from ..top import y\nfrom .sib import z\n") == {
        "top.py",
        "top/__init__.py",
        "pkg/sib.py",
        "pkg/sib/__init__.py",
    }
    assert relative_imports("modeling_x.py", b"def broken(:\n") == set()  # fmt: skip


@pytest.mark.replica
def test_a_change_in_an_imported_helper_is_a_critical_advisory(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "hub", "acme/custom")
    config = {"model_type": "x", "auto_map": {"AutoModel": "modeling_x.XModel"}}
    pre = {"auto_map": {"AutoImageProcessor": "image_processing_x.XProcessor"}}
    day = datetime(2025, 1, 1, tzinfo=UTC)
    commit(repo, {
        "config.json": json.dumps(config).encode(),
        "preprocessor_config.json": json.dumps(pre).encode(),
        "modeling_x.py": b"from .helper_x import act\nclass XModel: pass\n",
        "helper_x.py": b"def act(x):\n    return x\n",
        "image_processing_x.py": b"class XProcessor: pass\n",
        "unrelated.py": b"print('not loaded by transformers')\n",
    }, "upload", date=day)  # fmt: skip
    helper = commit(repo, {"helper_x.py": b"import os\ndef act(x):\n    return os.system(x)\n"},
                    "tweak helper", date=day.replace(day=2))  # fmt: skip
    proc = commit(repo, {"image_processing_x.py": b"import subprocess\nclass XProcessor: pass\n"},
                  "tweak processor", date=day.replace(day=3))  # fmt: skip
    other = commit(repo, {"unrelated.py": b"print('still not loaded')\n"}, "script",
                   date=day.replace(day=4))  # fmt: skip
    (tmp_path / "w.yaml").write_text("repos:\n  - id: acme/custom\n")
    with Replica(tmp_path / "hub") as hub:
        app = build(load_settings(state_dir=tmp_path / "s", watchlist=tmp_path / "w.yaml",
                                  hf_endpoint=hub.url))  # fmt: skip
        try:
            app.pipeline.run_cycle()
            by_sha = {a.introduced: a for a in app.advisories.list_advisories()}
            assert by_sha[helper].severity.value == "critical"
            assert "helper_x.py" in by_sha[helper].record["summary"]
            assert by_sha[proc].severity.value == "critical"
            assert other not in by_sha  # a .py that nothing loads is not tracked
        finally:
            app.close()


def test_a_remote_code_file_over_the_ast_bound_is_read_token_by_token() -> None:
    """The poller parses remote code outside the analysis budget: a file over AST_MAX_BYTES
    (60,000 tuple assignments cost ~296 MiB as a tree, bench/RESULTS.md) is read by `tokenize`
    in the memory of one line, with the answer `ast` gives."""
    import tracemalloc

    from tracker.ingest.snapshots import AST_MAX_BYTES, _relative_imports_ast

    code = (
        b'"""from .not_an_import import x"""\nfrom .sib import a\n'
        + b"x = (1, 2)\n" * 95_000
        + b"def f():\n    from ..top.pkg import (b,\n        c as d)\n    from . import e, g\n"
    )
    assert len(code) > AST_MAX_BYTES
    tracemalloc.start()
    try:
        found = relative_imports("pkg/modeling_x.py", code)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert found == _relative_imports_ast("pkg/modeling_x.py", code) == {
        "pkg/sib.py", "pkg/sib/__init__.py", "top/pkg.py", "top/pkg/__init__.py",
        "pkg/e.py", "pkg/g.py",
    }  # fmt: skip
    assert peak < 4 * 1024 * 1024, peak
