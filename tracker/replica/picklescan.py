"""Static import scan of pickle files (raw or PyTorch zip), shaped like the Hub's `pickleImportScan`.

The pickle is never executed: opcodes are walked with `pickletools.genops` and every GLOBAL /
STACK_GLOBAL import is classified innocuous, suspicious or dangerous (the Hub's picklescan levels).
"""

from __future__ import annotations

import io
import pickletools
import zipfile
from pathlib import Path
from typing import Any, BinaryIO

PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".pkl", ".pickle", ".ckpt", ".joblib", ".dat", ".data")
"""File suffixes the Hub's pickle scanner looks at."""

_MAX_PICKLE = 64 * 1024 * 1024
_MAX_PICKLES = 8

_INNOCUOUS: dict[str, set[str]] = {
    "collections": {"OrderedDict", "defaultdict"},
    "torch": {"Size", "device", "dtype", "float32", "float16", "bfloat16", "int64", "int32"},
    "torch._utils": {
        "_rebuild_tensor_v2",
        "_rebuild_parameter",
        "_rebuild_tensor",
        "_rebuild_qtensor",
    },
    "torch._tensor": {"_rebuild_from_type_v2"},
    "numpy": {"dtype", "ndarray"},
    "numpy.core.multiarray": {"_reconstruct", "scalar"},
    "numpy._core.multiarray": {"_reconstruct", "scalar"},
    "builtins": {
        "set",
        "frozenset",
        "dict",
        "list",
        "tuple",
        "int",
        "float",
        "complex",
        "bytearray",
        "slice",
    },
    "_codecs": {"encode"},
}
_TORCH_STORAGES = {
    "FloatStorage", "DoubleStorage", "HalfStorage", "BFloat16Storage", "LongStorage", "IntStorage",
    "ShortStorage", "CharStorage", "ByteStorage", "BoolStorage", "UntypedStorage",
}  # fmt: skip
_DANGEROUS: dict[str, set[str] | None] = {
    "builtins": {"eval", "exec", "compile", "open", "getattr", "__import__", "apply", "breakpoint"},
    "__builtin__": {"eval", "exec", "compile", "open", "getattr", "__import__", "apply"},
    "os": None, "posix": None, "nt": None, "subprocess": None, "sys": None, "socket": None,
    "shutil": None, "runpy": None, "webbrowser": None, "pty": None, "requests": None,
    "httplib": None, "http.client": None, "pickle": None, "_pickle": None, "importlib": None,
    "operator": {"attrgetter", "methodcaller"}, "code": None, "ctypes": None, "marshal": None,
}  # fmt: skip
_LEVELS = ("innocuous", "suspicious", "dangerous")
_STRING_OPS = {"SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE", "STRING", "BINSTRING"}


def is_pickle_path(path: str) -> bool:
    """True when the Hub would scan `path` as a pickle."""
    return path.lower().endswith(PICKLE_SUFFIXES)


def classify(module: str, name: str) -> str:
    """The Hub's safety level for importing `module.name`."""
    for candidate in (module, module.split(".")[0]):
        if candidate in _DANGEROUS:
            names = _DANGEROUS[candidate]
            if names is None or name in names:
                return "dangerous"
    if name in (_INNOCUOUS.get(module) or set()):
        return "innocuous"
    if module == "torch" and name in _TORCH_STORAGES:
        return "innocuous"
    return "suspicious"


def _imports_of(data: bytes) -> list[tuple[str, str]]:
    """GLOBAL/STACK_GLOBAL imports of the pickle(s) at the start of `data` (in order, unique)."""
    found: list[tuple[str, str]] = []
    stream = io.BytesIO(data)
    for index in range(_MAX_PICKLES):
        # The legacy torch format is several pickles back to back; later ones start with PROTO.
        if index and data[stream.tell() : stream.tell() + 1] != b"\x80":
            break
        strings: list[Any] = []
        memo: dict[int, Any] = {}
        last: Any = None
        for opcode, arg, _pos in pickletools.genops(stream):
            name = opcode.name
            if name in _STRING_OPS:
                last = arg
                strings.append(arg)
            elif name in ("BINGET", "LONG_BINGET", "GET"):
                last = memo.get(int(arg or 0))
                strings.append(last)
            elif name in ("BINPUT", "LONG_BINPUT", "PUT"):
                memo[int(arg or 0)] = last
            elif name == "MEMOIZE":
                memo[len(memo)] = last
            elif name == "GLOBAL":
                module, _, attr = str(arg).partition(" ")
                found.append((module, attr))
                last = None
            elif name == "STACK_GLOBAL":
                if (
                    len(strings) >= 2
                    and isinstance(strings[-2], str)
                    and isinstance(strings[-1], str)
                ):
                    found.append((strings[-2], strings[-1]))
                else:
                    found.append(("unknown", "unknown"))
                last = None
            else:
                last = None
    unique: list[tuple[str, str]] = []
    for item in found:
        if item not in unique:
            unique.append(item)
    return unique


def scan(source: Path | bytes) -> dict[str, Any] | None:
    """The Hub-shaped `pickleImportScan` of a file (a path, or its bytes), or None when it is not a
    readable pickle.

    Output: `{"highestSafetyLevel": level, "imports": [{"module", "name", "safety"}, ...]}`.
    Reads at most 64 MiB of pickle data; zip archives (torch.save) are scanned member by member.
    """
    try:
        if isinstance(source, bytes):
            return _scan_handle(io.BytesIO(source))
        with source.open("rb") as handle:
            return _scan_handle(handle)
    except (OSError, ValueError, zipfile.BadZipFile, EOFError, KeyError, IndexError):
        return None


def _scan_handle(handle: BinaryIO) -> dict[str, Any] | None:
    if zipfile.is_zipfile(handle):
        handle.seek(0)
        blobs = []
        with zipfile.ZipFile(handle) as archive:
            for info in archive.infolist():
                if info.filename.endswith(".pkl") and info.file_size <= _MAX_PICKLE:
                    blobs.append(archive.read(info))
    else:
        handle.seek(0)
        first = handle.read(1)
        if not first or first.decode("latin-1") not in pickletools.code2op:  # type: ignore[attr-defined]
            return None  # not a pickle (e.g. a zero-filled sparse object): don't read 64 MiB
        blobs = [first + handle.read(_MAX_PICKLE - 1)]
    if not blobs:
        return None
    imports: list[tuple[str, str]] = []
    for blob in blobs:
        for item in _imports_of(blob):
            if item not in imports:
                imports.append(item)
    rows = [{"module": m, "name": n, "safety": classify(m, n)} for m, n in imports]
    highest = max((_LEVELS.index(r["safety"]) for r in rows), default=0)
    return {"highestSafetyLevel": _LEVELS[highest], "imports": rows}


def file_status(scan_result: dict[str, Any] | None, pickle: bool) -> dict[str, Any]:
    """The Hub-shaped `securityFileStatus` for a file, given its pickle scan (None: not scanned)."""
    status = "safe"
    if pickle:
        level = scan_result["highestSafetyLevel"] if scan_result else None
        status = {"innocuous": "safe", "suspicious": "caution", "dangerous": "unsafe"}.get(
            level or "", "unscanned"
        )
    return {
        "status": status,
        "avScan": {"virusFound": False, "virusNames": None},
        "pickleImportScan": scan_result if pickle else None,
    }
