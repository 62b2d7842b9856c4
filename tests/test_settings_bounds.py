"""Issue 10, item 9: every numeric setting has a finite upper bound, refused at start.

Before, fields with only a lower bound took anything: `TRACKER_WATCHLIST_SYNC_S=inf` (or 1e12)
made `tracker poll` die with an OverflowError traceback, `TRACKER_WEBHOOK_TIMEOUT_S=inf` killed
the webhook-deliveries thread while the daemon kept polling, `TRACKER_RENDER_BACKSTOP_WALL_S=inf`
failed and `TRACKER_RENDER_BACKSTOP_CPU_S=99999999999999999999999` deferred every chat-template
revision for ever. The fields are discovered from the model: a new numeric setting without an
upper bound fails `test_every_numeric_setting_has_an_upper_bound` and its process test.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types
import typing
from collections.abc import Iterator
from pathlib import Path

import annotated_types
import pytest

from tracker.settings import Settings, _variable, allowed_range, load_settings
from tracker.shared.errors import ConfigError

TRACKER = Path(sys.executable).with_name("tracker")
HUGE = "1" + "0" * 30  # an integer, and a float for float fields


def _numeric(annotation: object) -> bool:
    if annotation in (int, float):
        return True
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        return len(args) == 1 and args[0] in (int, float)
    return False


NUMERIC = sorted(n for n, f in Settings.model_fields.items() if _numeric(f.annotation))


def _upper(name: str) -> int | float:
    for bound in Settings.model_fields[name].metadata:
        if isinstance(bound, annotated_types.Le | annotated_types.Lt):
            value = getattr(bound, "le", None)
            return value if value is not None else getattr(bound, "lt")  # noqa: B009
    raise AssertionError(f"{name} has no upper bound")


def test_the_numeric_settings_are_found() -> None:
    # the discovery itself: the 28 numeric fields of this writing (more may come, each then
    # checked below), the ones the review named among them
    assert len(NUMERIC) >= 28
    for name in ("watchlist_sync_s", "webhook_timeout_s", "render_backstop_wall_s",
                 "render_backstop_cpu_s", "rate_api_per_window", "watchdog_usec"):  # fmt: skip
        assert name in NUMERIC


@pytest.mark.parametrize("name", NUMERIC)
def test_every_numeric_setting_has_an_upper_bound(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    top = _upper(name)
    assert 0 < top < 1e12 * 86400  # finite and below anything a clock or rlimit overflows on
    variable = _variable(name)
    monkeypatch.setenv(variable, str(top))
    assert getattr(load_settings(), name) == top  # the bound itself is a usable value
    monkeypatch.setenv(variable, str(top * 2))
    with pytest.raises(ConfigError) as info:
        load_settings()
    (problem,) = info.value.problems
    assert problem.startswith(f"{variable}: must be <= ")
    assert problem.endswith(f" (allowed: {allowed_range(name)})")


# The fork driver: `tracker.cli.main(["watch", "list"])` (the installed entry point's function) in a
# fresh child per key, forked after one import of the CLI, stdout and stderr to files; prints each
# child's exit code. The same process start as the console script, without paying its imports 56
# times (85 s of this suite's CPU when every key was its own `tracker` process).
_DRIVER = """
import json, os, sys
from tracker.cli import _register_all, main
from tracker.settings import load_settings
_register_all()  # the commands' modules, imported once before the forks
keys, out = json.loads(sys.argv[1]), sys.argv[2]
for i, (variable, value) in enumerate(keys):
    pid = os.fork()
    if pid == 0:
        os.environ[variable] = value
        for fd, suffix in ((1, "out"), (2, "err")):
            os.dup2(os.open(f"{out}/{i}.{suffix}", os.O_WRONLY | os.O_CREAT | os.O_TRUNC), fd)
        try:
            main(["watch", "list"])
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), flush=True)
"""


@pytest.fixture(scope="module")
def refusals(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[tuple[str, str], object]]:
    """`tracker watch list` with each numeric setting's variable set to `inf` and to 10**30: the
    first setting's two values run as the installed `tracker` processes, every key (those two
    included, so both paths are compared) through the fork driver above."""
    tmp = tmp_path_factory.mktemp("bounds")
    (tmp / "watchlist.yaml").write_text("repos:\n  - id: acme/tiny\n")
    base = {k: v for k, v in os.environ.items() if not k.startswith(("TRACKER_", "HF_"))}
    base.update(
        TRACKER_STATE_DIR=str(tmp / "state"),
        TRACKER_WATCHLIST=str(tmp / "watchlist.yaml"),
        TRACKER_HF_ENDPOINT="http://127.0.0.1:9",
    )
    base.pop("WATCHDOG_USEC", None)

    keys = [(name, value) for name in NUMERIC for value in ("inf", HUGE)]
    out = tmp / "driver"
    out.mkdir()
    driven = subprocess.run(
        [sys.executable, "-c", _DRIVER, json.dumps([[_variable(n), v] for n, v in keys]), str(out)],
        env=base, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert driven.returncode == 0, driven.stderr
    codes = [int(line) for line in driven.stdout.split()]
    assert len(codes) == len(keys)
    results = {
        key: subprocess.CompletedProcess(
            ["tracker", "watch", "list"],
            code,
            (out / f"{i}.out").read_text(),
            (out / f"{i}.err").read_text(),
        )
        for i, (key, code) in enumerate(zip(keys, codes, strict=True))
    }
    for key in keys[:2]:  # the console script itself says the same, byte for byte
        env = {**base, _variable(key[0]): key[1]}
        done = subprocess.run(
            [str(TRACKER), "watch", "list"], env=env, capture_output=True, text=True, timeout=120
        )
        got = results[key]
        assert (done.returncode, done.stdout, done.stderr) == (
            got.returncode,
            got.stdout,
            got.stderr,
        )
    yield results


@pytest.mark.parametrize("value", ["inf", HUGE])
@pytest.mark.parametrize("name", NUMERIC)
def test_an_unbounded_value_is_refused_at_start_in_one_line(
    refusals: dict[tuple[str, str], subprocess.CompletedProcess[str]], name: str, value: str
) -> None:
    done = refusals[(name, value)]
    variable = _variable(name)
    kind = Settings.model_fields[name].annotation
    if value == HUGE:
        said = f"must be <= {_upper(name)}"
        said += ".0" if float in typing.get_args(kind) or kind is float else ""
        said += f", got '{HUGE}'"
    elif kind is float or float in typing.get_args(kind):
        said = "must be a finite number, got 'inf'"
    else:
        said = "must be an integer, got 'inf'"
    assert (done.returncode, done.stdout) == (2, ""), done.stderr
    assert done.stderr.splitlines() == [
        f"error: invalid settings: {variable}: {said} (allowed: {allowed_range(name)})"
    ]


@pytest.mark.parametrize(
    ("entry", "said"),
    [
        (f"backfill: {HUGE}", f"repos[0].backfill: must be <= 1000000, got {HUGE}"),
        (
            f"estimate: {{serve_seq_len: {HUGE}}}",
            f"repos[0].estimate.serve_seq_len: must be <= 1000000000000, got {HUGE}",
        ),
        (
            "estimate: {kv_bytes_per_value: 1.0e+300}",
            "repos[0].estimate.kv_bytes_per_value: must be <= 1000000.0, got 1e+300",
        ),
        (
            "estimate: {cost_card: {name: X, vram_gb: 1.0e+300}}",
            "repos[0].estimate.cost_card.vram_gb: must be <= 1000000.0, got 1e+300",
        ),
        (
            "preflight: {provisioning_window_h: 1.0e+300}",
            "repos[0].preflight.provisioning_window_h: must be <= 8760.0, got 1e+300",
        ),
        (
            "preflight: {boxes: [{count: 1, card: X, vram_gb: 1.0e+300}]}",
            "repos[0].preflight.boxes[0].vram_gb: must be <= 1000000.0, got 1e+300",
        ),
    ],
)
def test_an_unbounded_number_in_the_watchlist_is_refused_in_one_line(
    tmp_path: Path, entry: str, said: str
) -> None:
    # Before: `backfill: 10**30` was accepted; `serve_seq_len: 10**400` or a 1e300 byte count
    # raised OverflowError in the estimate (analysis), not at start.
    (tmp_path / "watchlist.yaml").write_text(f"repos:\n  - id: acme/tiny\n    {entry}\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACKER_", "HF_"))}
    env.update(
        TRACKER_STATE_DIR=str(tmp_path / "state"),
        TRACKER_WATCHLIST=str(tmp_path / "watchlist.yaml"),
    )
    done = subprocess.run(
        [str(TRACKER), "watch", "list"], env=env, capture_output=True, text=True, timeout=120
    )
    assert (done.returncode, done.stdout) == (2, ""), done.stderr
    assert done.stderr.splitlines() == [f"error: {tmp_path / 'watchlist.yaml'} is invalid: {said}"]


@pytest.mark.parametrize(
    ("variable", "value", "why"),
    [
        ("TRACKER_HF_ENDPOINT", "http://127.0.0.1:abc", "has a bad port"),
        ("TRACKER_HF_ENDPOINT", "http://127.0.0.1:99999", "has a bad port"),
        ("HF_ENDPOINT", "http://127.0.0.1:0", "has a bad port"),
        ("TRACKER_HF_ENDPOINT", "http://:8080", "has no host"),
        ("TRACKER_HF_ENDPOINT", "ftp://mirror.example", "is not an http(s) URL"),
        ("TRACKER_HUB_PUBLIC_URL", "https://hub.example:70000", "has a bad port"),
        ("TRACKER_PUBLIC_URL", "https://tracker.example:x/", "has a bad port"),
    ],
)
def test_an_endpoint_url_with_a_bad_port_or_no_host_is_refused_at_start(
    tmp_path: Path, variable: str, value: str, why: str
) -> None:
    # Before: accepted, then every poll failed ("unexpected InvalidURL" for :abc, a misleading
    # "Connection refused" for :99999).
    (tmp_path / "watchlist.yaml").write_text("repos:\n  - id: acme/tiny\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACKER_", "HF_"))}
    env.update(
        TRACKER_STATE_DIR=str(tmp_path / "state"),
        TRACKER_WATCHLIST=str(tmp_path / "watchlist.yaml"),
    )
    env[variable] = value
    done = subprocess.run(
        [str(TRACKER), "watch", "list"], env=env, capture_output=True, text=True, timeout=120
    )
    shown = "TRACKER_HF_ENDPOINT" if variable == "HF_ENDPOINT" else variable
    assert (done.returncode, done.stdout) == (2, ""), done.stderr
    assert done.stderr.splitlines() == [
        f"error: invalid settings: {shown}: {value!r} {why}; "
        "expected http(s)://HOST[:PORT] with PORT 1-65535"
    ]


def test_an_endpoint_with_a_port_and_a_trailing_slash_is_kept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TRACKER_HF_ENDPOINT", "http://127.0.0.1:65535/")
    monkeypatch.setenv("TRACKER_PUBLIC_URL", "https://[::1]:1/tracker/")
    s = load_settings()
    assert (s.hf_endpoint, s.public_url) == ("http://127.0.0.1:65535", "https://[::1]:1/tracker")
