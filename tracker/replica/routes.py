"""The replica's Hub endpoints: map a request to a `Response` (routing, access rules, errors, ranges).

Routing works on the raw (still percent-encoded) path, one segment at a time, so `refs%2Fpr%2F1`
and `sub%2Fdir` are never split (HUB-PROTOCOL.md §14.14). Errors always carry `X-Error-Code`, which
an http:// replica needs for the client to raise its typed errors (§10, §14.1).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlencode

from tracker.replica import hubjson
from tracker.replica.gitread import GitRepo, stream_file
from tracker.replica.responses import (
    HubError,
    Request,
    Response,
    content_type,
    decode_cursor,
    disposition,
    encode_cursor,
    int_param,
    json_response,
    next_link,
    ranged,
)
from tracker.shared.domain import parse_repo_id
from tracker.shared.errors import InvalidRepoIdError

COMMITS_PER_PAGE = 50
TREE_PER_PAGE = 1000
TREE_PER_PAGE_EXPANDED = 50
_BAD_CREDENTIALS = "Invalid credentials in Authorization header"


@dataclass(frozen=True)
class Route:
    """One endpoint: the HTTP methods it answers, a path pattern and the `Routes` method to call.

    A pattern is `/`-separated; each part is a literal segment, `{name}` (one raw, still
    percent-encoded segment), `{name:seg}` (one segment, percent-decoded), `{name:a|b|c}` (one of
    these literal segments), `{name:path}` (one or more remaining segments, each percent-decoded,
    joined by `/`) or `{name:path?}` (zero or more). The handler gets the named parts as keyword
    arguments (names starting with `_` are matched but not passed).
    """

    methods: frozenset[str]
    pattern: str
    handler: str

    def match(self, segments: Sequence[str]) -> dict[str, str] | None:
        """The handler's arguments when `segments` fit the pattern, else None (methods aside)."""
        params: dict[str, str] = {}
        parts = self.pattern.split("/")
        for i, part in enumerate(parts):
            name, _, kind = part[1:-1].partition(":") if part.startswith("{") else ("", "", "")
            if kind in ("path", "path?"):
                rest = segments[i:]
                if kind == "path" and not rest:
                    return None
                params[name] = "/".join(unquote(s) for s in rest)
                break
            if i >= len(segments):
                return None
            seg = segments[i]
            if not name:
                if seg != part:
                    return None
            elif kind == "seg":
                params[name] = unquote(seg)
            elif kind:
                if seg not in kind.split("|"):
                    return None
                params[name] = seg
            else:
                params[name] = seg
        else:
            if len(segments) != len(parts):
                return None
        return {k: v for k, v in params.items() if not k.startswith("_")}


def _route(methods: str, pattern: str, handler: str) -> Route:
    return Route(frozenset(methods.split()), pattern, handler)


ANY = "GET HEAD POST PUT PATCH DELETE OPTIONS"
ROUTES: tuple[Route, ...] = (
    _route(ANY, "api/agent-harnesses", "agent_harnesses"),
    _route(ANY, "api/{_kind:datasets|spaces|kernels}/{_rest:path}", "not_a_model"),
    _route("GET", "api/models/{org}/{name}", "model_info_main"),
    # Revisions are one encoded segment (refs%2Fpr%2F1); an unencoded refs/pr/1 works too.
    _route("GET", "api/models/{org}/{name}/revision/{rev:path}", "model_info"),
    _route("GET", "api/models/{org}/{name}/refs", "refs"),
    _route("GET", "api/models/{org}/{name}/commits/{rev:path}", "commits"),
    _route("GET", "api/models/{org}/{name}/tree/{rev:seg}/{path:path?}", "tree"),
    _route("POST", "api/models/{org}/{name}/paths-info/{rev:path}", "paths_info"),
    _route(
        "GET", "api/models/{org}/{name}/safetensors-metadata/{path:path}", "safetensors_metadata"
    ),
    _route("GET HEAD", "{org}/{name}/resolve/{rev:seg}/{path:path}", "resolve"),
    _route("GET HEAD", "cdn-lfs/{org}/{name}/{oid}", "cdn"),
)
"""Every endpoint, tried in order; the first whose methods and pattern fit answers (else 404)."""


