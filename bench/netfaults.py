"""Network fault trials (issue 10, fault-proxy must-show), run as users meet them: the installed
`tracker poll --once` reading the demo Hub replica through the fault-injecting proxy
(`tracker.replica.faultproxy`).

A trial: an empty SQLite store; one `tracker poll --once` while the proxy breaks answers the way
its faults say (seeded); the faults stop; `tracker poll --once` again until it exits 0 (at most
three times). Then the store must equal a clean run's byte for byte (every file version, blob,
tree, revision, diff, estimate and advisory, by natural keys: `bench.storefaults.snapshot`, with
advisory ids named by what they are about, as ids are numbered in publish order across repos; an
advisory built from a faulty byte and later withdrawn would still be a row there), pass the
store checks (`check_integrity`) and `tracker verify`. The faulty poll must also end in bounded
time: a `429` with `Retry-After: 3600` is not slept through, a trickling body is cut by the stall
detector.

Short form in `make test` (tests/reliability/test_fault_runs.py: one trial with every fault at
once); the long form is `python -m bench.run netfaults` (each fault alone and all at once, several
seeds each), results in bench/RESULTS.md.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.storefaults import (
    SHORT_REPOS,
    TRACKER,
    check_integrity,
    demo_hub,
    snapshot,
)
from tracker.replica import Replica
from tracker.replica.faultproxy import Fault, FaultProxy, Mode

FILES = r"/resolve/|/cdn-lfs/"
BODY_STATUSES = frozenset({200, 206})

FAULTS: dict[str, Callable[[], list[Fault]]] = {
    "lying Content-Length": lambda: [
        Fault(Mode.LYING_LENGTH, path=FILES, probability=0.3, only_status=BODY_STATUSES)
    ],
    "short body": lambda: [
        Fault(Mode.SHORT_BODY, path=FILES, probability=0.3, only_status=BODY_STATUSES)
    ],
    "corrupt bytes, 200": lambda: [
        Fault(Mode.CORRUPT, path=FILES, probability=0.3, only_status=BODY_STATUSES)
    ],
    "malformed JSON": lambda: [
        Fault(
            Mode.MALFORMED_JSON,
            path=r"config\.json|/api/",
            probability=0.3,
            only_status=BODY_STATUSES,
        )
    ],
    "resets": lambda: [Fault(Mode.RESET, probability=0.2)],
    "5xx bursts": lambda: [Fault(Mode.STATUS, status=503, probability=0.3)],
    "429, Retry-After 3600": lambda: [
        Fault(Mode.RATE_LIMIT, path="/api/", retry_after=3600, times=2)
    ],
    "trickle": lambda: [
        Fault(
            Mode.TRICKLE,
            path=r"config\.json",
            times=2,
            chunk=1,
            interval_s=0.3,
            only_status=BODY_STATUSES,
        )
    ],
}
"""Each fault as the long form runs it alone (the short form runs all at once)."""


DOWNLOADS = frozenset({200})
"""Whole-file downloads (a safetensors header's Range answers are 206, checked elsewhere)."""


def content_faults(every: int) -> dict[str, list[Fault]]:
    """Transport faults that look like content (issue 26, item 1), each on every `every`-th file
    download (1: all of them): a `Content-Length` over the 64 MB cap on the true body, an 80 MB
    body, a gzip body that decodes to 100 MB, and a `404` with `X-Error-Code: EntryNotFound` for
    a file the tree lists (headers read by Range included). Before, each was stored as "could not
    read FILE" and published; now each is read again, and a revision whose reads keep failing is
    left pending (not stored, `poll --once` exits 1) for the next poll."""
    return {
        "Content-Length over the cap, true body": [
            Fault(Mode.LONG_LENGTH, path=FILES, method="GET", only_status=DOWNLOADS,
                  size=100_000_000, every=every)
        ],
        "80 MB body": [
            Fault(Mode.HUGE_BODY, path=FILES, method="GET", only_status=DOWNLOADS,
                  size=80_000_000, every=every)
        ],
        "gzip body expanding past the cap": [
            Fault(Mode.GZIP_BOMB, path=FILES, method="GET", only_status=DOWNLOADS,
                  size=100_000_000, every=every)
        ],
        "404 EntryNotFound for a listed file": [
            Fault(Mode.STATUS, status=404, path=r"/resolve/", method="GET", every=every,
                  headers={"X-Error-Code": "EntryNotFound", "X-Error-Message": "Entry not found"})
        ],
    }  # fmt: skip


def all_at_once() -> list[Fault]:
    """Every mode together, each drawn less often (the short form's trial)."""
    return [
        Fault(Mode.CORRUPT, path=FILES, probability=0.15, only_status=BODY_STATUSES),
        Fault(Mode.LYING_LENGTH, path=FILES, probability=0.1, only_status=BODY_STATUSES),
        Fault(Mode.SHORT_BODY, path=FILES, probability=0.1, only_status=BODY_STATUSES),
        Fault(Mode.MALFORMED_JSON, path=r"config\.json|/api/", probability=0.1,
              only_status=BODY_STATUSES),
        Fault(Mode.RESET, probability=0.05),
        Fault(Mode.STATUS, status=502, probability=0.05),
        Fault(Mode.RATE_LIMIT, path="/api/", retry_after=3600, times=1, probability=0.2),
        Fault(Mode.TRICKLE, path=r"config\.json", times=1, chunk=1, interval_s=0.3,
              only_status=BODY_STATUSES),
    ]  # fmt: skip


@dataclass
class FaultResult:
    name: str
    seed: int
    applied: dict[str, int]
    faulty_exit: int
    faulty_seconds: float
    recovery_polls: int
    equal: bool
    problems: list[str] = field(default_factory=list)
    verify_exit: int = 0
    differs: list[str] = field(default_factory=list)
    pending: dict[str, str] = field(default_factory=dict)
    """After the faulty poll: each repo `tracker watch list --json` shows failing, with its error
    (its revisions from the first one that could not be verified are pending)."""
    verify_faulty: str = ""
    """`tracker verify`'s output after the faulty poll (what was stored must match its trees)."""
    verify_faulty_exit: int = 0

    @property
    def ok(self) -> bool:
        return self.equal and not self.problems and self.verify_exit == 0


def env_for(url: str, endpoint: str, watchlist: Path, state: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACKER_", "HF_"))}
    env.update(
        TRACKER_STATE_DIR=str(state),
        TRACKER_DATABASE_URL=url,
        TRACKER_WATCHLIST=str(watchlist),
        TRACKER_HF_ENDPOINT=endpoint,
        TRACKER_HTTP_TIMEOUT_S="2",
        TRACKER_RETRY_ATTEMPTS="3",
        HF_HOME=str(state / "hf-home"),
        HF_HUB_DISABLE_XET="1",
        HF_HUB_DISABLE_TELEMETRY="1",
    )
    return env


def tracker_run(
    env: dict[str, str], *args: str, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(TRACKER), *args], env=env, capture_output=True, text=True, timeout=timeout,
        check=False,
    )  # fmt: skip


def clean_reference(workdir: Path, hub: Replica, watchlist: Path) -> dict[str, Any]:
    """A clean `tracker poll --once` through a proxy that breaks nothing: its store snapshot."""
    url = f"sqlite:///{workdir / f'clean-{uuid.uuid4().hex[:6]}' / 'tracker.db'}"
    with FaultProxy(hub.url, seed=0) as proxy:
        env = env_for(url, proxy.url, watchlist, workdir / "clean-state")
        done = tracker_run(env, "poll", "--once", "--json")
    if done.returncode != 0:
        raise RuntimeError(f"clean run failed ({done.returncode}): {done.stderr[-1500:]}")
    return snapshot(url)


_ID = re.compile(r"x_[A-Z][A-Z0-9]{1,15}-\d{4}-\d+\b")


def by_natural_key(snap: dict[str, Any]) -> dict[str, Any]:
    """`snap` with every advisory id replaced by what it names (repo, introducing commit, group).

    Ids are numbered in publish order across repos: a repo that failed while a fault lasted
    publishes after the others, so the same advisories get other numbers; everything else about
    them (records, versions, severity, state) must be equal."""
    names = {row[1]: f"{row[0]}@{row[2]}:{row[3]}" for row in snap.get("advisories", [])}
    text = _ID.sub(lambda m: names.get(m.group(0), m.group(0)), json.dumps(snap, default=str))
    out: dict[str, Any] = json.loads(text)
    return {
        k: sorted(rows, key=lambda r: json.dumps(r, sort_keys=True, default=str))
        for k, rows in out.items()
    }


def fault_trial(
    name: str,
    faults: Sequence[Fault],
    seed: int,
    workdir: Path,
    hub: Replica,
    watchlist: Path,
    reference: dict[str, Any],
    *,
    inspect: bool = False,
) -> FaultResult:
    """One trial (see the module docstring). `inspect`: after the faulty poll, also read what
    `tracker watch list --json` shows pending and what `tracker verify` says of the store."""
    url = f"sqlite:///{workdir / f'store-{uuid.uuid4().hex[:8]}' / 'tracker.db'}"
    state = workdir / f"state-{uuid.uuid4().hex[:8]}"
    with FaultProxy(hub.url, seed=seed) as proxy:
        env = env_for(url, proxy.url, watchlist, state)
        for fault in faults:
            proxy.add(fault)
        started = time.monotonic()
        faulty = tracker_run(env, "poll", "--once", "--json")
        seconds = time.monotonic() - started
        applied = {str(k): v for k, v in sorted(proxy.applied().items())}
        proxy.clear()
        pending: dict[str, str] = {}
        verify_faulty: subprocess.CompletedProcess[str] | None = None
        if inspect:
            listed = json.loads(tracker_run(env, "watch", "list", "--json").stdout)
            pending = {
                row["repo"]: row["last_error"] or "" for row in listed if row["status"] == "failing"
            }
            verify_faulty = tracker_run(env, "verify")
        polls = 0
        for polls in range(1, 4):  # noqa: B007 - the count is reported
            if tracker_run(env, "poll", "--once", "--json").returncode == 0:
                break
        verify = tracker_run(env, "verify")
    got, want = by_natural_key(snapshot(url)), by_natural_key(reference)
    differs = [k for k in want if got.get(k) != want[k]]
    return FaultResult(
        name=name,
        seed=seed,
        applied=applied,
        faulty_exit=faulty.returncode,
        faulty_seconds=seconds,
        recovery_polls=polls,
        equal=not differs,
        problems=check_integrity(url),
        verify_exit=verify.returncode,
        differs=differs,
        pending=pending,
        verify_faulty="" if verify_faulty is None else verify_faulty.stdout + verify_faulty.stderr,
        verify_faulty_exit=0 if verify_faulty is None else verify_faulty.returncode,
    )


@contextmanager
def setting(
    repos: Sequence[str] = SHORT_REPOS,
) -> Iterator[tuple[Path, Replica, Path, dict[str, Any]]]:
    """A work dir, the demo hub of `repos`, its watchlist, and the clean reference snapshot."""
    with tempfile.TemporaryDirectory(prefix="tracker-netfaults-") as tmp:
        workdir = Path(tmp)
        with demo_hub(workdir, repos) as (hub, watchlist):
            yield workdir, hub, watchlist, clean_reference(workdir, hub, watchlist)


SEEDS = (1, 2)


def run_bench() -> str:
    lines = [
        "## Network faults (`make bench`, `python -m bench.run netfaults`)",
        "",
        "The installed `tracker poll --once` reads two demo repos (granite-3.1-1b-a400m-instruct, "
        "Qwen-7B-Chat: 9 revisions) through the fault proxy; then the faults stop and it polls "
        "again until it exits 0. 'equal' means the store (files, blobs, trees, revisions, diffs, "
        "estimates, advisories, by natural keys) equals a clean run's; 'verify' is `tracker "
        "verify`'s exit code; the faulty poll's wall time shows no Retry-After was slept through "
        "and trickles were cut (HTTP timeout 2 s, 3 attempts).",
        "",
        "| fault | seed | faults applied | faulty poll exit | faulty poll s | polls to recover "
        "| equal to clean run | integrity / verify |",
        "|---|---:|---|---:|---:|---:|---|---|",
    ]
    trials = [(name, make) for name, make in FAULTS.items()]
    trials.append(("all at once", all_at_once))
    failures = 0
    with setting() as (workdir, hub, watchlist, reference):
        for name, make in trials:
            for seed in SEEDS:
                r = fault_trial(name, make(), seed, workdir, hub, watchlist, reference)
                failures += not r.ok
                applied = ", ".join(f"{k} {v}" for k, v in r.applied.items()) or "none drawn"
                checks = "pass" if not r.problems else "; ".join(r.problems[:2])
                lines.append(
                    f"| {name} | {seed} | {applied} | {r.faulty_exit} | {r.faulty_seconds:.1f} "
                    f"| {r.recovery_polls} | {'yes' if r.equal else 'NO: ' + ', '.join(r.differs)} "
                    f"| {checks} / {r.verify_exit} |"
                )
                print(json.dumps(r.__dict__), flush=True)
    lines += ["", f"**{len(trials) * len(SEEDS)} trials, {failures} failed.**"]
    return "\n".join(lines) + "\n"


def run() -> str:  # bench.run's entry point
    return run_bench()
