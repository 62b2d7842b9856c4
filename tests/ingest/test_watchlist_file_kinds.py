"""Issue 26, item 7: `TRACKER_WATCHLIST` naming something that is not a regular file, or a file
over the cap, is refused with one line and exit 2 (a ConfigError in the CLI's exit table), read
without blocking and to at most `MAX_WATCHLIST_BYTES`. Before: /dev/zero was read without end
(MemoryError or OOM) and a FIFO blocked `tracker` until a writer came."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tracker.watchlist import MAX_WATCHLIST_BYTES, load_watchlist

TRACKER = Path(sys.executable).with_name("tracker")
NOT_REGULAR = "cannot be read: it is {kind}, not a regular file (a watchlist is a YAML file)"


def _tracker(watchlist: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TRACKER_WATCHLIST": str(watchlist)}
    return subprocess.run(
        [str(TRACKER), *args], env=env, capture_output=True, text=True, timeout=60, check=False
    )


@pytest.mark.parametrize("command", [("watch", "list"), ("poll", "--once")])
def test_a_device_a_fifo_and_a_directory_are_refused_in_one_line(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    fifo = tmp_path / "watchlist.fifo"
    os.mkfifo(fifo)
    for path, kind in ((Path("/dev/zero"), "a character device"), (fifo, "a FIFO"),
                       (tmp_path, "a directory")):  # fmt: skip
        done = _tracker(path, *command)
        assert (done.returncode, done.stdout) == (2, ""), done.stderr[-2000:]
        assert done.stderr == f"error: {path}: {NOT_REGULAR.format(kind=kind)}\n"


def test_a_file_over_the_cap_is_refused_unread(tmp_path: Path) -> None:
    big = tmp_path / "watchlist.yaml"
    with big.open("wb") as f:  # a comment line over the cap: valid YAML, too large
        f.write(b"#" * (MAX_WATCHLIST_BYTES + 1))
    done = _tracker(big, "watch", "list")
    assert done.returncode == 2
    assert done.stderr == (
        f"error: {big}: cannot be read: over 4,000,000 bytes (a watchlist is at most 4 MB)\n"
    )
    with big.open("r+b") as f:  # exactly at the cap it is read
        f.truncate(MAX_WATCHLIST_BYTES)
    assert load_watchlist(big).repos == ()


def test_watch_add_refuses_a_fifo_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "watchlist.fifo"
    os.mkfifo(fifo)  # (a process of its own, with a timeout: it blocked forever before)
    done = _tracker(fifo, "watch", "add", "acme/model")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == f"error: {fifo}: {NOT_REGULAR.format(kind='a FIFO')}\n"
