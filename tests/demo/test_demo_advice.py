"""The demo's generation advice applied as a user would (issue 24, part 5): the `generate()` call
each published generation advisory's "What to do" names, applied with transformers 5.24.0 to the
new revision's generation defaults, gives back the previous revision's effective defaults on every
field the advisory names and on `do_sample`.

Each side's `GenerationConfig` is built the way transformers loads a model's: `from_pretrained` on a
directory holding the revision's generation_config.json when it can be read, else
`from_model_config` on its config.json; a field left unset takes the global default `generate()`
applies.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow

transformers = pytest.importorskip("transformers")

_CALL = re.compile(r"`model\.generate\(\.\.\., (?P<args>[^`]*)\)`")


def _generation_config(snapshot: Any, directory: Path) -> Any:
    """The GenerationConfig transformers builds for a model at `snapshot`."""
    gc = transformers.GenerationConfig
    directory.mkdir()
    data = snapshot.files.get("generation_config.json")
    if data is not None:
        try:
            json.loads(data)
        except ValueError:
            data = None
    if data is not None:
        (directory / "generation_config.json").write_bytes(data)
        return gc.from_pretrained(directory)
    config = snapshot.files.get("config.json")
    return gc.from_model_config(json.loads(config) if config is not None else {})


def _effective(config: Any, field: str) -> Any:
    value = getattr(config, field)
    if value is None:
        value = transformers.GenerationConfig._get_default_generation_params().get(field)
    return value


def _kwargs(details: str) -> dict[str, Any]:
    """The keyword arguments of the `model.generate(...)` call in "What to do" ({} for none)."""
    advice = details.split("## What to do", 1)[1]
    found = _CALL.search(advice)
    if found is None:
        return {}
    call = ast.parse(f"f({found['args']})", mode="eval").body
    assert isinstance(call, ast.Call)
    return {k.arg: ast.literal_eval(k.value) for k in call.keywords if k.arg}


def test_generation_advice_restores_the_old_effective_defaults(
    demo_run: Any, tmp_path: Path
) -> None:
    store = demo_run.app.store
    checked = []
    for path in sorted(demo_run.export_first.glob("*.json")):
        record = json.loads(path.read_text())
        extra = record["database_specific"]
        if extra["group"] != "generation_config" or extra.get("previous") is None:
            continue  # a first-seen finding (issue 24 part 3) has no old behaviour to restore
        repo, old_sha = extra["repo"], extra["previous"]
        new_sha = record["affected"][0]["ranges"][0]["events"][0]["introduced"]
        base = tmp_path / record["id"]
        base.mkdir()
        old = _generation_config(store.snapshot(repo, old_sha), base / "old")
        new = _generation_config(store.snapshot(repo, new_sha), base / "new")
        kwargs = _kwargs(record["details"])
        new.update(**kwargs)
        named = {c["key"] for c in extra["changes"]} - {"_from_model_config"}
        for field in sorted(named | {"do_sample"}):
            assert _effective(new, field) == _effective(old, field), (record["id"], field, kwargs)
        checked.append((record["id"], kwargs))
    assert checked == [
        ("x_TRACKER-2026-11", {"do_sample": False, "temperature": 0.9, "top_p": 0.6}),
        ("x_TRACKER-2026-7", {"max_length": 20}),
        ("x_TRACKER-2026-8", {}),
    ]


def test_the_sampling_switch_is_named_where_sampling_was_off() -> None:
    """The advice of the Llama step that turned sampling on names `do_sample=False` (the old
    advice, "pass the old values explicitly (`temperature=0.9`, `top_p=0.6`)", left it on)."""
    golden = Path(__file__).parent / "golden" / "x_TRACKER-2026-11.json"
    details = json.loads(golden.read_text())["details"]
    assert (
        "pass the previous revision's effective values to every call, "
        "`model.generate(..., do_sample=False, temperature=0.9, top_p=0.6)`" in details
    )


_PIN = re.compile(r'pin `[0-9a-f]{12}` \(`revision="(?P<sha>[0-9a-f]{40})"`')


def test_every_pinned_revision_loads_and_lacks_the_change(demo_run: Any) -> None:
    """Each demo advisory's "What to do" pins (if it pins) a revision whose config.json reads as
    JSON and where none of the advisory's changes holds: diffing it against the introducing
    revision finds every changed (file, key) again."""
    from tracker.diff import diff_snapshots

    store = demo_run.app.store
    pinned = []
    for path in sorted(demo_run.export_first.glob("*.json")):
        record = json.loads(path.read_text())
        advice = record["details"].split("## What to do", 1)[1]
        found = _PIN.search(advice)
        if found is None:
            continue
        extra = record["database_specific"]
        repo, sha = extra["repo"], found["sha"]
        new_sha = record["affected"][0]["ranges"][0]["events"][0]["introduced"]
        pin = store.snapshot(repo, sha)
        assert isinstance(json.loads(pin.files["config.json"]), dict), (record["id"], sha)
        moved = {(c.file, c.key) for c in diff_snapshots(pin, store.snapshot(repo, new_sha))}
        for change in extra["changes"]:
            if change["artifact"] == "estimate":
                continue  # estimates are not files of the revision
            assert (change["file"], change["key"]) in moved, (record["id"], change["key"])
        pinned.append(record["id"])
    assert len(pinned) >= 30
