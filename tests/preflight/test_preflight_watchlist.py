"""The watchlist's `preflight:` block: merged like `estimate:`, validated with every problem at once."""

from __future__ import annotations

import pytest

from tracker.preflight.capacity import Box
from tracker.preflight.settings import DEFAULT_TARGETS, PreflightSettings
from tracker.shared.errors import WatchlistError
from tracker.watchlist import parse_watchlist


def test_a_preflight_block_merges_from_defaults_rules_and_the_entry() -> None:
    wl = parse_watchlist(
        {
            "defaults": {
                "preflight": {"transformers": ["4.57.1", "5.1.0"], "throughput_mb_s": 100}
            },
            "rules": [{"match": "acme/*", "preflight": {"provisioning_window_h": 4}}],
            "repos": [
                {"id": "acme/a", "preflight": {"lora_targets": ["q_proj", "all-linear"]}},
                "other/b",
            ],
        }
    )
    a = PreflightSettings.from_mapping(wl.get("acme/a").preflight)
    assert a == PreflightSettings(
        transformers=("4.57.1", "5.1.0"),
        lora_targets=("q_proj", "all-linear"),
        throughput_mb_s=100.0,
        provisioning_window_h=4.0,
    )
    b = PreflightSettings.from_mapping(wl.get("other/b").preflight)
    assert (b.transformers, b.lora_targets, b.provisioning_window_h) == (
        ("4.57.1", "5.1.0"),
        DEFAULT_TARGETS,
        1.0,
    )
    assert b.boxes == (Box(8, "H200 141 GB", 141.0), Box(8, "B200 180 GB", 180.0))


def test_every_problem_of_a_preflight_block_is_reported_at_once() -> None:
    with pytest.raises(WatchlistError) as caught:
        parse_watchlist(
            {
                "repos": [
                    {
                        "id": "acme/a",
                        "preflight": {
                            "transformers": ["5.1.0; rm -rf /"],
                            "throughput_mb_s": -1,
                            "lora_target": ["q_proj"],
                        },
                    }
                ]
            }
        )
    problems = caught.value.problems
    assert len(problems) == 3, problems
    assert any("transformers[0]" in p for p in problems)
    assert any("throughput_mb_s" in p for p in problems)
    assert any("did you mean 'lora_targets'" in p for p in problems)