class Routes:
    """Every endpoint, over the repositories under `root`; `repo_for(path)` gives the cached GitRepo."""

    def __init__(self, root: Path, repo_for: Callable[[Path], GitRepo], secret: bytes) -> None:
        self.root = root
        self.repo_for = repo_for
        self.secret = secret
        self._tokens_cache: tuple[float, dict[str, set[str]]] | None = None

    # -- dispatch ---------------------------------------------------------------------------

    def handle(self, req: Request) -> Response:
        """Answer `req`; never raises for bad input (HubError becomes its response)."""
        try:
            return self._dispatch(req)
        except HubError as exc:
            return exc.response()

    def _dispatch(self, req: Request) -> Response:
        segments = req.path.split("/")[1:]
        for route in ROUTES:
            if req.method not in route.methods:
                continue
            params = route.match(segments)
            if params is not None:
                handler: Callable[..., Response] = getattr(self, route.handler)
                return handler(req, **params)
        raise HubError(404, "Not Found")

    @staticmethod
    def agent_harnesses(req: Request) -> Response:
        return json_response({"standardEnvVars": [], "harnesses": {}})

    @staticmethod
    def not_a_model(req: Request) -> Response:
        raise HubError(404, "Repository not found", "RepoNotFound")

    # -- access -----------------------------------------------------------------------------

    def _tokens(self) -> dict[str, set[str]]:
        path = self.root / ".replica-tokens.json"
        try:
            mtime = path.stat().st_mtime
        except OSError:
            return {}
        if self._tokens_cache and self._tokens_cache[0] == mtime:
            return self._tokens_cache[1]
        try:
            raw = json.loads(path.read_text())
            tokens = {str(t): {str(r) for r in repos} for t, repos in raw.items()}
        except (OSError, ValueError, AttributeError, TypeError):
            tokens = {}
        self._tokens_cache = (mtime, tokens)
        return tokens

    def _open(
        self, req: Request, org_raw: str, name_raw: str, files: bool
    ) -> tuple[GitRepo, str, dict[str, Any]]:
        """Validate the repo id, apply private/gated rules; return (repo, repo_id, settings).

        `files`: the request reads content (commits, file bytes), which gating protects.
        """
        try:
            repo_id = parse_repo_id(f"{unquote(org_raw)}/{unquote(name_raw)}")
        except InvalidRepoIdError as exc:
            raise HubError(400, f"Invalid repo id: {exc}") from None
        org, name = repo_id.split("/")
        token = req.token()
        tokens = self._tokens()
        if token is not None and token not in tokens:
            raise HubError(401, _BAD_CREDENTIALS)
        granted = token is not None and (repo_id in tokens[token] or "*" in tokens[token])
        path = self.root / org / name
        settings = self._settings(self.root / org / f"{name}.replica.json")
        exists = path.is_dir() and ((path / ".git").exists() or (path / "HEAD").is_file())
        if not exists or (settings.get("private") and not granted):
            if token is None:
                raise HubError(
                    401,
                    "Invalid username or password.",
                    "RepoNotFound",
                    {"WWW-Authenticate": 'Bearer realm="Authentication required", charset="UTF-8"'},
                )
            raise HubError(404, "Repository not found", "RepoNotFound")
        gated = settings.get("gated")
        if files and gated in ("auto", "manual") and not granted:
            if token is None:
                raise HubError(
                    401,
                    f"Access to model {repo_id} is restricted. You must have access to it and be "
                    "authenticated to access it. Please log in.",
                    "GatedRepo",
                )
            raise HubError(
                403,
                f"Access to model {repo_id} is restricted and you are not in the authorized list. "
                f"Visit {req.base_url}/{repo_id} to ask for access.",
                "GatedRepo",
            )
        return self.repo_for(path), repo_id, settings

    @staticmethod
    def _settings(path: Path) -> dict[str, Any]:
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    @staticmethod
    def _revision(repo: GitRepo, rev: str) -> str:
        sha = repo.resolve(rev) if rev and not rev.startswith("-") else None
        if sha is None:
            raise HubError(404, f"Invalid rev id: {rev}", "RevisionNotFound")
        return sha

    # -- JSON API ---------------------------------------------------------------------------

    def model_info_main(self, req: Request, org: str, name: str) -> Response:
        return self.model_info(req, org, name, "main", default=True)

    def model_info(
        self, req: Request, org: str, name: str, rev: str, default: bool = False
    ) -> Response:
        repo, repo_id, settings = self._open(req, org, name, files=False)
        if default:
            head = next((r for r in repo.refs() if r.ref == "refs/heads/main"), None)
            if head is None:
                raise HubError(404, f"Invalid rev id: {rev}", "RevisionNotFound")
            sha = head.target
        else:
            sha = self._revision(repo, rev)
        expand = req.query.get("expand", []) + req.query.get("expand[]", [])
        unknown = [e for e in expand if e not in hubjson.MODEL_INFO_FIELDS]
        if unknown:
            raise HubError(400, f"Invalid expand parameter(s): {', '.join(unknown)}")
        body = hubjson.model_info_json(
            repo,
            repo_id,
            sha,
            settings,
            blobs=req.flag("blobs"),
            security=req.flag("securityStatus"),
            expand=expand or None,
        )
        return json_response(body)

    def refs(self, req: Request, org: str, name: str) -> Response:
        repo, _, _ = self._open(req, org, name, files=False)
        return json_response(hubjson.refs_json(repo.refs(), req.flag("include_prs")))

    def commits(self, req: Request, org: str, name: str, rev: str) -> Response:
        repo, _, _ = self._open(req, org, name, files=True)
        sha = self._revision(repo, rev)
        page = int_param(req, "p", 0, 0, 1_000_000)
        limit = int_param(req, "limit", COMMITS_PER_PAGE, 1, 1000)
        history = repo.commits(sha)
        formatted = "formatted" in req.query.get("expand[]", []) + req.query.get("expand", [])
        chunk = history[page * limit : (page + 1) * limit]
        headers = {"X-Total-Count": str(len(history))}
        if (page + 1) * limit < len(history):
            headers["Link"] = next_link(req, {"p": str(page + 1), "limit": str(limit)})
        return json_response([hubjson.commit_json(c, formatted) for c in chunk], headers)

    def tree(self, req: Request, org: str, name: str, rev: str, path: str) -> Response:
        path = path.strip("/")
        repo, _, _ = self._open(req, org, name, files=False)
        sha = self._revision(repo, rev)
        items = repo.tree(sha)
        if path:
            target = next((i for i in items if i.path == path), None)
            if target is None or not target.is_dir:
                raise HubError(404, f'{path} does not exist on "{rev}"', "EntryNotFound")
            prefix = path + "/"
            items = [i for i in items if i.path.startswith(prefix)]
        else:
            prefix = ""
        if not req.flag("recursive"):
            items = [i for i in items if "/" not in i.path[len(prefix) :]]
        expand = req.flag("expand")
        default_limit = TREE_PER_PAGE_EXPANDED if expand else TREE_PER_PAGE
        limit = int_param(req, "limit", default_limit, 1, default_limit)
        start = decode_cursor(req.query.get("cursor", [""])[-1])
        chunk = items[start : start + limit]
        headers = {}
        if start + limit < len(items):
            headers["Link"] = next_link(req, {"cursor": encode_cursor(start + limit)})
        return json_response([hubjson.tree_entry(repo, sha, i, expand) for i in chunk], headers)

    def paths_info(self, req: Request, org: str, name: str, rev: str) -> Response:
        repo, _, _ = self._open(req, org, name, files=False)
        sha = self._revision(repo, rev)
        content_type = req.headers.get("content-type", "")
        try:
            if "json" in content_type:
                data = json.loads(req.body or b"{}")
                paths = data.get("paths", [])
                expand = data.get("expand") in (True, "true", "1", 1)
            else:
                form = parse_qs(req.body.decode("utf-8"), keep_blank_values=True)
                paths = form.get("paths", [])
                expand = form.get("expand", ["false"])[-1].lower() in ("1", "true")
        except (ValueError, AttributeError, UnicodeDecodeError):
            raise HubError(400, "Invalid paths-info body") from None
        if not isinstance(paths, list) or not all(isinstance(p, str) for p in paths):
            raise HubError(400, "paths must be a list of strings")
        by_path = {i.path: i for i in repo.tree(sha)}
        wanted = dict.fromkeys(p.strip("/") for p in paths)
        found = [by_path[p] for p in wanted if p in by_path]
        return json_response([hubjson.tree_entry(repo, sha, i, expand) for i in found])

    def safetensors_metadata(self, req: Request, org: str, name: str, path: str) -> Response:
        """The Hub's sharded-safetensors shortcut (always `main`): index metadata plus shard headers."""
        index_path = path
        repo, _, _ = self._open(req, org, name, files=True)
        sha = self._revision(repo, "main")
        by_path = {i.path: i for i in repo.tree(sha) if not i.is_dir}
        index_item = by_path.get(index_path)
        if index_item is None or index_item.lfs is not None:
            raise HubError(404, f'{index_path} does not exist on "main"', "EntryNotFound")
        try:
            index = json.loads(repo.read_blob(index_item.oid))
            weight_map = index["weight_map"]
            shards = sorted(set(weight_map.values()))
        except (ValueError, KeyError, TypeError, AttributeError):
            raise HubError(400, f"{index_path} is not a safetensors index") from None
        folder = index_path.rpartition("/")[0]
        headers: dict[str, Any] = {}
        for shard in shards:
            item = by_path.get(f"{folder}/{shard}" if folder else str(shard))
            header = hubjson.safetensors_header(repo, item) if item is not None else None
            if header is None:
                raise HubError(400, f"shard {shard} is missing or not a safetensors file")
            headers[shard] = header
        return json_response({"index": {"metadata": index.get("metadata")}, "headers": headers})

    # -- files ------------------------------------------------------------------------------

    def resolve(self, req: Request, org: str, name: str, rev: str, path: str) -> Response:
        repo, repo_id, _ = self._open(req, org, name, files=True)
        sha = self._revision(repo, rev)
        item = next((i for i in repo.tree(sha) if i.path == path and not i.is_dir), None)
        if item is None:
            error = HubError(404, "Entry not found", "EntryNotFound", {"X-Repo-Commit": sha})
            raise error
        headers = {"X-Repo-Commit": sha, "Accept-Ranges": "bytes"}
        if item.lfs is None:
            headers["ETag"] = f'"{item.oid}"'
            headers["Content-Type"] = content_type(path)
            headers["Content-Disposition"] = disposition(path)
            data = repo.read_blob(item.oid)
            return ranged(req, headers, len(data), lambda a, b: iter([data[a:b]]))
        oid = item.lfs.oid
        query = {"commit": sha, "path": path}
        query["sig"] = self._sign(repo_id, oid, sha, path)
        location = f"{req.base_url}/cdn-lfs/{quote(org)}/{quote(name)}/{oid}?{urlencode(query)}"
        headers.update(
            {
                "Location": location,
                "X-Linked-Etag": f'"{oid}"',
                "X-Linked-Size": str(item.lfs.size),
                "ETag": f'"{oid}"',
                "Cache-Control": "no-store",
            }
        )
        return Response(302, headers)

    def cdn(self, req: Request, org: str, name: str, oid: str) -> Response:
        """The CDN stand-in for LFS objects: needs a signature minted by `resolve`."""
        commit = req.query.get("commit", [""])[-1]
        path = req.query.get("path", [""])[-1]
        sig = req.query.get("sig", [""])[-1]
        repo_id = f"{unquote(org)}/{unquote(name)}"
        expected = self._sign(repo_id, oid, commit, path)
        if not re.fullmatch(r"[0-9a-f]{64}", oid) or not hmac.compare_digest(sig, expected):
            raise HubError(403, "Invalid or missing signature")
        try:
            parse_repo_id(repo_id)
        except InvalidRepoIdError:
            raise HubError(400, "Invalid repo id") from None
        repo = self.repo_for(self.root / repo_id)
        item = next((i for i in repo.tree(commit) if i.path == path), None)
        if item is None or item.lfs is None or item.lfs.oid != oid:
            raise HubError(404, "Entry not found", "EntryNotFound")
        obj = repo.lfs_object(oid)
        try:
            actual = obj.stat().st_size
        except OSError:
            raise HubError(404, f"LFS object {oid} is missing from the replica") from None
        if actual != item.lfs.size:
            raise HubError(
                500, f"LFS object {oid} has {actual} bytes, its pointer says {item.lfs.size}"
            )
        headers = {
            "X-Repo-Commit": commit,
            "ETag": f'"{oid}"',
            "Accept-Ranges": "bytes",
            "Content-Type": "application/octet-stream",
            "Content-Disposition": disposition(path),
        }
        return ranged(req, headers, actual, lambda a, b: stream_file(obj, a, b))

    def _sign(self, repo_id: str, oid: str, commit: str, path: str) -> str:
        message = "\0".join((repo_id, oid, commit, path)).encode()
        return hmac.new(self.secret, message, hashlib.sha256).hexdigest()
