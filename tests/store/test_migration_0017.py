"""Migration 0017_team29 (`subscriptions.team`) up and down on a store with a subscription: down
to 0016_web27 drops the column and keeps the row; up again adds it back as NULL (no team
filter), and the store reads the subscription as it was, less the team. SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic import command

from tracker.shared.domain import Severity
from tracker.store import Store
from tracker.store.engine import _alembic_config, head_revision, writer
from tracker.store.webhooks import WebhookStore

NOW = datetime(2026, 12, 7, 20, 0, tzinfo=UTC)


def _migrate(engine: sa.Engine, revision: str, *, up: bool) -> None:
    cfg = _alembic_config()
    with writer(engine).begin() as conn:
        cfg.attributes["connection"] = conn
        (command.upgrade if up else command.downgrade)(cfg, revision)


def _columns(engine: sa.Engine) -> list[str]:
    return [c["name"] for c in sa.inspect(engine).get_columns("subscriptions")]


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'tracker.db'}"
        return
    with request.getfixturevalue("pg_database")("m0017") as url:
        yield url


def test_0017_down_and_up_keeps_the_subscription(database: str) -> None:
    url = database
    store = Store.open(url)
    hooks = WebhookStore(store.engine)
    sub = hooks.add_subscription(
        url="http://127.0.0.1:9/hook", repos=["*"], min_severity=Severity.LOW, kinds=[],
        secret="whsec_" + "QUJD" * 8, description="team hook", now=NOW,
        events=["revision.advisories"], team="eval",
    )  # fmt: skip
    assert (head_revision(), hooks.subscription(sub.id).team) == ("0019_lineage28", "eval")
    store.close()

    engine = sa.create_engine(url)
    try:
        _migrate(engine, "0016_web27", up=False)
        assert "team" not in _columns(engine) and "events" in _columns(engine)
        with engine.connect() as conn:
            rows = conn.execute(sa.text("SELECT id, description, events FROM subscriptions")).all()
            version = conn.execute(sa.text("SELECT version_num FROM alembic_version")).scalar()
        assert (rows, version) == ([(sub.id, "team hook", '["revision.advisories"]')], "0016_web27")
        _migrate(engine, "head", up=True)
        assert "team" in _columns(engine)
    finally:
        engine.dispose()
    again = Store.open(url)
    try:
        back = WebhookStore(again.engine).subscription(sub.id)
        assert (back.team, back.events, back.description) == (
            None, ("revision.advisories",), "team hook",
        )  # fmt: skip
    finally:
        again.close()
