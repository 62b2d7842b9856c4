"""Symbol tables by AST and the remote-code check against them.

The real case: DeepSeek-V3's (and Kimi-K2's) remote `modeling_deepseek.py` imports
`transformers.utils.import_utils.is_torch_fx_available`, a name transformers 4.57.1 defines and
5.1.0 no longer does (found by comparing the two wheels' tables). The module under test below
imports it the same way.
"""

from __future__ import annotations

import ast
import io
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracker.preflight.compat import check_version, first_missing, version_key
from tracker.preflight.imports import imports_of
from tracker.preflight.symbols import (
    SymbolTable,
    build_table,
    module_facts,
    parse_module_level,
    skeleton,
)
from tracker.preflight.wheels import SymbolTables
from tracker.shared.errors import PackageIndexError

from .conftest import VERSIONS

TRACKER = Path(sys.executable).with_name("tracker")
VANISHED = "transformers.utils.import_utils.is_torch_fx_available"

MODELING = b"""\
import math
import torch
from torch import nn
from transformers.activations import ACT2FN
from transformers.modeling_utils import PreTrainedModel
from transformers.utils.import_utils import is_torch_fx_available
from .configuration_x import XConfig
try:
    from flash_attn import flash_attn_func
except ImportError:
    flash_attn_func = None


class XForCausalLM(PreTrainedModel):
    config_class = XConfig

    def forward(self, x):
        from transformers.no_such_module import later
        return later(x)
"""
CONFIGURATION = b"from transformers.configuration_utils import PretrainedConfig\n\n\nclass XConfig(PretrainedConfig):\n    model_type = 'x'\n"
CONFIG = {
    "model_type": "llama",
    "architectures": ["XForCausalLM"],
    "auto_map": {
        "AutoConfig": "configuration_x.XConfig",
        "AutoModelForCausalLM": "modeling_x.XForCausalLM",
    },
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 1000,
    "max_position_embeddings": 512,
}


def _names(tree: ast.Module | None) -> set[str]:
    return module_facts("m", False, tree).bound


SOURCES = [
    "def f(\n    a,\n    b,\n) -> int:\n    x = 1\n    return x\n\nY = f\n",
    "@decorator(\n    1,\n)\nclass A(\n    B,\n):\n    '''doc\n\ncol0 line in a docstring\n'''\n    z = 1\n\nZ = A\n",
    "if x:\n    def g():\n        pass\n    G = 1\nelse:\n    from .m import H as I\ntry:\n    import a.b.c\nexcept ImportError:\n    J = None\n",
    "class K:\n    def m(self):\n        s = '''\nnot a def\ndef fake():\n'''\n        return s\nL = 2\n",
    "async def h():\n    await x\n__all__ = ['h', 'L']\n__all__ += ['M']\n",
]


@pytest.mark.parametrize("source", SOURCES)
def test_the_skeleton_binds_what_the_full_parse_binds(source: str) -> None:
    full = ast.parse(source)
    assert _names(parse_module_level(source.encode(), "m.py")) == _names(full)
    assert "    x = 1" not in skeleton(source)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [
                "def f{i}(a,\n      b):\n    return a\n",
                "class C{i}:\n    x = '''\ncol0\n'''\n    def m(self):\n        pass\n",
                "V{i} = 1\n",
                "if V:\n    W{i} = 2\n",
                "@d\ndef g{i}():\n    pass\n",
                "from .x import n{i} as m{i}\n",
            ]
        ),
        max_size=8,
    )
)
def test_module_level_names_match_a_full_parse(parts: list[str]) -> None:
    source = "".join(p.format(i=i) for i, p in enumerate(parts))
    assert _names(parse_module_level(source.encode(), "m.py")) == _names(ast.parse(source))


def _wheel(files: dict[str, str]) -> zipfile.ZipFile:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for path, text in files.items():
            zf.writestr(path, text)
    return zipfile.ZipFile(io.BytesIO(buf.getvalue()))


