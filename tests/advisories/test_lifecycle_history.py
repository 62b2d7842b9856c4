"""The lifecycle re-derived from the repo's history (issue 24, part 4), through the installed
`tracker` over small local git histories the Hub replica serves:

- fix → reopen (a force-push drops the fix) → re-fix (a push brings it back) ends fixed at the
  fixing commit, with `versions` exactly the revisions where the changed value holds (the commit
  of the forced line is gone from it);
- over random walks of one generation default (hypothesis), no advisory is ever marked fixed at
  a commit where the value is not the one before its introducing commit, and each advisory's
  `versions` is exactly the run of commits from its introducing one where that holds;
- the same over random walks with force-pushes between polls (resets that drop commits, pushes
  that bring an old head back): checked on the ref's line after the last poll, where a fix on a
  line a push brought back must hold again (it did not when a second fix had been made and
  removed in between: only the last removed fix was remembered).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tracker.replica import Replica
from tracker.replica.repos import commit, init_repo, set_ref
from tracker.replica.stgen import encode_header

pytestmark = [pytest.mark.replica, pytest.mark.slow]

TRACKER = Path(sys.executable).with_name("tracker")
CONFIG = (Path(__file__).parents[1] / "data" / "configs" / "Qwen__Qwen2.5-1.5B.json").read_bytes()
WEIGHTS = encode_header([], {"format": "pt"})[0]
RID = "acme/walk"
DAY = datetime(2025, 3, 1, 9, 30, tzinfo=UTC)


def _gen(temperature: float) -> bytes:
    return json.dumps({"do_sample": True, "temperature": temperature, "top_p": 0.8}).encode()


def _env(url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACKER_", "HF_"))}
    env["TRACKER_HF_ENDPOINT"] = url
    return env


def _poll_and_export(root: Path, env: dict[str, str], n: int) -> dict[str, dict[str, Any]]:
    """`tracker poll --once`, then `tracker advisories export`: the records by id."""
    for args in (["poll", "--once"], ["advisories", "export", str(root / f"export-{n}")]):
        done = subprocess.run([str(TRACKER), *args], cwd=root, env=env, capture_output=True,
                              text=True, timeout=300)  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
    out = {}
    for path in sorted((root / f"export-{n}").glob("*.json")):
        record = json.loads(path.read_text())
        out[record["id"]] = record
    return out


def _generation(records: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        r
        for r in records.values()
        if r["database_specific"]["group"] == "generation_config" and not r.get("withdrawn")
    ]


def test_fix_reopen_refix_ends_fixed_with_exact_versions(tmp_path: Path) -> None:
    hub = tmp_path / "hub"
    repo = init_repo(hub, RID)
    commit(repo, {"config.json": CONFIG, "generation_config.json": _gen(0.7),
                  "model.safetensors": WEIGHTS}, "upload", date=DAY)  # fmt: skip
    b = commit(repo, {"generation_config.json": _gen(0.9)}, "warmer", date=DAY + timedelta(1))
    c = commit(repo, {"generation_config.json": _gen(0.7)}, "revert", date=DAY + timedelta(2))
    (tmp_path / "watchlist.yaml").write_text(f"repos:\n  - id: {RID}\n")
    with Replica(hub) as replica:
        env = _env(replica.url)
        (adv,) = _generation(_poll_and_export(tmp_path, env, 1))
        assert adv["affected"][0]["ranges"][0]["events"] == [{"introduced": b}, {"fixed": c}]
        assert adv["affected"][0]["versions"] == [b]
        # a force-push drops the fix and adds a commit on top of b: open again, at both
        set_ref(repo, "main", b)
        c2 = commit(repo, {"README.md": b"forced\n"}, "forced line", date=DAY + timedelta(3))
        reopened = _poll_and_export(tmp_path, env, 2)[adv["id"]]
        assert reopened["affected"][0]["ranges"][0]["events"] == [{"introduced": b}]
        assert reopened["affected"][0]["versions"] == [b, c2]
        assert reopened["database_specific"]["was_fixed"] == c
        # the old head is pushed back: c fixes it again, and c2 (off the ref) leaves versions
        set_ref(repo, "main", c)
        refixed = _poll_and_export(tmp_path, env, 3)[adv["id"]]
        assert refixed["affected"][0]["ranges"][0]["events"] == [{"introduced": b}, {"fixed": c}]
        assert refixed["affected"][0]["versions"] == [b]
        assert refixed["database_specific"]["fixed"] == c
        assert "was_fixed" not in refixed["database_specific"]
        assert refixed["database_specific"]["refixed_reason"] == (
            f"fixing commit {c} is on the ref again"
        )
        assert "## What to do\n\nUpgrade to the fixing revision" in refixed["details"]
        # and polling again changes nothing
        assert _poll_and_export(tmp_path, env, 4)[adv["id"]] == refixed


VALUES = (0.6, 0.7, 0.9)


def _expected(walk: list[float]) -> dict[int, tuple[int | None, list[int]]]:
    """By introducing step: (fixing step or None, the steps in versions). A step changes the value
    from walk[k-1] to walk[k]; it is fixed at the first later step whose value is walk[k-1] again.
    A change that directly undoes an advisory open since the step before it (its before is that
    advisory's after, its after that advisory's before) is that advisory's fix, not an advisory."""
    out: dict[int, tuple[int | None, list[int]]] = {}
    open_: dict[int, tuple[float, float]] = {}  # introducing step -> (before, after)
    for k in range(1, len(walk)):
        if walk[k] == walk[k - 1]:
            continue
        fixed_here = [i for i, (before, _after) in open_.items() if walk[k] == before]
        undone = any(open_[i] == (walk[k], walk[k - 1]) for i in fixed_here)
        for i in fixed_here:
            del open_[i]
        if not undone:
            open_[k] = (walk[k - 1], walk[k])
            out[k] = (None, [])
    for k in out:
        j = next((j for j in range(k + 1, len(walk)) if walk[j] == walk[k - 1]), None)
        out[k] = (j, list(range(k, j if j is not None else len(walk))))
    return out


