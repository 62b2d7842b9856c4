"""Units of the replica: git reading (refs fast path vs git, bare and work-tree repos), ranges, pickles."""

from __future__ import annotations

import pickle
import subprocess
from collections import OrderedDict
from pathlib import Path

import pytest
from helpers_replica import T0

from tracker.replica.gitread import GitRepo, parse_lfs_pointer
from tracker.replica.picklescan import classify, scan
from tracker.replica.repos import commit, init_repo
from tracker.replica.responses import parse_range

_ENV = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.invalid",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.invalid",
    "PATH": "/usr/bin:/bin",
}


def _git(cwd: Path, *args: str) -> str:
    out = subprocess.run(
        ["git", *args], cwd=cwd, env=_ENV, check=True, capture_output=True, text=True
    )
    return out.stdout.strip()


def _for_each_ref(repo: GitRepo) -> list[tuple[str, str]]:
    return [(r.ref, r.target) for r in repo._refs_from_git()]


def test_refs_fast_path_agrees_with_git(root: Path) -> None:
    path = init_repo(root, "acme/refs")
    first = commit(path, {"a.txt": b"a\n"}, "one", date=T0)
    second = commit(path, {"a.txt": b"b\n"}, "two", date=T0)
    repo = GitRepo(path)
    _git(path, "update-ref", "refs/tags/light", first)
    _git(path, "update-ref", "refs/pr/1", second)
    _git(path, "tag", "-a", "-m", "annotated", "v1.0", first)  # a tag object, peeled by the replica
    refs = [(r.ref, r.target) for r in repo.refs()]
    assert refs == _for_each_ref(repo)
    assert ("refs/tags/v1.0", first) in refs
    _git(path, "pack-refs", "--all")
    assert not (path / "refs" / "tags" / "v1.0").exists()
    assert [(r.ref, r.target) for r in repo.refs()] == _for_each_ref(repo)
    assert repo._refs_from_files() is not None  # packed refs with ^ lines need no git call
    _git(path, "update-ref", "refs/heads/new", first)  # loose beside packed
    assert [(r.ref, r.target) for r in repo.refs()] == _for_each_ref(repo)
    assert repo.resolve("v1.0") == first
    assert repo.resolve("refs/pr/1") == second
    assert repo.resolve(first) == first
    assert repo.resolve(first[:8]) is None
    assert repo.resolve("main~1") is None


def test_work_tree_repository(tmp_path: Path) -> None:
    path = tmp_path / "root" / "acme" / "plain"
    path.mkdir(parents=True)
    _git(path, "init", "-q", "-b", "main")
    (path / "config.json").write_text("{}\n")
    (path / "sub").mkdir()
    (path / "sub" / "x.txt").write_text("x\n")
    _git(path, "add", ".")
    _git(path, "commit", "-q", "-m", "init\n\nbody")
    repo = GitRepo(path)
    assert repo.git_dir == path / ".git"
    sha = repo.resolve("main")
    assert sha is not None
    assert [(i.path, i.is_dir, i.size) for i in repo.tree(sha)] == [
        ("config.json", False, 3),
        ("sub", True, 0),
        ("sub/x.txt", False, 2),
    ]
    (history,) = repo.commits(sha)
    assert (history.title, history.message, history.author_name) == ("init", "body", "t")
    assert set(repo.last_commits(sha)) == {"config.json", "sub", "sub/x.txt"}


def test_lfs_pointer_parsing() -> None:
    oid = "a" * 64
    text = f"version https://git-lfs.github.com/spec/v1\noid sha256:{oid}\nsize 12345\n".encode()
    pointer = parse_lfs_pointer(text)
    assert pointer is not None and (pointer.oid, pointer.size, pointer.pointer_size) == (
        oid,
        12345,
        130,  # 43 + 76 + 11 bytes
    )
    assert parse_lfs_pointer(text.replace(b"sha256:a", b"sha256:A")) is None
    assert parse_lfs_pointer(text[:-1]) is None
    assert parse_lfs_pointer(b"{}") is None
    assert parse_lfs_pointer(text + b"x" * 2000) is None


@pytest.mark.parametrize(
    ("spec", "size", "expected"),
    [
        ("bytes=0-0", 10, (0, 1)),
        ("bytes=0-", 10, (0, 10)),
        ("bytes=9-20", 10, (9, 10)),
        ("bytes=-3", 10, (7, 10)),
        ("bytes=-30", 10, (0, 10)),
        ("bytes=10-", 10, "unsatisfiable"),
        ("bytes=-0", 10, "unsatisfiable"),
        ("bytes=0-", 0, "unsatisfiable"),
        ("bytes=5-2", 10, None),
        ("bytes=0-1,3-4", 10, None),
        ("items=0-1", 10, None),
        ("bytes=-", 10, None),
    ],
)
def testparse_range(spec: str, size: int, expected: object) -> None:
    assert parse_range(spec, size) == expected


