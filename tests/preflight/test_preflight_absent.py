"""A remote-code module the revision does not hold: named by `auto_map`, or imported relatively.

transformers fetches every `auto_map` module and every relatively imported module from the repo
(`get_cached_module_file`), and fails without it: such a revision cannot import on any version.
It was reported importable everywhere (no module read meant "no remote code").
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tracker.preflight.delta import preflight_delta
from tracker.preflight.report import Preflight, RemoteCode, run_preflight
from tracker.preflight.settings import PreflightSettings
from tracker.preflight.wheels import SymbolTables
from tracker.shared.domain import ChangeKind

from .conftest import VERSIONS
from .test_preflight_symbols import CONFIG, CONFIGURATION, _run

DEEPSEEK = {
    **CONFIG,
    "auto_map": {
        "AutoConfig": "configuration_deepseek.DeepseekV3Config",
        "AutoModel": "modeling_deepseek.DeepseekV3Model",
    },
}
HELPED = b"from transformers.modeling_utils import PreTrainedModel\nfrom .modeling_helpers import thing\n\n\nclass XForCausalLM(PreTrainedModel):\n    pass\n"


def _files(config: dict[str, object], **modules: bytes) -> dict[str, bytes]:
    return {"config.json": json.dumps(config).encode(), **modules}


def _preflight(files: dict[str, bytes], tables: dict[str, object]) -> Preflight:
    return run_preflight(
        files=files,
        headers={},
        tree=(),
        tables=tables,
        settings=PreflightSettings(),  # type: ignore[arg-type]
    )


@pytest.mark.slow
def test_absent_auto_map_and_relative_modules_cannot_import_anywhere(symbol_cache: Path) -> None:
    tables = {v: SymbolTables(symbol_cache).get(v) for v in VERSIONS}
    none = _preflight(_files(DEEPSEEK), tables).remote_code
    assert none.modules == ()
    assert none.absent == ("configuration_deepseek.py", "modeling_deepseek.py")
    assert [none.importable(v) for v in VERSIONS] == [False, False, False]
    assert [(v["version"], v["importable"], v["absent"]) for v in none.versions] == [
        (v, False, ["configuration_deepseek.py", "modeling_deepseek.py"]) for v in VERSIONS
    ]
    assert RemoteCode.from_json(json.loads(json.dumps(none.to_json()))) == none
    # A preflight stored before `absent` was recorded reads it back from its problems.
    old = {k: v for k, v in none.to_json().items() if k != "absent"}
    assert RemoteCode.from_json(old).absent == none.absent

    helped = _files(CONFIG, **{"modeling_x.py": HELPED, "configuration_x.py": CONFIGURATION})
    rc = _preflight(helped, tables).remote_code
    assert rc.modules == ("configuration_x.py", "modeling_x.py")
    assert rc.absent == ("modeling_helpers.py",)
    assert rc.problems == (
        "modeling_helpers.py is imported by modeling_x.py but not in this revision",
    )
    assert [rc.importable(v) for v in VERSIONS] == [False, False, False]

    # Importable before, a module gone after: a BROKEN change per version, naming the file.
    whole = {**helped, "modeling_helpers.py": b"thing = 1\n"}
    before = _preflight(whole, tables)
    assert [before.remote_code.importable(v) for v in VERSIONS] == [True, True, True]
    settings = {"transformers": list(VERSIONS)}
    after = _preflight(helped, tables)
    changes = preflight_delta(
        Preflight(**{**before.__dict__, "settings": settings}),
        Preflight(**{**after.__dict__, "settings": settings}),
    )
    assert [(c.kind, c.key, c.summary) for c in changes] == [
        (
            ChangeKind.BROKEN,
            f"preflight.remote_code.transformers-{v}",
            f"remote code no longer imports on transformers {v}: "
            "cannot import: modeling_helpers.py is not in this revision",
        )
        for v in VERSIONS
    ]


@pytest.mark.slow
def test_the_cli_says_cannot_import_in_text_and_json(symbol_cache: Path, tmp_path: Path) -> None:
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(DEEPSEEK))
    env = dict(os.environ)
    env["TRACKER_PREFLIGHT_CACHE_DIR"] = str(symbol_cache)
    env["TRACKER_PREFLIGHT_INDEX_URL"] = (tmp_path / "no-index").as_uri()
    versions = [a for v in VERSIONS for a in ("--transformers", v)]
    done = _run("preflight", str(model), *versions, env=env)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "remote code: none (no auto_map module)" not in lines
    assert "remote code: no module of it in this revision" in lines
    assert "  problem: modeling_deepseek.py is named by auto_map but not in this revision" in lines
    for v in VERSIONS:
        i = lines.index(f"  transformers {v}: does not import")
        assert lines[i + 1 : i + 3] == [
            "    cannot import: configuration_deepseek.py is not in this revision",
            "    cannot import: modeling_deepseek.py is not in this revision",
        ]
    data = json.loads(_run("preflight", str(model), *versions, "--json", env=env).stdout)
    rc = data["remote_code"]
    assert rc["absent"] == ["configuration_deepseek.py", "modeling_deepseek.py"]
    assert [v["importable"] for v in rc["versions"]] == [False, False, False]
