"""The OCI image and its compose file (issue 26, "what operators expect next to the units").

There is no container engine here, so the image's build steps are the Makefile's own
`image-rootfs` target, which the Dockerfile RUNs: it is run into a temporary prefix (dependencies
taken from this venv's site-packages instead of PyPI) and the `tracker` it installs is the one the
compose file's services run, against PostgreSQL: `tracker migrate`, `tracker status` (the poll
workers' healthcheck), `tracker serve` with the API's healthcheck command run as written. The
compose file is parsed and checked against the real CLI: every command it names is a `tracker`
command whose --help exits 0. The image itself is built only where docker or podman exists.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fastapi
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "deploy" / "compose.yaml"
DOCKERFILE = ROOT / "Dockerfile"
TRACKER_SERVICES = ("migrate", "poll", "api")


@pytest.fixture(scope="module")
def prefix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """`make image-rootfs` into a temporary prefix (the image's /opt/tracker)."""
    where = tmp_path_factory.mktemp("image") / "opt" / "tracker"
    deps = Path(fastapi.__file__).resolve().parents[1]  # this venv's site-packages
    done = subprocess.run(
        ["make", "-C", str(ROOT), "image-rootfs", f"IMAGE_PREFIX={where}",
         "IMAGE_PIP_ARGS=--no-deps", f"IMAGE_DEPS_FROM={deps}", f"PY={sys.base_prefix}/bin/python3"],
        capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    yield where


def _env(url: str, state: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACKER_", "HF_"))}
    compose = yaml.safe_load(COMPOSE.read_text())
    env.update(compose["x-tracker"]["environment"])
    env.update(
        TRACKER_DATABASE_URL=url,
        TRACKER_STATE_DIR=str(state),
        TRACKER_WATCHLIST=str(ROOT / "watchlist.yaml"),
    )
    return env


def test_image_rootfs_installs_tracker_and_its_entry_point(prefix: Path, tmp_path: Path) -> None:
    tracker = prefix / ".venv" / "bin" / "tracker"
    where = subprocess.run(
        [str(prefix / ".venv" / "bin" / "python"), "-c", "import tracker; print(tracker.__file__)"],
        cwd=tmp_path, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert Path(where.stdout.strip()).is_relative_to(prefix / ".venv" / "lib"), where
    assert (prefix / "watchlist.yaml").read_bytes() == (ROOT / "watchlist.yaml").read_bytes()
    top = subprocess.run([str(tracker), "--help"], capture_output=True, text=True, check=False)
    assert top.returncode == 0, top.stderr
    # its bytecode is there: the image's root filesystem is read-only to the tracker user
    assert (Path(where.stdout.strip()).parent / "__pycache__").is_dir()


def test_dockerfile_runs_the_make_target_as_a_non_root_user() -> None:
    text = DOCKERFILE.read_text()
    assert "RUN make image-rootfs IMAGE_PREFIX=/opt/tracker" in text
    users = re.findall(r"^USER (\S+)$", text, re.M)
    assert users == ["10001:10001"]
    assert re.findall(r"^ENTRYPOINT (.+)$", text, re.M) == ['["tracker"]']
    assert re.findall(r"^CMD (.+)$", text, re.M) == [
        '["serve", "--host", "0.0.0.0", "--port", "8080"]'
    ]


def test_compose_names_real_commands_and_waits_for_what_each_needs(prefix: Path) -> None:
    compose: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())
    services = compose["services"]
    assert sorted(services) == ["api", "migrate", "poll", "postgres"]
    assert services["postgres"]["healthcheck"]["test"][0] == "CMD-SHELL"
    assert services["migrate"]["depends_on"] == {"postgres": {"condition": "service_healthy"}}
    for name in ("poll", "api"):
        assert services[name]["depends_on"] == {
            "migrate": {"condition": "service_completed_successfully"}
        }
    assert services["poll"]["deploy"]["replicas"] == "${TRACKER_WORKERS:-3}"
    # the stop time covers the units' (120 s: a fetch under way ends within its deadline)
    assert services["poll"]["stop_grace_period"] == "130s"
    tracker = prefix / ".venv" / "bin" / "tracker"
    for name in TRACKER_SERVICES:
        service = services[name]
        assert service["image"] == "tracker:latest"
        assert service["environment"]["TRACKER_DATABASE_URL"].startswith("postgresql+psycopg://")
        command = service["command"]
        helped = subprocess.run(
            [str(tracker), command[0], "--help"], capture_output=True, text=True, check=False
        )
        assert helped.returncode == 0, (name, helped.stderr)
        for option in (c for c in command if c.startswith("--")):
            assert option in helped.stdout, (name, option)
    check = services["poll"]["healthcheck"]["test"]
    assert check[:2] == ["CMD", "tracker"]
    helped = subprocess.run([str(tracker), *check[2:], "--help"], capture_output=True, check=False)
    assert helped.returncode == 0


@pytest.mark.postgres
def test_the_services_commands_run_against_postgresql(
    prefix: Path, tmp_path: Path, pg_database: Any
) -> None:
    """migrate, then the poll workers' healthcheck (`tracker status`), then `tracker serve` as
    the api service runs it, and its healthcheck command as written (the image's python)."""
    compose: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())
    services = compose["services"]
    tracker = str(prefix / ".venv" / "bin" / "tracker")
    with pg_database("image") as url:
        env = _env(url, tmp_path / "state")
        migrated = subprocess.run(
            [tracker, *services["migrate"]["command"]], env=env, capture_output=True, text=True,
            timeout=300, check=False,
        )  # fmt: skip
        assert migrated.returncode == 0, migrated.stderr
        status = subprocess.run(
            [tracker, *services["poll"]["healthcheck"]["test"][2:]], env=env,
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert status.returncode == 0, status.stderr
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        command = [
            "127.0.0.1" if c == "0.0.0.0" else str(port) if c == "8080" else c
            for c in services["api"]["command"]
        ]
        with (
            (tmp_path / "serve.log").open("w") as log,
            subprocess.Popen([tracker, *command], env=env, stdout=log, stderr=log) as server,
        ):
            try:
                check = [
                    str(prefix / ".venv" / "bin" / "python")
                    if c == "/opt/tracker/.venv/bin/python"
                    else c.replace("8080", str(port))
                    for c in services["api"]["healthcheck"]["test"][1:]
                ]
                deadline = time.monotonic() + 60
                while True:
                    probe = subprocess.run(check, capture_output=True, text=True, check=False)
                    if probe.returncode == 0 or time.monotonic() > deadline:
                        break
                    time.sleep(0.5)
                assert probe.returncode == 0, probe.stderr[-1500:]
            finally:
                server.send_signal(signal.SIGTERM)
                server.wait(timeout=30)


def test_the_image_builds_where_a_container_engine_exists() -> None:
    engine = shutil.which("docker") or shutil.which("podman")
    if engine is None:
        pytest.skip(
            "no container engine (docker or podman) here: the image's build steps are checked "
            "through `make image-rootfs` above"
        )
    info = subprocess.run([engine, "info"], capture_output=True, text=True, timeout=60,
                          check=False)  # fmt: skip
    if info.returncode != 0:
        pytest.skip(
            f"{Path(engine).name} is installed but cannot build here (`{Path(engine).name} info` "
            f"exits {info.returncode}: no daemon): the image's build steps are checked through "
            "`make image-rootfs` above"
        )
    built = subprocess.run(["make", "-C", str(ROOT), "image"], capture_output=True, text=True,
                           timeout=1800, check=False)  # fmt: skip
    assert built.returncode == 0, built.stderr[-3000:]
    helped = subprocess.run([engine, "run", "--rm", "tracker:latest", "--help"],
                            capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    assert helped.returncode == 0, helped.stderr
    uid = subprocess.run([engine, "run", "--rm", "--entrypoint", "id", "tracker:latest", "-u"],
                         capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    assert uid.stdout.strip() == "10001"