def test_pickle_classification(tmp_path: Path) -> None:
    assert classify("torch._utils", "_rebuild_tensor_v2") == "innocuous"
    assert classify("torch", "BFloat16Storage") == "innocuous"
    assert classify("collections", "OrderedDict") == "innocuous"
    assert classify("builtins", "eval") == "dangerous"
    assert classify("os.path", "join") == "dangerous"
    assert classify("subprocess", "Popen") == "dangerous"
    assert classify("builtins", "set") == "innocuous"
    assert classify("mylib.models", "Net") == "suspicious"
    plain = tmp_path / "state.pkl"
    plain.write_bytes(pickle.dumps(OrderedDict(x=[1, 2]), protocol=0))  # GLOBAL opcode, protocol 0
    expected = {
        "highestSafetyLevel": "innocuous",
        "imports": [{"module": "collections", "name": "OrderedDict", "safety": "innocuous"}],
    }
    assert scan(plain) == expected
    plain.write_bytes(pickle.dumps(OrderedDict(x=[1, 2]), protocol=4))  # STACK_GLOBAL + memo
    assert scan(plain) == expected
    plain.write_bytes(pickle.dumps({"a": 1}, protocol=4))
    assert scan(plain) == {"highestSafetyLevel": "innocuous", "imports": []}
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"\0" * 64)
    assert scan(junk) is None


def test_every_route_names_a_handler_taking_exactly_its_parameters() -> None:
    import inspect
    import re

    from tracker.replica.routes import ROUTES, Routes

    for route in ROUTES:
        handler = getattr(Routes, route.handler)
        params = [p for p in inspect.signature(handler).parameters if p not in ("self", "req")]
        named = [n.partition(":")[0] for n in re.findall(r"\{([^}]+)\}", route.pattern)]
        wanted = [n for n in named if not n.startswith("_")]
        required = [
            p
            for p, v in inspect.signature(handler).parameters.items()
            if p not in ("self", "req") and v.default is inspect.Parameter.empty
        ]
        assert set(required) <= set(wanted) <= set(params), route


@pytest.mark.parametrize(
    ("method", "path", "handler", "params"),
    [
        ("GET", "/api/models/org/name", "model_info_main", {"org": "org", "name": "name"}),
        ("GET", "/api/models/o/n/revision/refs%2Fpr%2F1", "model_info",
         {"org": "o", "name": "n", "rev": "refs/pr/1"}),
        ("GET", "/api/models/o/n/revision/refs/pr/1", "model_info",
         {"org": "o", "name": "n", "rev": "refs/pr/1"}),
        ("GET", "/api/models/o/n/tree/main", "tree",
         {"org": "o", "name": "n", "rev": "main", "path": ""}),
        ("GET", "/api/models/o/n/tree/refs%2Fpr%2F1/sub%2Fdir/x", "tree",
         {"org": "o", "name": "n", "rev": "refs/pr/1", "path": "sub/dir/x"}),
        ("POST", "/api/models/o/n/paths-info/main", "paths_info",
         {"org": "o", "name": "n", "rev": "main"}),
        ("HEAD", "/o%2Fx/n/resolve/main/a%20b.json", "resolve",
         {"org": "o%2Fx", "name": "n", "rev": "main", "path": "a b.json"}),
        ("GET", "/cdn-lfs/o/n/" + "a" * 64, "cdn", {"org": "o", "name": "n", "oid": "a" * 64}),
        ("POST", "/api/spaces/o/n", "not_a_model", {}),
        ("GET", "/api/models/resolve/main/x", "resolve",  # no api route fits: a file URL
         {"org": "api", "name": "models", "rev": "main", "path": "x"}),
        ("POST", "/api/models/o/n", None, None),  # no route: 404
        ("GET", "/api/spaces", None, None),
        ("GET", "/o/n/resolve/main", None, None),
    ],
)  # fmt: skip
def test_route_table_matching(
    method: str, path: str, handler: str | None, params: dict[str, str] | None
) -> None:
    from tracker.replica.routes import ROUTES

    segments = path.split("/")[1:]
    found = next(
        (
            (r.handler, m)
            for r in ROUTES
            if method in r.methods and (m := r.match(segments)) is not None
        ),
        (None, None),
    )
    assert found == (handler, params)
