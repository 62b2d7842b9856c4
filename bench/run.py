"""Run every benchmark section and write bench/RESULTS.md.

Each section module exposes `run() -> str`, returning Markdown that names the command that made it.
Usage: `python -m bench.run [SECTION ...]` (sections: ingest, diff, estimate).
"""

from __future__ import annotations

import importlib
import platform
import sys
import time
from pathlib import Path

SECTIONS = ("ingest", "diff", "estimate")


def main(argv: list[str]) -> int:
    wanted = argv or list(SECTIONS)
    out = Path(__file__).with_name("RESULTS.md")
    parts = [
        "# Benchmark results\n",
        f"Made by `make bench` (`python -m bench.run {' '.join(wanted)}`) on "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, Python {platform.python_version()}, "
        f"{platform.machine()}, 2 cores.\n",
    ]
    for name in wanted:
        module = importlib.import_module(f"bench.{name}")
        started = time.perf_counter()
        parts.append(module.run())
        parts.append(f"\n_section `{name}` took {time.perf_counter() - started:.1f} s_\n")
    out.write_text("\n".join(parts))
    print(out.read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
