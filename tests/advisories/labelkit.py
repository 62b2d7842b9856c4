"""The labelled set: the reviewed label table and the real histories it labels (a plain module).

`labels.tsv` (tests/advisories/data) has one row per labelled change or group of changes:
history, commit, artifact, kind, key, rule, severity, why. `history` is `corpus/<dir>` (a
../shared/corpus/histories directory) or `demo/<dir>` (a demo/repos directory) and may be a glob;
`commit` is the first 8 hex digits of the upstream commit (the demo's HISTORY.tsv
`source_commit`, or `synthetic-N`); `key` is a glob. A change takes the first row that matches it.

When upstream brings a change no row labels, the test fails listing draft rows for it:

    .venv/bin/python tests/advisories/labelkit.py [--demo]   # draft rows for unlabelled changes

Review each draft (is the rule right for what the key does?), write its why, and add it.
"""

from __future__ import annotations

import csv
import hashlib
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from tracker.advisories.classify import Classified, Context, classify
from tracker.diff import diff_snapshots
from tracker.shared.domain import Change, RepoId, Sha, Snapshot, TreeEntry

HERE = Path(__file__).resolve().parent
LABELS = HERE / "data" / "labels.tsv"
ROOT = HERE.parents[1]
CORPUS = ROOT.parent / "shared" / "corpus" / "histories"
DEMO = ROOT / "tracker" / "demo_data" / "repos"
COLUMNS = ("history", "commit", "artifact", "kind", "key", "rule", "severity", "why")


@dataclass(frozen=True)
class Label:
    history: str
    commit: str
    artifact: str
    kind: str
    key: str
    rule: str
    severity: str
    why: str

    def matches(self, step: Step, change: Change) -> bool:
        return (
            fnmatchcase(step.history, self.history)
            and fnmatchcase(step.commit, self.commit)
            and change.artifact.value == self.artifact
            and change.kind.value == self.kind
            and fnmatchcase(change.key, self.key)
        )


@dataclass(frozen=True)
class Step:
    """One revision of a history with the one before it."""

    history: str
    commit: str
    before: Snapshot | None
    after: Snapshot


@dataclass(frozen=True)
class Outcome:
    step: Step
    got: Classified
    label: Label | None


def load_labels(path: Path = LABELS) -> list[Label]:
    with path.open(newline="") as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))
    return [Label(**{c: row[c] for c in COLUMNS}) for row in rows]


def _snapshot(name: str, commit: str, files: dict[str, bytes]) -> Snapshot:
    tree = tuple(
        TreeEntry(p, hashlib.sha1(b).hexdigest(), len(b)) for p, b in sorted(files.items())
    )
    sha = hashlib.sha1(f"{name}@{commit}".encode()).hexdigest()
    return Snapshot(RepoId("corpus/" + name.replace("/", "_")), Sha(sha), tree, dict(files))


def _repo_path(path: str) -> str:
    """Where a corpus history's file sits in the repo: llama.cpp's template captures are the
    repo's chat template; aiconfigurator's copies are the repo's config.json."""
    if path.endswith(".jinja"):
        return "chat_template.jinja"
    if path.endswith("_config.json") and "/" in path:
        return "config.json"
    return path


def corpus_steps(corpus: Path = CORPUS) -> Iterator[Step]:
    """Every revision of every corpus history, oldest first, each snapshot holding every file of
    the history at its latest version so far."""
    for directory in sorted(p for p in corpus.iterdir() if p.is_dir()):
        commits: dict[str, tuple[str, list[tuple[str, Path]]]] = {}
        for line in (directory / "HISTORY.tsv").read_text().splitlines():
            if not line:
                continue
            nn, sha, date, _author, _subject, path = line.split("\t")
            found = sorted(directory.glob(f"{nn}_{sha[:8]}_*"))
            if len(found) > 1:
                found = [f for f in found if f.name == f"{nn}_{sha[:8]}_{Path(path).name}"]
            (local,) = found
            commits.setdefault(sha, (date, []))[1].append((_repo_path(path), local))
        files: dict[str, bytes] = {}
        before: Snapshot | None = None
        for sha, (_date, items) in sorted(commits.items(), key=lambda kv: kv[1][0]):
            files = {**files, **{path: local.read_bytes() for path, local in items}}
            after = _snapshot(directory.name, sha, files)
            yield Step(f"corpus/{directory.name}", sha[:8], before, after)
            before = after


