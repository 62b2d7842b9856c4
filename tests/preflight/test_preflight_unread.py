"""Remote code the preflight cannot read, and code it must not call importable.

A hostile review of issue 15 found each of these reported "importable" on every version:
- a module that does not parse (a syntax error, bytes that are not UTF-8, nesting too deep for
  Python's parser): Python cannot import it on any version, so it "does not import", with why,
  and a revision that makes it so is the high advisory a vanished name is;
- a UTF-8 module with a byte-order mark was said not to parse: Python imports it, so it is read;
- a relative import above the repo's root (`from ..outside import x` in a root module): transformers
  looks for the file in the repo and fails;
- an `auto_map` entry whose code is in another repo (`org/repo--modeling_x.X`): not read, so the
  answer is "not checked" (`importable` null), never "importable";
- a module over `MAX_MODULE_BYTES` (2 MB): not parsed at all (an 18 MB one cost 7.4 GB and 2.5
  minutes), recorded as too large to check: "not checked".
The configs are the tests' stand-in remote-code config (`test_preflight_symbols.CONFIG`); the
modules are small stand-ins written here, each a real Python source of the failing kind.
"""

from __future__ import annotations

import ast
import json
import os
from pathlib import Path

import pytest

from tracker.preflight import imports as preflight_imports
from tracker.preflight.delta import preflight_delta
from tracker.preflight.imports import MAX_MODULE_BYTES, Unread, read_module
from tracker.preflight.report import Preflight, RemoteCode, run_preflight
from tracker.preflight.settings import PreflightSettings
from tracker.preflight.wheels import SymbolTables
from tracker.shared.domain import ChangeKind

from .conftest import VERSIONS
from .test_preflight_symbols import CONFIG, CONFIGURATION, _run

CLEAN = b"import torch\nfrom transformers.modeling_utils import PreTrainedModel\nfrom .configuration_x import XConfig\n\n\nclass XForCausalLM(PreTrainedModel):\n    config_class = XConfig\n"
VANISHING = b"from transformers.utils.import_utils import is_torch_fx_available\n" + CLEAN
"""Imports a name gone since transformers 5.1.0 (DeepSeek-V3's remote code did)."""
SYNTAX = VANISHING + b"def oops(:\n"  # line 9
SYNTAX_WHY = "modeling_x.py does not parse: SyntaxError line 9: invalid syntax"


def _files(modeling: bytes | None, config: dict[str, object] = CONFIG) -> dict[str, bytes]:
    files = {"config.json": json.dumps(config).encode(), "configuration_x.py": CONFIGURATION}
    if modeling is not None:
        files["modeling_x.py"] = modeling
    return files


def _preflight(files: dict[str, bytes], tables: dict[str, object]) -> Preflight:
    return run_preflight(
        files=files,
        headers={},
        tree=(),
        tables=tables,  # type: ignore[arg-type]
        settings=PreflightSettings(transformers=VERSIONS),
    )


@pytest.fixture(scope="module")
def tables(symbol_cache: Path) -> dict[str, object]:
    cache = SymbolTables(symbol_cache)
    return {v: cache.get(v) for v in VERSIONS}


def test_why_a_module_is_not_read() -> None:
    assert read_module("modeling_x.py", SYNTAX) == Unread(SYNTAX_WHY, breaks=True)
    assert read_module("modeling_x.py", CLEAN + b"# caf\xe9\n") == Unread(
        "modeling_x.py does not parse: not UTF-8 (byte 0xe9 at offset 177; transformers reads "
        "remote code as UTF-8)",
        breaks=True,
    )
    deep = b"x = " + b"1+" * 100_000 + b"1\n"  # compile() fails on it as ast.parse does
    assert read_module("m.py", deep) == Unread(
        "m.py does not parse: nested too deeply (RecursionError)", breaks=True
    )
    parens = b"y = " + b"(" * 5000 + b"1" + b")" * 5000 + b"\n"
    assert read_module("m.py", parens) == Unread(
        "m.py does not parse: SyntaxError line 1: too many nested parentheses", breaks=True
    )
    # a byte-order mark: Python imports the file, so it parses, imports and all
    bom = read_module("modeling_x.py", b"\xef\xbb\xbf" + VANISHING)
    assert isinstance(bom, ast.Module)
    assert [i.name for i in preflight_imports.imports_of("modeling_x.py", bom)] == [
        "is_torch_fx_available",
        None,
        "PreTrainedModel",
    ]