WALKS = st.lists(st.sampled_from(VALUES), min_size=3, max_size=7)


@settings(max_examples=1, deadline=None, derandomize=True)
@given(WALKS)
@example([0.7, 0.9, 0.6, 0.7, 0.9, 0.9, 0.7])  # a restore from a third value, a re-break
def test_random_walks_of_one_value_are_fixed_only_where_the_value_is_back(
    walk: list[float],
) -> None:
    _walk(walk)


@pytest.mark.soak
@settings(max_examples=25, deadline=None, derandomize=True)
@given(WALKS)
def test_random_walks_long_form(walk: list[float]) -> None:
    """The same property over 25 walks (`make soak`); `make test` runs one and the example."""
    _walk(walk)


def _walk(walk: list[float]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        repo = init_repo(root / "hub", RID)
        first = {
            "config.json": CONFIG,
            "generation_config.json": _gen(walk[0]),
            "model.safetensors": WEIGHTS,
        }
        shas = [commit(repo, first, "upload", date=DAY)]
        for k, value in enumerate(walk[1:], start=1):
            files: dict[str, bytes | None] = (
                {"generation_config.json": _gen(value)}
                if value != walk[k - 1]
                else {"notes.txt": f"step {k}\n".encode()}  # a commit that keeps the value
            )
            shas.append(commit(repo, files, f"step {k}", date=DAY + timedelta(k)))
        (root / "watchlist.yaml").write_text(f"repos:\n  - id: {RID}\n")
        with Replica(root / "hub") as replica:
            records = _generation(_poll_and_export(root, _env(replica.url), 1))
    got = {}
    for r in records:
        events = r["affected"][0]["ranges"][0]["events"]
        k = shas.index(events[0]["introduced"])
        fixed = [shas.index(e["fixed"]) for e in events[1:]]
        assert len(fixed) <= 1
        got[k] = (
            fixed[0] if fixed else None,
            [shas.index(v) for v in r["affected"][0]["versions"]],
        )
        for j in fixed:  # never fixed where the value is not the one before the introducing step
            assert walk[j] == walk[k - 1], (walk, k, j)
    assert got == _expected(walk), walk


# --- random force-pushes ------------------------------------------------------------------------

Op = tuple[str, int]
"""("set", i): a commit setting VALUES[i] (a commit that keeps the value when it is the head's);
("poll", _): `tracker poll --once`; ("reset", i): a force-push of the ref back to the revision at
index i of its line (modulo, never the head: the revisions after it leave the ref); ("back", i):
a push of the i-th head a force-push left (modulo) back onto the ref (its line returns)."""

OPS = st.lists(
    st.one_of(
        st.tuples(st.just("set"), st.integers(0, len(VALUES) - 1)),
        st.tuples(st.sampled_from(["poll", "reset", "back"]), st.integers(0, 7)),
    ),
    min_size=4,
    max_size=10,
)
MAX_POLLS = 3
"""Polls in a walk before its last one (each is a `tracker poll --once`: seconds); more are skipped."""

# fix at j; a force-push drops j and a commit j2 fixes it again; j is pushed back (j2 leaves):
# fixed at j again, versions [k]. Then a reset to k and a commit that re-breaks with a third value.
REFIX_BACK: list[Op] = [("set", 2), ("set", 1), ("poll", 0), ("reset", 1), ("set", 1), ("poll", 0),
                        ("back", 0), ("poll", 0), ("set", 0)]  # fmt: skip


@settings(max_examples=1, deadline=None, derandomize=True)
@given(first=st.integers(0, len(VALUES) - 1), ops=OPS)
@example(first=1, ops=REFIX_BACK)
def test_random_force_pushes_never_fix_where_the_value_is_not_back(
    first: int, ops: list[Op]
) -> None:
    """Over random walks of one value with force-pushes between polls (a reset that drops the
    fixing commit reopens, a push of the old head back restores): after the last poll every live
    advisory is fixed at exactly the first revision of the ref's line where the value is back to
    the one before its introducing commit (never at one that re-breaks it), its versions are
    exactly the line's revisions from its introducing commit up to that fix, every change of the
    value on the line is an advisory or a fix, and advisories introduced off the line are
    withdrawn."""
    _force_walk(first, ops)


@pytest.mark.soak
@settings(max_examples=20, deadline=None, derandomize=True)
@given(first=st.integers(0, len(VALUES) - 1), ops=OPS)
def test_random_force_pushes_long_form(first: int, ops: list[Op]) -> None:
    """The same property over 20 walks (`make soak`); `make test` runs one and the example."""
    _force_walk(first, ops)


def _poll(root: Path, env: dict[str, str]) -> None:
    done = subprocess.run([str(TRACKER), "poll", "--once"], cwd=root, env=env,
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]


def _force_walk(first: int, ops: list[Op]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        repo = init_repo(root / "hub", RID)
        files = {
            "config.json": CONFIG,
            "generation_config.json": _gen(VALUES[first]),
            "model.safetensors": WEIGHTS,
        }
        line: tuple[str, ...] = (commit(repo, files, "upload", date=DAY),)
        value = {line[0]: VALUES[first]}
        lines = {line[0]: line}  # each commit's first-parent line, oldest first
        left: list[str] = []  # heads a force-push moved the ref away from
        (root / "watchlist.yaml").write_text(f"repos:\n  - id: {RID}\n")
        with Replica(root / "hub") as replica:
            env = _env(replica.url)
            polls = 0
            for k, (op, arg) in enumerate(ops, start=1):
                if op == "set":
                    v = VALUES[arg]
                    change: dict[str, bytes | None] = (
                        {"generation_config.json": _gen(v)}
                        if v != value[line[-1]]
                        else {"notes.txt": f"step {k}\n".encode()}
                    )
                    sha = commit(repo, change, f"step {k}", date=DAY + timedelta(k))
                    value[sha], line = v, (*line, sha)
                    lines[sha] = line
                elif op == "poll" and polls < MAX_POLLS:
                    _poll(root, env)
                    polls += 1
                elif op == "reset" and len(line) > 1:
                    left.append(line[-1])
                    line = line[: arg % (len(line) - 1) + 1]
                    set_ref(repo, "main", line[-1])
                elif op == "back" and (heads := [h for h in left if h != line[-1]]):
                    left.append(line[-1])
                    line = lines[heads[arg % len(heads)]]
                    set_ref(repo, "main", line[-1])
            records = _poll_and_export(root, env, 1)
    _check_line(records, line, value)


def _check_line(
    records: dict[str, dict[str, Any]], line: tuple[str, ...], value: dict[str, float]
) -> None:
    """The property of `test_random_force_pushes_never_fix_where_the_value_is_not_back` for the
    ref's final `line` (oldest first) and each commit's `value`."""
    at = {sha: i for i, sha in enumerate(line)}
    fixes: dict[str, str | None] = {}  # introducing commit -> fixing commit, of live advisories
    for r in records.values():
        if r["database_specific"]["group"] != "generation_config":
            continue
        events = r["affected"][0]["ranges"][0]["events"]
        k = events[0]["introduced"]
        if r.get("withdrawn"):
            assert k not in at, (r["id"], "withdrawn although its commit is on the ref")
            continue
        assert k in at and at[k] > 0, (r["id"], "live although its commit left the ref")
        assert k not in fixes, (r["id"], "two advisories of one change")
        before = value[line[at[k] - 1]]
        assert value[k] != before
        fix = next((s for s in line[at[k] + 1 :] if value[s] == before), None)
        assert [e["fixed"] for e in events[1:]] == ([fix] if fix else []), (r["id"], before)
        end = at[fix] if fix else len(line)
        assert r["affected"][0]["versions"] == list(line[at[k] : end]), r["id"]
        fixes[k] = fix
    moved = {s for i, s in enumerate(line[1:], start=1) if value[s] != value[line[i - 1]]}
    assert moved == set(fixes) | {f for f in fixes.values() if f is not None}


_T1 = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
_T2 = (
    "{% for m in messages %}{% if m['role'] == 'system' %}<|system|>{{ m['content'] }}\n"
    "{% endif %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
_T3 = "{# reverted by hand #}" + _T1  # another source, the same prompts


def _template(source: str) -> bytes:
    return json.dumps({"chat_template": source, "eos_token": "</s>"}).encode()


def test_a_revert_that_renders_identically_fixes_the_template_regression(tmp_path: Path) -> None:
    """A template that renders the system message twice, then a revert written differently (a
    Jinja comment added) that renders every canonical conversation as before: fixed there, with
    the texts saying how; before, its source entry kept it open forever (issue 24)."""
    hub = tmp_path / "hub"
    repo = init_repo(hub, RID)
    first = {"config.json": CONFIG, "tokenizer_config.json": _template(_T1),
             "model.safetensors": WEIGHTS}  # fmt: skip
    commit(repo, first, "upload", date=DAY)
    b = commit(repo, {"tokenizer_config.json": _template(_T2)}, "system", date=DAY + timedelta(1))
    c = commit(repo, {"tokenizer_config.json": _template(_T3)}, "revert", date=DAY + timedelta(2))
    (tmp_path / "watchlist.yaml").write_text(f"repos:\n  - id: {RID}\n")
    with Replica(hub) as replica:
        records = _poll_and_export(tmp_path, _env(replica.url), 1)
    (adv,) = [r for r in records.values() if r["affected"][0]["ranges"][0]["events"][0]
              == {"introduced": b}]  # fmt: skip
    assert adv["database_specific"]["group"] == "chat_template"
    assert "**Kind: a regression**" in adv["details"]
    assert adv["affected"][0]["ranges"][0]["events"] == [{"introduced": b}, {"fixed": c}]
    assert adv["affected"][0]["versions"] == [b]
    assert adv["database_specific"]["fixed_how"] == "rendered"
    assert (
        "its chat template renders every conversation this advisory is about as before "
        "(its source text differs)" in adv["details"]
    )