def demo_source_commits(demo: Path = DEMO) -> dict[str, list[str]]:
    """demo/repos/<dir> → the upstream commit (8 hex, or synthetic-N) of each replayed commit, in order."""
    out: dict[str, list[str]] = {}
    for directory in sorted(p for p in demo.iterdir() if p.is_dir()):
        with (directory / "HISTORY.tsv").open(newline="") as fh:
            rows = list(csv.DictReader(fh, delimiter="\t"))
        by_seq: dict[int, str] = {}
        for row in rows:
            source = row["source_commit"]
            by_seq[int(row["seq"])] = source if source.startswith("synthetic") else source[:8]
        out[directory.name] = [by_seq[s] for s in sorted(by_seq)]
    return out


def classify_steps(
    steps: Sequence[tuple[Step, Sequence[Change]]], labels: Sequence[Label]
) -> list[Outcome]:
    out: list[Outcome] = []
    for step, changes in steps:
        context = Context(step.before, step.after)
        for change in changes:
            got = classify(change, context=context)
            label = next((lab for lab in labels if lab.matches(step, change)), None)
            out.append(Outcome(step, got, label))
    return out


def with_changes(steps: Sequence[Step]) -> list[tuple[Step, Sequence[Change]]]:
    return [(s, diff_snapshots(s.before, s.after)) for s in steps if s.before is not None]


def mismatches(outcomes: Sequence[Outcome]) -> list[str]:
    """One line per change whose classification differs from its label, or that has none."""
    lines = []
    for o in outcomes:
        c, got = o.got.change, o.got
        where = f"{o.step.history}@{o.step.commit} {c.artifact.value} {c.kind.value} {c.key!r}"
        if o.label is None:
            lines.append(
                f"unlabelled: {where}: classified {got.severity.value} {got.rule}; draft row:\n  {draft(o)}"
            )
        elif (got.rule, got.severity.value) != (o.label.rule, o.label.severity):
            lines.append(
                f"{where}: labelled {o.label.severity} {o.label.rule} ({o.label.why}), "
                f"classified {got.severity.value} {got.rule}: {got.rationale}"
            )
    return lines


def draft(o: Outcome) -> str:
    c = o.got.change
    return "\t".join(
        [
            o.step.history,
            o.step.commit,
            c.artifact.value,
            c.kind.value,
            c.key,
            o.got.rule,
            o.got.severity.value,
            "WHY?",
        ]
    )


def demo_steps(app: Any) -> list[tuple[Step, Sequence[Change]]]:
    """Every analysed revision of the demo's repos in `app` (after a poll cycle) with the changes
    the pipeline stored for it (the diff plus the estimate's delta)."""
    sources = demo_source_commits()
    analysis = app.analysis
    out: list[tuple[Step, Sequence[Change]]] = []
    for watched in app.load_watchlist().repos:
        rid = watched.repo_id
        name = rid.replace("/", "__")
        order = {r.sha: i for i, r in enumerate(app.store.revisions(rid))}
        for diff in analysis.diffs_of(rid):
            before = app.store.snapshot(rid, diff.before) if diff.before else None
            after = app.store.snapshot(rid, diff.after)
            step = Step(f"demo/{name}", sources[name][order[diff.after]], before, after)
            out.append((step, diff.changes))
    return out


def _demo_app_steps() -> list[tuple[Step, Sequence[Change]]]:
    import tempfile
    from datetime import UTC, datetime

    from tracker.app import build
    from tracker.cli.demo import ensure_demo_hub
    from tracker.replica import Replica
    from tracker.replica.demo import DEMO_TOKEN
    from tracker.settings import load_settings

    root = Path(tempfile.mkdtemp())
    ensure_demo_hub(root / "hub")
    with Replica(root / "hub") as hub:
        app = build(
            load_settings(
                state_dir=root / "state",
                watchlist=ROOT / "watchlist.yaml",
                hf_endpoint=hub.url,
                hf_token=DEMO_TOKEN,
            ),
            clock=lambda: datetime(2026, 11, 30, 9, 30, tzinfo=UTC),
        )
        try:
            app.pipeline.run_cycle()
            return demo_steps(app)
        finally:
            app.close()


def main(argv: Sequence[str]) -> int:
    labels = load_labels() if LABELS.exists() else []
    steps = with_changes(list(corpus_steps()))
    if "--demo" in argv:
        steps += _demo_app_steps()
    outcomes = classify_steps(steps, labels)
    rows = [draft(o) for o in outcomes if o.label is None]
    print("\n".join(dict.fromkeys(rows)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