def test_lazy_structures_re_exports_and_aliases_are_read_without_importing() -> None:
    wheel = _wheel({
        "pkg/__init__.py": (
            "raise RuntimeError('never imported')\n"
            "_import_structure = {'a': ['A1'], 'sub': []}\n"
            "_import_structure['a'].extend(['A2'])\n"
            "_import_structure['b'] = ['B1']\n"
            "_import_structure['b'].append('B2')\n"
            "import_structure = define_import_structure(Path(__file__).parent / 'models', prefix='models')\n"
            "_LEGACY_MODULE_ALIASES = {'old': 'new'}\n"
        ),
        "pkg/new.py": "def fresh(): pass\n_private = 1\n",
        "pkg/models/__init__.py": "",
        "pkg/models/m1/__init__.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .modeling_m1 import *\n",
        "pkg/models/m1/modeling_m1.py": "__all__ = ['M1Model']\nclass M1Model: pass\nclass Hidden: pass\n",
        "pkg/dyn.py": "def __getattr__(name):\n    raise AttributeError(name)\n",
    })  # fmt: skip
    table = build_table(wheel, "pkg", "1.0", {})
    assert table.lookup("pkg", "A1") == "ok"
    assert table.lookup("pkg", "A2") == "ok"
    assert table.lookup("pkg", "B2") == "ok"
    assert table.lookup("pkg", "M1Model") == "ok"  # define_import_structure over models/
    assert table.lookup("pkg", "Hidden") == "missing"  # not in __all__
    assert table.lookup("pkg.models.m1", "M1Model") == "ok"  # star import of __all__
    assert table.lookup("pkg.models.m1", "Hidden") == "missing"
    assert table.lookup("pkg.models", "m1") == "ok"  # a submodule
    assert table.lookup("pkg.old", "_private") == "ok"  # the alias has the target's names
    assert table.lookup("pkg.dyn", "anything") == "dynamic"
    assert table.lookup("pkg.nowhere", "x") == "no-module"
    assert SymbolTable.from_json(json.loads(json.dumps(table.to_json()))) == table


def test_where_an_import_happens_decides_whether_it_breaks_loading() -> None:
    found = imports_of("modeling_x.py", ast.parse(MODELING))
    where = {(i.module, i.name): i.where for i in found}
    assert where[("transformers.utils.import_utils", "is_torch_fx_available")] == "required"
    assert where[("flash_attn", "flash_attn_func")] == "guarded"
    assert where[("transformers.no_such_module", "later")] == "deferred"
    assert [(i.line, i.module) for i in found[:2]] == [(1, "math"), (2, "torch")]


def test_release_order() -> None:
    assert sorted(["5.24.0", "4.57.1", "5.1.0", "5.0.0rc1"], key=version_key) == [
        "4.57.1",
        "5.0.0rc1",
        "5.1.0",
        "5.24.0",
    ]


@pytest.mark.slow
def test_a_real_vanished_symbol_across_three_real_tables(symbol_cache: Path) -> None:
    tables = SymbolTables(symbol_cache)
    real = [tables.get(v) for v in VERSIONS]
    assert (tables.fetched, tables.built) == (0, 0)  # read from the cache
    imports = imports_of("modeling_x.py", ast.parse(MODELING))
    results = [check_version(imports, t) for t in real]
    assert [r.importable for r in results] == [True, False, False]
    assert [[m.symbol for m in r.missing if m.breaks] for r in results] == [
        [],
        [VANISHED],
        [VANISHED],
    ]
    assert results[1].missing[0].status == "missing"  # the module is there, the name is not
    assert first_missing(results) == {
        VANISHED: "5.1.0",
        "transformers.no_such_module.later": "4.57.1",  # deferred: never breaks loading
    }
    # Names that stayed: the top-level lazy structure and re-exports resolve in every version.
    for t in real:
        assert t.lookup("transformers", "PreTrainedModel") == "ok"
        assert t.lookup("transformers", "LlamaForCausalLM") == "ok"
        assert t.lookup("transformers.utils", "logging") == "ok"
    assert real[0].lookup("transformers.utils", "is_torch_fx_available") == "ok"  # re-export


