"""tracker.teams.impact on the demo's published advisories (tests/demo/golden) where the small
store of test_team_cli.py has none: granite's chat-template advisory and a remote-code answer
that imports on the team's version. The store's facts are given directly (Position, RemoteCode)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tests.feeds.feedkit import advisory_of
from tracker.preflight.report import RemoteCode
from tracker.shared.domain import RepoId, Sha
from tracker.teams.impact import Impact, Position, judge
from tracker.teams.profile import TeamFields, team_of

GOLDEN = Path(__file__).resolve().parents[1] / "demo" / "golden"
GRANITE = "ibm-granite/granite-3.1-1b-a400m-instruct"


class Facts:
    def __init__(self, order: list[str], rc: RemoteCode | None = None) -> None:
        self.order = tuple(Sha(s) for s in order)
        self.rc = rc

    def position(self, repo_id: RepoId, spec: str | None) -> Position | str:
        pinned = next((s for s in self.order if spec and s.startswith(spec)), self.order[-1])
        return Position(self.order, pinned, self.order[-1])

    def remote_code(self, repo_id: RepoId, sha: Sha) -> RemoteCode | None:
        return self.rc

    def config(self, repo_id: RepoId, sha: Sha) -> Mapping[str, Any] | None:
        return None


def team(name: str, repo: str, **use: Any) -> Any:
    return team_of(TeamFields.model_validate({"name": name, "transformers": "4.57.1",
                                              "repos": [{"id": repo, **use}]}))  # fmt: skip


def test_a_template_change_affects_only_a_team_that_applies_the_template() -> None:
    adv = advisory_of(json.loads((GOLDEN / "x_TRACKER-2026-21.json").read_text()))
    facts = Facts(
        [
            "af15e05b6317000518e4756d3539e25bc82974b4",
            "c6d3966f9f81018b5f099fb3fd1d11de03908f0c",
            "cbbf520a35e72036bda644a7b69d53e88efebe63",
        ]
    )
    got = {
        name: (v.impact, v.reason, v.missing)
        for name, use in (
            ("chat", {"chat_template": True}),
            ("raw", {"chat_template": False}),
            ("said-nothing", {}),
            ("pinned-before", {"chat_template": True, "revision": "af15e05b"}),
        )
        for v in [judge(adv, team(name, GRANITE, **use), facts)]
    }
    assert got == {
        "chat": (
            Impact.AFFECTED,
            "the team applies the chat template, which renders differently",
            (),
        ),
        "raw": (Impact.NOT_AFFECTED, "the team does not apply the chat template", ()),
        "said-nothing": (
            Impact.UNKNOWN,
            "the profile does not say whether the team applies the chat template",
            ("chat_template",),
        ),
        "pinned-before": (
            Impact.NEXT_UPGRADE,
            "introduced after its pinned revision (af15e05b6317): the team applies the chat "
            "template, which renders differently",
            (),
        ),
    }
    other = judge(adv, team("other", "meta-llama/Llama-2-7b-hf", chat_template=True), facts)
    assert (other.impact, other.reason) == (
        Impact.NOT_AFFECTED,
        f"the team does not use {GRANITE}",
    )


def test_remote_code_is_judged_on_the_version_the_team_runs() -> None:
    adv = advisory_of(json.loads((GOLDEN / "x_TRACKER-2026-32.json").read_text()))
    order = [adv.record["database_specific"]["previous"], adv.introduced]

    def rc(version_ok: dict[str, bool]) -> RemoteCode:
        return RemoteCode(
            modules=("configuration_chatglm.py",),
            problems=(),
            transformers_imports=(),
            packages={},
            compiled={},
            versions=tuple(
                {
                    "version": v,
                    "importable": ok,
                    "absent": [],
                    "missing": [] if ok else ["transformers.PretrainedConfig"],
                    "broken": [],
                    "not_checked": [],
                }
                for v, ok in version_ok.items()
            ),
            first_missing={},
        )

    facts = Facts(order, rc({"4.57.1": True, "5.24.0": False}))
    glm = "THUDM/chatglm2-6b"
    on_old = judge(adv, team("old", glm, trust_remote_code=True), facts)
    assert (on_old.impact, on_old.reason) == (
        Impact.NOT_AFFECTED,
        "the remote code imports on transformers 4.57.1 (it is still new code that runs under "
        "trust_remote_code: review it)",
    )
    new = team_of(
        TeamFields.model_validate(
            {"name": "new", "transformers": "5.24.0",
             "repos": [{"id": glm, "trust_remote_code": True}]}
        )
    )  # fmt: skip
    assert (judge(adv, new, facts).impact, judge(adv, new, facts).reason) == (
        Impact.AFFECTED,
        "the remote code does not import on transformers 5.24.0 (names missing: "
        "transformers.PretrainedConfig)",
    )
    off = judge(adv, team("off", glm, trust_remote_code=False), facts)
    assert off.reason == "the team does not run remote code (trust_remote_code off)"
    unchecked = judge(adv, team("x", glm, trust_remote_code=True), Facts(order, rc({})))
    assert (unchecked.impact, unchecked.reason) == (
        Impact.UNKNOWN,
        "preflight did not check transformers 4.57.1 (add it to the watchlist's "
        "preflight.transformers)",
    )


def test_a_weights_reason_names_a_few_tensors_and_counts_the_rest() -> None:
    """x-22 (granite's re-uploaded weights: 223 changed keys) made the team page very long when
    its reason named every tensor; it names five and says how many more, whole names only."""
    adv = advisory_of(json.loads((GOLDEN / "x_TRACKER-2026-22.json").read_text()))
    v = judge(adv, team("loads-it", GRANITE), Facts([adv.introduced]))
    assert (v.impact, v.reason) == (
        Impact.AFFECTED,
        "the team loads weights: `content`, `dtypes`, `total_bytes`, `torch_dtype`, "
        "`model.embed_tokens.weight` and 218 more tensors changed",
    )


def test_an_import_break_is_judged_on_the_version_the_team_runs() -> None:
    """A preflight advisory made only of import changes (`preflight.remote_code.transformers-X`,
    as tests/scan/test_scan_runtime.py's replica repo publishes) affects a team that runs remote
    code on one of those versions, and no other: the same rule `tracker scan` applies to a pin.
    The record is bloom's estimate advisory (golden) with its changes replaced by the two import
    changes that repo's is_torch_fx_available break makes."""
    record = json.loads((GOLDEN / "x_TRACKER-2026-40.json").read_text())
    ds = record["database_specific"]
    ds["changes"] = [
        {"key": f"preflight.remote_code.transformers-{v}", "rule": "preflight-import-broken",
         "before": "importable", "after": "does not import: is_torch_fx_available"}
        for v in ("5.1.0", "5.24.0")
    ]  # fmt: skip
    ds["estimate_changes"] = []
    adv = advisory_of(record)
    facts = Facts([ds["previous"], adv.introduced])
    bloom = "bigscience/bloom-560m"

    def said(transformers: str | None, **use: Any) -> tuple[Impact, str, tuple[str, ...]]:
        fields = {"name": "t", "transformers": transformers, "repos": [{"id": bloom, **use}]}
        v = judge(adv, team_of(TeamFields.model_validate(fields)), facts)
        return v.impact, v.reason, v.missing

    assert said("5.24.0", trust_remote_code=True) == (
        Impact.AFFECTED, "the import changed on transformers 5.1.0, 5.24.0, which the team runs", (),
    )  # fmt: skip
    assert said("4.57.1", trust_remote_code=True) == (
        Impact.NOT_AFFECTED,
        "the import changed on transformers 5.1.0, 5.24.0 only; the team runs 4.57.1",
        (),
    )
    assert said("5.24.0", trust_remote_code=False) == (
        Impact.NOT_AFFECTED, "the team does not run remote code (trust_remote_code off)", (),
    )  # fmt: skip
    assert said(None, trust_remote_code=True) == (
        Impact.UNKNOWN,
        "the import changed on transformers 5.1.0, 5.24.0; the profile does not say which "
        "transformers version the team runs",
        ("transformers",),
    )
