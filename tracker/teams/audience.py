"""Which advisories of a live event affect a watchlist team: the webhook subscriptions filtered to
a team (`tracker subscribe add --team`) receive only those (`tracker.webhooks.events.Audience`).

The judgement is the team pages' and feeds' (`tracker.teams.impact.judge`, the same reasons), made
when the event happens, so over the history as far as it is analysed then:
- a newly introduced advisory is judged with the team's place cut at the revision that introduced
  it (the analysis frontier): a team that follows the ref, or whose pinned revision is later than
  that (ingested, not analysed yet), is at that revision and so affected today; a team pinned
  earlier is affected at its next upgrade. It is sent when the verdict is `affected` or
  `affects your next upgrade`, as the team feed's entries are; `unknown` (the profile lacks a
  field) and `not affected` are not sent.
- an advisory that is fixed, withdrawn, reopened or restored is sent when the team uses the repo
  and what the advisory changes touches what the team does (`relevance`; verdict `relevant`), so
  a team told of an advisory also hears of its fix.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tracker.preflight.report import RemoteCode
from tracker.shared.domain import Advisory, RepoId, Sha
from tracker.teams.impact import Facts, Impact, Position, judge, relevance
from tracker.teams.profile import Team

SENT = (Impact.AFFECTED, Impact.NEXT_UPGRADE)
"""The verdicts a team subscription receives a new advisory for (the team feed's)."""
RELEVANT = "relevant"
"""The verdict sent with a fixed, withdrawn, reopened or restored advisory: what it changes
touches what the team does."""


class _AtFrontier:
    """`Facts` with the history cut at `frontier` (the revision being published)."""

    def __init__(self, facts: Facts, frontier: Sha) -> None:
        self._facts = facts
        self._frontier = frontier

    def position(self, repo_id: RepoId, spec: str | None) -> Position | str:
        pos = self._facts.position(repo_id, spec)
        if isinstance(pos, str) or self._frontier not in pos.order:
            return pos
        order = pos.order[: pos.order.index(self._frontier) + 1]
        pinned = pos.pinned if pos.pinned in order else self._frontier
        return Position(order, pinned, self._frontier)

    def remote_code(self, repo_id: RepoId, sha: Sha) -> RemoteCode | None:
        return self._facts.remote_code(repo_id, sha)

    def config(self, repo_id: RepoId, sha: Sha) -> Mapping[str, Any] | None:
        return self._facts.config(repo_id, sha)


class TeamAudience:
    """`Audience` over the watchlist's teams (`teams`, read at the first verdict: an event no
    team subscription wants reads no watchlist) and the store's facts."""

    def __init__(self, teams: Callable[[], Sequence[Team]], facts: Facts) -> None:
        self._load = teams
        self._teams: dict[str, Team] | None = None
        self._facts = facts

    def verdict(self, team: str, adv: Advisory, *, introduced: bool) -> tuple[str, str] | None:
        if self._teams is None:
            self._teams = {t.name: t for t in self._load()}
        profile = self._teams.get(team)
        if profile is None:
            return None
        if introduced:
            v = judge(adv, profile, _AtFrontier(self._facts, adv.introduced))
            return (v.impact.value, v.reason) if v.impact in SENT else None
        use = profile.repo(adv.repo_id)
        if use is None:
            return None
        hit, reason, _ = relevance(adv, profile, use, self._facts)
        return (RELEVANT, reason) if hit else None
