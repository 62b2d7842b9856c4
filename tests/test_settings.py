"""Settings of the deadlines (issue 10, items 7 and 9): the defaults, and an invalid value refused
at start with one problem naming the variable."""

from __future__ import annotations

import pytest

from tracker.cli import one_line
from tracker.settings import load_settings
from tracker.shared.artifacts import Limits
from tracker.shared.errors import ConfigError


def test_deadline_defaults_flow_into_the_fetch_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_TIMEOUT_S", "REQUEST_DEADLINE_S", "RETRY_AFTER_CAP_S", "POLL_DEADLINE_S"):
        monkeypatch.delenv(f"TRACKER_{name}", raising=False)
    s = load_settings()
    assert (s.http_timeout_s, s.request_deadline_s, s.retry_after_cap_s, s.poll_deadline_s) == (
        20.0, 120.0, 60.0, 900.0,
    )  # fmt: skip
    monkeypatch.setenv("TRACKER_POLL_DEADLINE_S", "30")
    assert load_settings().limits == Limits(poll_deadline_s=30.0)


@pytest.mark.parametrize(
    ("variable", "value", "says"),
    [
        ("TRACKER_HTTP_TIMEOUT_S", "0", "TRACKER_HTTP_TIMEOUT_S: must be > 0.0, got '0'"),
        ("TRACKER_HTTP_TIMEOUT_S", "1e9", "TRACKER_HTTP_TIMEOUT_S: must be <= 600.0, got '1e9'"),
        ("TRACKER_RETRY_AFTER_CAP_S", "-1", "TRACKER_RETRY_AFTER_CAP_S: must be >= 0.0, got '-1'"),
        ("TRACKER_REQUEST_DEADLINE_S", "soon", "TRACKER_REQUEST_DEADLINE_S: "),
        (
            "TRACKER_POLL_DEADLINE_S",
            "inf",
            "TRACKER_POLL_DEADLINE_S: must be a finite number, got 'inf' (allowed: > 0 and <= 86400)",
        ),
    ],
)
def test_an_invalid_deadline_is_one_line(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, says: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigError) as info:
        load_settings()
    line = one_line(info.value)
    assert "\n" not in line
    assert says in line, line
