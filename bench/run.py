"""Run benchmark sections and write their results into bench/RESULTS.md.

Each section module exposes `run() -> str`, returning Markdown that names the command that made it.
Usage: `python -m bench.run [SECTION ...]`: `make bench` runs the default sections (ingest, diff,
estimate, sweep, preflight, push, ...: SECTIONS); `make soak` runs `soak` (the long fault trials of the store). A run replaces the sections
it ran in RESULTS.md and keeps the others as they were, each with its own date.
"""

from __future__ import annotations

import importlib
import platform
import re
import sys
import time
from pathlib import Path

SECTIONS = (
    "ingest",
    "diff",
    "estimate",
    "sweep",
    "preflight",
    "activations",
    "reliability",
    "gguf",
    "netfaults",
    "push",
    "budget",
    "effects",
    "versions",
    "workers",
    "wrk",
    "deliveries",
)
_TRAILER = re.compile(r"^_section `(\w+)` took [^\n]*_$", re.MULTILINE)
_HEADER = "# Benchmark results\n"


def _sections(text: str) -> dict[str, str]:
    """The sections of an existing RESULTS.md by name: each runs from the end of the previous
    section's trailer line (or the first `## ` heading) to its own trailer line."""
    out: dict[str, str] = {}
    start = text.find("\n## ")
    if start < 0:
        return out
    pos = start + 1
    for m in _TRAILER.finditer(text, pos):
        out[m.group(1)] = text[pos : m.end()].strip("\n")
        pos = m.end() + 1
    return out


def main(argv: list[str]) -> int:
    wanted = argv or list(SECTIONS)
    out = Path(__file__).with_name("RESULTS.md")
    sections = _sections(out.read_text()) if out.exists() else {}
    for name in wanted:
        module = importlib.import_module(f"bench.{name}")
        started = time.perf_counter()
        body = module.run().rstrip("\n")
        when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        sections[name] = (
            f"{body}\n\n_section `{name}` took {time.perf_counter() - started:.1f} s on {when}, "
            f"Python {platform.python_version()}, {platform.machine()}_"
        )
    order = [*SECTIONS, *sorted(n for n in sections if n not in SECTIONS)]
    parts = [
        _HEADER,
        "Made by `make bench` (`python -m bench.run`: ingest, diff, estimate, sweep, preflight, "
        "activations, reliability, gguf, netfaults, push, budget, effects, versions, workers, wrk, "
        "deliveries) and `make soak` "
        "(`python -m bench.run soak`); each section says when it was last run. 2 cores.\n",
    ]
    parts += [sections[n] + "\n" for n in order if n in sections]
    out.write_text("\n".join(parts))
    print("\n".join(sections[n] for n in wanted))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
