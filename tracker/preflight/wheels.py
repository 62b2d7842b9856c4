"""Symbol tables per transformers version, built once from the version's wheel and cached.

The wheel is fetched with pip from the package index (`pip download --no-deps --only-binary
:all: transformers==X`, the index pip is configured with, or `preflight_index_url`) into the
cache directory; its `.py` files are parsed by AST (`tracker.preflight.symbols`), never
installed or imported; the table is written next to it as `transformers-X.table.json`
(atomically: a crash leaves no half-written table). Later calls, in this process or another,
read the table file and never run pip again; a table whose wheel digest or format is not the
current one is rebuilt from the cached wheel.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

from tracker.preflight.symbols import TABLE_FORMAT, SymbolTable, build_table
from tracker.settings import Settings, child_env
from tracker.shared.errors import PackageIndexError

PACKAGE = "transformers"
VERSION = re.compile(r"^[0-9]+(\.[0-9]+){1,3}([a-z]+[0-9]*)?(\.post[0-9]+|\.dev[0-9]+)?$")
PIP_TIMEOUT_S = 300


def check_version(version: str) -> str:
    """`version` if it is a plain release number (`4.57.1`, `5.0.0rc1`); PackageIndexError otherwise
    (it reaches pip's command line, so nothing else is let through)."""
    if not VERSION.match(version):
        raise PackageIndexError(f"transformers version {version!r} is not a release number")
    return version


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


class SymbolTables:
    """transformers symbol tables by version, from `cache_dir` (fetching and building what is
        missing). `fetched` and `built` count the pip runs and table builds of this instance; `failed`
    holds, per version, why it could not be had (not retried by this instance)."""

    def __init__(self, cache_dir: Path, *, index_url: str | None = None) -> None:
        self.cache_dir = cache_dir
        self.index_url = index_url
        self._tables: dict[str, SymbolTable] = {}
        self.failed: dict[str, str] = {}
        self.fetched = 0
        self.built = 0

    @classmethod
    def from_settings(cls, settings: Settings) -> SymbolTables:
        return cls(settings.effective_preflight_cache_dir, index_url=settings.preflight_index_url)

    def table_path(self, version: str) -> Path:
        return self.cache_dir / f"{PACKAGE}-{version}.table.json"

    def wheel(self, version: str) -> Path | None:
        """The cached wheel of `version`, if any."""
        found = sorted(self.cache_dir.glob(f"{PACKAGE}-{version}-*.whl"))
        return found[0] if found else None

    def get(self, version: str) -> SymbolTable:
        """The table of `version`: from memory, the cache, or a fetched wheel (PackageIndexError
        with one line when pip cannot fetch it or the wheel cannot be read)."""
        check_version(version)
        if version in self._tables:
            return self._tables[version]
        if (
            version in self.failed
        ):  # once per instance: a poll cycle does not rerun pip per revision
            raise PackageIndexError(self.failed[version])
        table = self._read_cached(version)
        if table is None:
            try:
                with self._locked(version):  # processes sharing the cache fetch and build once
                    table = self._read_cached(version)
                    if table is None:
                        wheel = self.wheel(version) or self.fetch(version)
                        table = self._build(version, wheel)
            except PackageIndexError as exc:
                self.failed[version] = str(exc)
                raise
        self._tables[version] = table
        return table

    @contextlib.contextmanager
    def _locked(self, version: str) -> Iterator[None]:
        """An exclusive lock on `version` in the cache dir, held across pip and the table build,
        so two processes (workers, test runners) never download into one file at once."""
        try:
            self.cache_dir.mkdir(parents=True, exist_ok=True)
            fh = (self.cache_dir / f".{PACKAGE}-{version}.lock").open("w")
        except OSError as exc:
            raise PackageIndexError(f"could not lock the preflight cache: {exc}") from exc
        with fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            yield

    def cached(self, version: str) -> bool:
        """Whether the table of `version` is in the cache (no fetch or build needed)."""
        return version in self._tables or self._read_cached(check_version(version)) is not None

    def tables(self, versions: Iterable[str]) -> dict[str, SymbolTable]:
        return {v: self.get(v) for v in versions}

    def _read_cached(self, version: str) -> SymbolTable | None:
        path = self.table_path(version)
        try:
            data = json.loads(path.read_text())
            table = SymbolTable.from_json(data)
        except (OSError, ValueError, KeyError, TypeError):
            return None
        wheel = self.wheel(version)
        if wheel is not None and table.source.get("wheel") == wheel.name:
            return table
        return table if wheel is None else None

    def fetch(self, version: str) -> Path:
        """Download the wheel of `version` into the cache with pip; its path."""
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary",
            ":all:",
            "--disable-pip-version-check",
            "--quiet",
            "--dest",
            str(self.cache_dir),
            f"{PACKAGE}=={version}",
        ]
        if self.index_url:
            cmd[4:4] = ["--index-url", self.index_url]
        try:
            done = subprocess.run(
                cmd,
                capture_output=True,
                text=True,
                timeout=PIP_TIMEOUT_S,
                check=False,
                env=child_env(PIP_NO_INPUT="1"),
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise PackageIndexError(f"could not fetch {PACKAGE}=={version}: {exc}") from exc
        self.fetched += 1
        wheel = self.wheel(version)
        if done.returncode != 0 or wheel is None:
            lines = [
                ln.strip()
                for ln in (done.stderr or done.stdout or "").splitlines()
                if ln.strip() and "is ignored" not in ln
            ]
            why = next((ln for ln in reversed(lines) if ln.startswith("ERROR")), None)
            why = why or (lines[-1] if lines else f"pip exited {done.returncode}")
            raise PackageIndexError(f"could not fetch {PACKAGE}=={version}: {why}")
        return wheel

    def _build(self, version: str, wheel: Path) -> SymbolTable:
        source: Mapping[str, str | int] = {
            "wheel": wheel.name,
            "sha256": _sha256(wheel),
            "format": TABLE_FORMAT,
        }
        try:
            with zipfile.ZipFile(wheel) as zf:
                table = build_table(zf, PACKAGE, version, source)
        except (OSError, zipfile.BadZipFile) as exc:
            raise PackageIndexError(f"could not read {wheel.name}: {exc}") from exc
        if not table.modules:
            raise PackageIndexError(f"{wheel.name} holds no {PACKAGE} modules")
        self.built += 1
        path = self.table_path(version)
        fd, tmp = tempfile.mkstemp(dir=self.cache_dir, prefix=".table-", suffix=".json")
        try:
            with os.fdopen(fd, "w") as fh:
                json.dump(table.to_json(), fh, separators=(",", ":"))
            os.chmod(tmp, 0o644)
            os.replace(tmp, path)
        except OSError:
            Path(tmp).unlink(missing_ok=True)
            raise
        return table


def watchlist_versions(path: Path) -> list[str]:
    """Every transformers version the watchlist's preflight blocks name, in release order."""
    from tracker.preflight.compat import version_key
    from tracker.preflight.settings import PreflightSettings
    from tracker.watchlist import load_watchlist

    found: set[str] = set()
    for repo in load_watchlist(path).repos:
        found.update(PreflightSettings.from_mapping(repo.preflight).transformers)
    return sorted(found, key=version_key)


def main(argv: list[str] | None = None) -> int:
    """`python -m tracker.preflight.wheels [VERSION ...] [--watchlist FILE]`: fetch and build."""
    import argparse

    from tracker.settings import load_settings
    from tracker.shared.errors import TrackerError

    parser = argparse.ArgumentParser(description="fetch transformers wheels and build their tables")
    parser.add_argument("versions", nargs="*")
    parser.add_argument("--watchlist", type=Path)
    args = parser.parse_args(argv)
    try:
        versions = list(args.versions)
        if args.watchlist is not None:
            versions += watchlist_versions(args.watchlist)
        tables = SymbolTables.from_settings(load_settings())
        for v in dict.fromkeys(versions):
            t = tables.get(v)
            print(f"transformers {v}: {len(t.modules)} modules ({tables.table_path(v)})")
    except TrackerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"{tables.fetched} wheels fetched, {tables.built} tables built")
    return 0


if __name__ == "__main__":
    sys.exit(main())
