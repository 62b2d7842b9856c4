"""schemathesis (issue 8, must-show) against the app's own OpenAPI schema, in process over a real
SQLite store holding a published advisory: every operation, a bounded number of generated
requests each, schema-valid (positive) and schema-violating (negative, which must be refused
with a 4xx), with the write token and the Hub secret so writes are
reached. No answer is a 500; every answer's status, content type, headers and body conform to
what the schema declares (problem documents and 304s included).

The operations are driven through schemathesis' Python API with Hypothesis (its pytest plugin
does not run under this pytest); every failing operation is reported, not only the first.

Every check runs on every operation, except "schema-valid data is accepted" (ST202) where a
well-formed value can still be refused for what it means, which no schema can say: an opaque
paging token (`cursor`, OSV's `page_token`) this API did not give out, and a webhook URL whose
host resolves to a refused network (the SSRF guard resolves it)."""

from __future__ import annotations

import ipaddress
import socket
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from apikit import WRITE, app_with_advisory
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis.checks import negative_data_rejection, positive_data_acceptance
from schemathesis.generation import GenerationMode

from tracker.api import create_app

HUB_SECRET = "hub-secret-for-schemathesis"
EXAMPLES = 12
OPAQUE_CURSOR = (
    "its `cursor` is opaque (the schema says so): only one a previous page handed out is "
    "valid, any other string the schema allows is a 400 invalid-cursor"
)
DELIBERATE: dict[tuple[str, str], str] = {
    ("POST /v1/query", "positive_data_acceptance"): "osv.dev's own rules beyond the schema: a "
    "commit with a version or a package, a query with neither, a version both in the purl and "
    "in `version`, a page_token it did not hand out: each a 400 (gRPC 3), as osv.dev answers",
    ("POST /v1/querybatch", "positive_data_acceptance"): "each query as POST /v1/query's, and "
    "at most 1,000 of them: a 400 naming the query",
    ("POST /v1/subscriptions", "positive_data_acceptance"): "a target URL the schema allows "
    "that does not resolve or resolves to a private network is refused 422 (SSRF guard)",
    ("GET /v1/advisories", "positive_data_acceptance"): OPAQUE_CURSOR,
    ("GET /v1/repos/{org}/{name}/revisions", "positive_data_acceptance"): OPAQUE_CURSOR,
}
"""(operation, check) left out on purpose, with why; every other operation runs every check,
and the test fails when this list names an operation or check it no longer needs (so it stays
the complete list of what is not checked)."""
NO_INVALID_INPUT = {
    "GET /v1/repos": "no parameters: no request to it can break the schema",
    "GET /v1/teams": "no parameters",
    "GET /v1/teams/{team}": "its one parameter is a path segment of any text (a team name)",
    "GET /v1/vulns/{advisory_id}": "its one parameter is a path segment of any text (an id, "
    "as osv.dev's: an unknown one is a 404)",
}
"""The operations for which schemathesis can make no schema-violating request (Hypothesis says
Unsatisfiable): their negative run is empty, by construction, not skipped."""
HEADERS = {"Authorization": f"Bearer {WRITE}", "X-Webhook-Secret": HUB_SECRET}


def _check(operation: Any, mode: GenerationMode) -> None:
    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
    )
    def run(case: Any) -> None:
        case.call_and_validate(headers=HEADERS, excluded_checks=excluded)

    excluded = [
        check
        for check in (positive_data_acceptance, negative_data_rejection)
        if (operation.label, check.__name__) in DELIBERATE
    ]
    run()


def test_every_answer_conforms_to_the_schema(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = socket.getaddrinfo

    def no_dns(host: Any, *args: Any, **kwargs: Any) -> Any:
        try:  # IP literals resolve as before; generated names fail at once, with no network
            ipaddress.ip_address(str(host))
        except ValueError:
            raise socket.gaierror(socket.EAI_NONAME, "no DNS in this test") from None
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", no_dns)
    (tmp_path / "watchlist.yaml").write_text("repos:\n  - id: mistralai/Mixtral-8x7B-v0.1\n")
    app = app_with_advisory(
        tmp_path / "state",
        watchlist=tmp_path / "watchlist.yaml",
        api_write_token=WRITE,
        hub_webhook_secret=HUB_SECRET,
        webhook_allow_networks="127.0.0.0/8",
    )
    try:
        schema = schemathesis.openapi.from_asgi("/openapi.json", create_app(app))
        failures: dict[str, str] = {}
        labels = []
        no_invalid: list[str] = []
        for result in schema.get_all_operations():
            operation = result.ok()
            labels.append(operation.label)
            for mode in GenerationMode:
                try:
                    _check(operation, mode)
                except Unsatisfiable:
                    if mode is not GenerationMode.NEGATIVE:
                        raise
                    no_invalid.append(operation.label)
                except (Exception, BaseExceptionGroup) as exc:  # every one, reported together
                    failures[f"{operation.label} ({mode.value})"] = f"{type(exc).__name__}: {exc}"[
                        :3000
                    ]
        assert len(labels) >= 20, labels
        # the left-out checks name real operations, and every operation with a cursor has its
        # opaque-cursor entry
        assert {label for label, _ in DELIBERATE} <= set(labels), DELIBERATE
        cursors = {
            result.ok().label: p.definition
            for result in schema.get_all_operations()
            for p in result.ok().iter_parameters()
            if p.name == "cursor"
        }
        with_cursor = set(cursors)
        # and the schema says the cursor is opaque
        assert all(
            d["description"].startswith("An opaque cursor: the previous page's `next`")
            for d in cursors.values()
        ), cursors
        assert with_cursor == {
            label for (label, _), why in DELIBERATE.items() if why == OPAQUE_CURSOR
        }, with_cursor
        assert failures == {}, "\n\n".join(f"{k}\n{v}" for k, v in failures.items())
        assert sorted(no_invalid) == sorted(NO_INVALID_INPUT), no_invalid
    finally:
        app.close()