def test_a_module_over_the_limit_is_not_parsed(monkeypatch: pytest.MonkeyPatch) -> None:
    assert MAX_MODULE_BYTES == 2_000_000
    at_limit = CLEAN + b"x = 1\n" * ((MAX_MODULE_BYTES - len(CLEAN)) // 6)
    assert len(at_limit) <= MAX_MODULE_BYTES
    assert isinstance(read_module("modeling_x.py", at_limit), ast.Module)

    parse = ast.parse

    def refuse(source: str, filename: str = "<unknown>", **kwargs: object) -> ast.AST:
        assert filename != "modeling_x.py", "a module over the limit was parsed"
        return parse(source, filename, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr(ast, "parse", refuse)
    huge = CLEAN + b"x = 1\n" * 3_000_000  # 18 MB, as the review's
    assert read_module("modeling_x.py", huge) == Unread(
        "modeling_x.py is too large to check (18.0 MB > 2 MB): not checked", breaks=False
    )
    over = CLEAN + b"#" * (MAX_MODULE_BYTES + 1 - len(CLEAN))
    assert read_module("modeling_x.py", over) == Unread(
        "modeling_x.py is too large to check (2.0 MB > 2 MB): not checked", breaks=False
    )
    code = preflight_imports.remote_code_imports(_files(huge))
    assert code.not_checked == ["modeling_x.py is too large to check (18.0 MB > 2 MB): not checked"]
    assert (code.broken, code.modules) == ([], ["configuration_x.py", "modeling_x.py"])


@pytest.mark.slow
def test_a_module_that_does_not_parse_imports_nowhere(tables: dict[str, object]) -> None:
    for modeling, why in [
        (SYNTAX, SYNTAX_WHY),
        (
            CLEAN + b"# caf\xe9\n",
            "modeling_x.py does not parse: not UTF-8 (byte 0xe9 at offset 177; transformers "
            "reads remote code as UTF-8)",
        ),
    ]:
        rc = _preflight(_files(modeling), tables).remote_code
        assert rc.broken == (why,) and rc.problems == (why,)
        assert [rc.importable(v) for v in VERSIONS] == [False, False, False]
        assert [(v["importable"], v["broken"]) for v in rc.versions] == [(False, [why])] * 3
        assert RemoteCode.from_json(json.loads(json.dumps(rc.to_json()))) == rc

    # importable before; the revision that breaks the syntax is a BROKEN change on every version
    before, after = _preflight(_files(CLEAN), tables), _preflight(_files(SYNTAX), tables)
    assert [before.remote_code.importable(v) for v in VERSIONS] == [True, True, True]
    changes = preflight_delta(before, after)
    assert [(c.kind, c.key, c.before, c.after) for c in changes] == [
        (
            ChangeKind.BROKEN,
            f"preflight.remote_code.transformers-{v}",
            "importable",
            f"does not import: {SYNTAX_WHY}",
        )
        for v in VERSIONS
    ]
    # and fixing it again is "imports again" on every version
    assert [c.kind for c in preflight_delta(after, before)] == [ChangeKind.CHANGED] * 3

    # a byte-order mark parses: its vanished import is found
    bom = _preflight(_files(b"\xef\xbb\xbf" + VANISHING), tables).remote_code
    assert (bom.problems, bom.broken) == ((), ())
    assert [bom.importable(v) for v in VERSIONS] == [True, False, False]
    assert bom.first_missing == {"transformers.utils.import_utils.is_torch_fx_available": "5.1.0"}


def test_a_preflight_stored_before_unparsed_modules_counted_is_not_checked() -> None:
    """A stored answer said "importable" beside "modeling_x.py does not parse": the module's imports
    were never read, so read back it is "not checked", not "importable"."""
    old = {
        "modules": ["configuration_x.py", "modeling_x.py"],
        "problems": ["modeling_x.py does not parse"],
        "transformers_imports": [],
        "packages": {},
        "compiled": {},
        "versions": [{"version": "5.24.0", "importable": True, "missing": [], "absent": []}],
        "first_missing": {},
        "unchecked": {},
        "absent": [],
    }
    rc = RemoteCode.from_json(old)
    assert rc.importable("5.24.0") is None
    assert rc.versions[0]["importable"] is None
    assert rc.not_checked == ("modeling_x.py does not parse",)


@pytest.mark.slow
def test_a_relative_import_above_the_repo_root_imports_nowhere(tables: dict[str, object]) -> None:
    for tail, why in [
        (b"from ..outside import thing\n", "modeling_x.py imports outside the repo: ..outside"),
        (b"from .. import outside\n", "modeling_x.py imports outside the repo: ..outside"),
    ]:
        rc = _preflight(_files(CLEAN + tail), tables).remote_code
        assert rc.broken == (f"{why} (line 8)",)
        assert [rc.importable(v) for v in VERSIONS] == [False, False, False]
    # from a package: `...` is above the root, `..` is not
    config = {**CONFIG, "auto_map": {"AutoModelForCausalLM": "pkg.modeling_x.XForCausalLM"}}
    files = {
        "config.json": json.dumps(config).encode(),
        "pkg/modeling_x.py": CLEAN.replace(b".configuration_x", b"..configuration_x")
        + b"from ...up import y\n",
        "configuration_x.py": CONFIGURATION,
    }
    rc = _preflight(files, tables).remote_code
    assert rc.modules == ("pkg/modeling_x.py", "configuration_x.py")
    assert rc.broken == ("pkg/modeling_x.py imports outside the repo: ...up (line 8)",)


@pytest.mark.slow
def test_code_in_another_repo_is_listed_and_not_checked(tables: dict[str, object]) -> None:
    elsewhere = {
        **CONFIG,
        "auto_map": {
            "AutoConfig": "configuration_x.XConfig",
            "AutoModelForCausalLM": "someorg/somerepo--modeling_x.XForCausalLM",
        },
    }
    why = "AutoModelForCausalLM: code in someorg/somerepo (modeling_x.XForCausalLM), not checked"
    rc = _preflight(_files(None, elsewhere), tables).remote_code
    assert (rc.modules, rc.problems, rc.not_checked) == (("configuration_x.py",), (why,), (why,))
    assert [rc.importable(v) for v in VERSIONS] == [None, None, None]
    assert [(v["importable"], v["not_checked"]) for v in rc.versions] == [(None, [why])] * 3
    # no module here at all: still not checked, never "no remote code, imports everywhere"
    only = {**elsewhere, "auto_map": {"AutoModel": "someorg/somerepo--modeling_x.XModel"}}
    rc = _preflight({"config.json": json.dumps(only).encode()}, tables).remote_code
    assert rc.modules == () and [rc.importable(v) for v in VERSIONS] == [None, None, None]
    # what is checked and breaks still says so
    both = {
        **CONFIG,
        "auto_map": {
            "AutoConfig": "configuration_x.XConfig",
            "AutoModelForCausalLM": "modeling_x.XForCausalLM",
            "AutoModel": "someorg/somerepo--modeling_x.XModel",
        },
    }
    rc = _preflight(_files(SYNTAX, both), tables).remote_code
    assert [rc.importable(v) for v in VERSIONS] == [False, False, False]
    assert (rc.broken, rc.not_checked) == (
        (SYNTAX_WHY,),
        ("AutoModel: code in someorg/somerepo (modeling_x.XModel), not checked",),
    )
    # "not checked" on one side is no change
    assert (
        preflight_delta(
            _preflight(_files(CLEAN), tables), _preflight(_files(None, elsewhere), tables)
        )
        == []
    )


@pytest.mark.slow
def test_the_cli_says_does_not_import_and_not_checked(symbol_cache: Path, tmp_path: Path) -> None:
    env = dict(os.environ)
    env["TRACKER_PREFLIGHT_CACHE_DIR"] = str(symbol_cache)
    env["TRACKER_PREFLIGHT_INDEX_URL"] = (tmp_path / "no-index").as_uri()
    versions = [a for v in VERSIONS for a in ("--transformers", v)]
    elsewhere = {**CONFIG, "auto_map": {"AutoModel": "someorg/somerepo--modeling_x.XModel"}}
    cases = {
        "syntax": (_files(SYNTAX), False, SYNTAX_WHY),
        "outside": (
            _files(CLEAN + b"from ..outside import thing\n"),
            False,
            "modeling_x.py imports outside the repo: ..outside (line 8)",
        ),
        "huge": (
            _files(CLEAN + b"x = 1\n" * 400_000),
            None,
            "modeling_x.py is too large to check (2.4 MB > 2 MB): not checked",
        ),
        "elsewhere": (
            _files(None, elsewhere),
            None,
            "AutoModel: code in someorg/somerepo (modeling_x.XModel), not checked",
        ),
        "bom": (_files(b"\xef\xbb\xbf" + CLEAN), True, None),
    }
    for name, (files, importable, why) in cases.items():
        model = tmp_path / name
        model.mkdir()
        for path, data in files.items():
            (model / path).write_bytes(data)
        done = _run("preflight", str(model), *versions, env=env)
        assert done.returncode == 0, done.stderr
        lines = done.stdout.splitlines()
        state = {True: "importable", False: "does not import", None: "not checked"}[importable]
        for v in VERSIONS:
            i = lines.index(f"  transformers {v}: {state}")
            if why is not None:
                assert lines[i + 1] == f"    {why}", name
        if why is not None:
            assert f"  problem: {why}" in lines
        else:
            assert not [line for line in lines if line.startswith("  problem:")]
        data = json.loads(_run("preflight", str(model), *versions, "--json", env=env).stdout)
        rc = data["remote_code"]
        assert [v["importable"] for v in rc["versions"]] == [importable] * 3, name
        key = "broken" if importable is False else "not_checked"
        assert rc[key] == ([why] if why else []), name
