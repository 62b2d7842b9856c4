"""Helpers of the worker tests: `tracker poll` daemons as processes, their JSON log read live, and
replica repos whose commits change what advisories are about."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tracker.replica.repos import commit

TRACKER = Path(sys.executable).with_name("tracker")


def env_for(tmp_path: Path, hub_url: str, **extra: str) -> dict[str, str]:
    """A clean environment for `tracker` processes against `hub_url`, state under `tmp_path`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACKER_", "HF_"))}
    env.update(
        TRACKER_STATE_DIR=str(tmp_path / "state"),
        TRACKER_WATCHLIST=str(tmp_path / "watchlist.yaml"),
        TRACKER_HF_ENDPOINT=hub_url,
        TRACKER_LOG_LEVEL="INFO",
        TRACKER_QUEUE_CHECK_S="0.1",
        TRACKER_RETRY_ATTEMPTS="2",
        HF_HOME=str(tmp_path / "hf-home"),
        HF_HUB_DISABLE_TELEMETRY="1",
        HF_HUB_DISABLE_XET="1",
        **extra,
    )
    return env


def run(env: dict[str, str], *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(TRACKER), *args], env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def status(env: dict[str, str]) -> dict[str, Any]:
    done = run(env, "status", "--json")
    assert done.returncode == 0, done.stderr
    out: dict[str, Any] = json.loads(done.stdout)
    return out


class Daemon:
    """A `tracker poll` process whose stderr JSON events are collected as they come, each with
    the monotonic time it was read."""

    def __init__(self, env: dict[str, str], *args: str) -> None:
        self.proc = subprocess.Popen(
            [str(TRACKER), "poll", *args],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        self.events: list[tuple[float, dict[str, Any]]] = []
        self.plain: list[str] = []
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._watchdog = threading.Timer(240, self.proc.kill)  # a hung daemon fails one test
        self._watchdog.daemon = True
        self._watchdog.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            with self._lock:
                if line.startswith("{"):
                    self.events.append((time.monotonic(), json.loads(line)))
                else:
                    self.plain.append(line)

    def of(self, name: str, **match: object) -> list[tuple[float, dict[str, Any]]]:
        with self._lock:
            return [
                (t, e)
                for t, e in self.events
                if e["event"] == name and all(e.get(k) == v for k, v in match.items())
            ]

    def names(self) -> list[str]:
        with self._lock:
            return [str(e["event"]) for _, e in self.events]

    def wait(self, timeout: float = 60) -> int:
        rc = self.proc.wait(timeout=timeout)
        self._reader.join(timeout=30)
        self._watchdog.cancel()
        assert self.proc.stderr is not None
        self.proc.stderr.close()
        return rc

    def stop(self, timeout: float = 60) -> int:
        import signal

        self.proc.send_signal(signal.SIGTERM)
        return self.wait(timeout)

    def kill(self) -> None:
        import signal

        self.proc.send_signal(signal.SIGKILL)
        self.wait(30)


def until(what: Callable[[], object], timeout: float = 60.0, step: float = 0.05) -> None:
    deadline = time.monotonic() + timeout
    while not what():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(step)


def config(eos: int, vocab: int = 32000) -> bytes:
    """A small Llama config.json; a changed `eos_token_id` is an advisory."""
    return json.dumps(
        {
            "architectures": ["LlamaForCausalLM"],
            "model_type": "llama",
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_attention_heads": 4,
            "num_hidden_layers": 2,
            "num_key_value_heads": 4,
            "vocab_size": vocab,
            "eos_token_id": eos,
            "bos_token_id": 1,
            "torch_dtype": "bfloat16",
        },
        indent=2,
    ).encode()


def commit_eos(repo: Path, eos: int) -> str:
    return commit(repo, {"config.json": config(eos)}, f"eos {eos}")