@pytest.mark.slow
def test_a_table_rebuilt_from_its_cached_wheel_equals_the_cached_table(
    symbol_cache: Path, tmp_path: Path
) -> None:
    version = "5.1.0"
    cached = SymbolTables(symbol_cache)
    wheel = cached.wheel(version)
    assert wheel is not None
    (tmp_path / wheel.name).symlink_to(wheel)
    fresh = SymbolTables(tmp_path)
    assert fresh.get(version) == cached.get(version)
    assert (fresh.fetched, fresh.built, cached.built) == (0, 1, 0)


def _model_dir(root: Path) -> Path:
    root.mkdir(parents=True)
    (root / "config.json").write_text(json.dumps(CONFIG))
    (root / "modeling_x.py").write_bytes(MODELING)
    (root / "configuration_x.py").write_bytes(CONFIGURATION)
    return root


def _run(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(TRACKER), *args], capture_output=True, text=True, env=env, timeout=300, check=False
    )


@pytest.mark.slow
def test_the_cli_reports_importable_then_missing_from_the_cache_alone(
    symbol_cache: Path, tmp_path: Path
) -> None:
    model = _model_dir(tmp_path / "model")
    env = dict(os.environ)
    env["TRACKER_PREFLIGHT_CACHE_DIR"] = str(symbol_cache)
    # An index that cannot answer: every table must come from the cache (no pip run at all).
    env["TRACKER_PREFLIGHT_INDEX_URL"] = (tmp_path / "no-index").as_uri()
    before = {p.name: p.stat().st_mtime_ns for p in symbol_cache.glob("*.table.json")}
    versions = [a for v in VERSIONS for a in ("--transformers", v)]
    done = _run("preflight", str(model), *versions, env=env)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert (
        "  transformers 4.57.1: importable; missing where it does not stop loading: "
        "transformers.no_such_module.later (deferred)"
    ) in lines
    assert "  transformers 5.1.0: does not import" in lines
    assert "  transformers 5.24.0: does not import" in lines
    assert (
        f"    {VANISHED} (modeling_x.py:6, required): transformers.utils.import_utils lacks "
        "is_torch_fx_available; missing since 5.1.0"
    ) in lines
    assert "  other packages: flash_attn (guarded), torch (required)" in lines
    assert any(line.startswith("  needs a native build: flash_attn: ") for line in lines)
    data = json.loads(_run("preflight", str(model), *versions, "--json", env=env).stdout)
    rc = data["remote_code"]
    assert rc["modules"] == ["configuration_x.py", "modeling_x.py"]
    assert [v["importable"] for v in rc["versions"]] == [True, False, False]
    assert rc["first_missing"][VANISHED] == "5.1.0"
    after = {p.name: p.stat().st_mtime_ns for p in symbol_cache.glob("*.table.json")}
    assert after == before  # nothing rebuilt

    # A version not in the cache needs the index, which cannot answer: one line, exit 5.
    done = _run("preflight", str(model), "--transformers", "4.46.0", env=env)
    assert done.returncode == 5
    assert done.stderr.startswith("error: could not fetch transformers==4.46.0: ")
    assert len(done.stderr.strip().splitlines()) == 1
    bad = _run("preflight", str(model), "--transformers", "5.1.0; rm -rf /", env=env)
    assert bad.returncode == 2, bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1


def test_a_version_that_cannot_be_fetched_is_tried_once_per_instance(tmp_path: Path) -> None:
    """A poll cycle asks for the tables once per revision: a failed fetch is remembered, so pip
    runs once, and the same one-line reason is given each time (what `tracker demo` prints)."""
    index = tmp_path / "empty-index"
    index.mkdir()
    tables = SymbolTables(tmp_path / "cache", index_url=index.as_uri())
    assert not tables.cached("4.57.1")
    with pytest.raises(PackageIndexError) as first:
        tables.get("4.57.1")
    with pytest.raises(PackageIndexError) as second:
        tables.get("4.57.1")
    assert tables.fetched == 1
    assert str(first.value) == str(second.value) == tables.failed["4.57.1"]
    assert str(first.value).startswith("could not fetch transformers==4.57.1: ")
