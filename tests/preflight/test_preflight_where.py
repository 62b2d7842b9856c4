"""Where an import sits, judged as Python and transformers' `check_imports` judge it.

- an import in an `except ImportError:` body runs when the `try` body's import fails and then
  raises uncaught: the pair breaks loading on a version where both are missing;
- `if TYPE_CHECKING: ... else: <import>` and `if not TYPE_CHECKING: <import>` run at import time;
- `check_imports` (transformers.dynamic_module_utils, the same in 4.57.1 and 5.24.0) requires every
  package imported anywhere outside `try` and outside `if is_..._available()`: a function-level
  import of another package is required at load.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tracker.preflight.compat import check_version, other_packages
from tracker.preflight.imports import imports_of
from tracker.preflight.wheels import SymbolTables

from .conftest import VERSIONS

VANISHED = "transformers.utils.import_utils"  # is_torch_fx_available: in 4.57.1, not in 5.1.0

BAD_FALLBACK = b"""\
try:
    from transformers.utils.import_utils import is_torch_fx_available
except ImportError:
    from transformers.utils import is_torch_fx_available
"""
GOOD_FALLBACK = b"""\
try:
    from transformers.utils.import_utils import is_torch_fx_available
except ImportError:
    from transformers import PreTrainedModel as is_torch_fx_available
"""
TYPE_CHECKING_ELSE = b"""\
from typing import TYPE_CHECKING
if TYPE_CHECKING:
    pass
else:
    from transformers.utils.import_utils import is_torch_fx_available
"""
NOT_TYPE_CHECKING = b"""\
import typing
if not typing.TYPE_CHECKING:
    from transformers.utils.import_utils import is_torch_fx_available
"""
PACKAGES = b"""\
from typing import TYPE_CHECKING
from transformers.utils import is_flash_attn_2_available
if TYPE_CHECKING:
    import typing_only
try:
    import xformers
except ImportError:
    import apex
def forward(x):
    import einops
    if is_flash_attn_2_available():
        import flash_attn
    return x
"""


def _check(source: bytes, tables: list[object]) -> list[tuple[bool, list[tuple[str, int]]]]:
    imports = imports_of("modeling_x.py", ast.parse(source))
    out = []
    for t in tables:
        r = check_version(imports, t)  # type: ignore[arg-type]
        out.append((r.importable, [(m.symbol, m.line) for m in r.missing if m.breaks]))
    return out


@pytest.mark.slow
def test_a_fallback_import_and_a_type_checking_else_are_checked(symbol_cache: Path) -> None:
    tables: list[object] = [SymbolTables(symbol_cache).get(v) for v in VERSIONS]
    sym = "transformers.utils.is_torch_fx_available"
    # 4.57.1: the try body imports (the except body never runs, though its name exists there too)
    assert _check(BAD_FALLBACK, tables) == [(True, []), (False, [(sym, 4)]), (False, [(sym, 4)])]
    assert _check(GOOD_FALLBACK, tables) == [(True, []), (True, []), (True, [])]
    gone = [(f"{VANISHED}.is_torch_fx_available", 5)]
    assert _check(TYPE_CHECKING_ELSE, tables) == [(True, []), (False, gone), (False, gone)]
    gone = [(f"{VANISHED}.is_torch_fx_available", 3)]
    assert _check(NOT_TYPE_CHECKING, tables) == [(True, []), (False, gone), (False, gone)]


@pytest.mark.slow
def test_packages_are_required_where_check_imports_requires_them(symbol_cache: Path) -> None:
    tables = [SymbolTables(symbol_cache).get(v) for v in VERSIONS]
    imports = imports_of("modeling_x.py", ast.parse(PACKAGES))
    assert other_packages(imports, ["modeling_x.py"], tables) == {
        "apex": "fallback",  # check_imports skips try blocks, handlers included
        "einops": "required",  # a function-level import: check_imports requires it
        "flash_attn": "deferred",  # under `if is_flash_attn_2_available():`
        "typing_only": "required",  # check_imports reads `if TYPE_CHECKING:` bodies too
        "xformers": "guarded",
    }
