"""Typed settings, prefix TRACKER_; precedence: CLI > environment > defaults.

This is the one module that reads the process environment (`tests/test_architecture.py` checks
it): every knob, the Hub's `HF_ENDPOINT`/`HF_TOKEN` aliases and the systemd markers that choose
the log format are fields here. Nothing is read at import time: `load_settings` reads the
environment when called. `child_env` is the environment a subprocess (git) inherits.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from tracker.artifacts import MAX_FILE_BYTES, MAX_HEADER_BYTES, Limits
from tracker.errors import ConfigError

DEFAULT_HUB = "https://huggingface.co"
LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]


def _env(name: str, *aliases: str) -> AliasChoices:
    """The environment variables of a field, first found wins (CLI overrides use the field name)."""
    return AliasChoices(f"TRACKER_{name.upper()}", *aliases)


class Settings(BaseSettings):
    """Every knob of tracker. All state lives under `state_dir`."""

    model_config = SettingsConfigDict(
        env_prefix="TRACKER_", extra="forbid", frozen=True, populate_by_name=True
    )

    state_dir: Path = Field(
        default=Path("state"), description="Where the store, blobs and demo data live."
    )
    database_url: str | None = Field(
        default=None,
        description="SQLAlchemy URL; default sqlite:///<state_dir>/tracker.db (WAL). postgresql+psycopg://… for multi-worker.",
    )
    watchlist: Path = Field(default=Path("watchlist.yaml"), description="The watchlist file.")
    hf_endpoint: str = Field(
        default=DEFAULT_HUB,
        validation_alias=_env("hf_endpoint", "HF_ENDPOINT"),
        description="The Hub (or a mirror, or the replica): TRACKER_HF_ENDPOINT, then HF_ENDPOINT.",
    )
    hf_token: str | None = Field(
        default=None,
        validation_alias=_env("hf_token", "HF_TOKEN"),
        description="Token for gated and private repos: TRACKER_HF_TOKEN, then HF_TOKEN.",
    )
    hub_public_url: str = Field(
        default=DEFAULT_HUB,
        description="The Hub's public URL, used in advisories (stable even when reading through a mirror or replica).",
    )
    watchlist_sync_s: float = Field(
        default=30.0, gt=0, description="How often the polling daemon re-reads the watchlist file."
    )
    http_timeout_s: float = Field(default=20.0, gt=0)
    retry_attempts: int = Field(default=4, ge=1, le=20)
    max_file_bytes: int = Field(
        default=MAX_FILE_BYTES, gt=0, description="Cap on one tracked file's size."
    )
    max_safetensors_header_bytes: int = Field(
        default=MAX_HEADER_BYTES, gt=0, description="Cap on a safetensors header's declared length."
    )
    advisory_prefix: str = Field(default="TRACKER", pattern=r"^[A-Z][A-Z0-9]{1,15}$")
    render_backstop_cpu_s: int = Field(
        default=30,
        ge=1,
        description="CPU seconds a chat-template render request may use before its worker is killed and the revision is retried later (a backstop: render outcomes come from a deterministic step budget).",
    )
    render_backstop_wall_s: float = Field(
        default=120.0,
        gt=0,
        description="Seconds to wait for a chat-template render request before the worker is killed and the revision is retried later.",
    )
    log_level: LogLevel = Field(
        default="WARNING", description="structlog level (the systemd units set INFO)."
    )
    under_systemd: bool = Field(
        default=False,
        validation_alias=AliasChoices("JOURNAL_STREAM", "INVOCATION_ID"),
        description="Set by systemd (JOURNAL_STREAM/INVOCATION_ID): logs are JSON lines.",
    )

    @field_validator("hf_endpoint")
    @classmethod
    def _strip_slash(cls, value: str) -> str:
        return value.rstrip("/")

    @field_validator("hf_token")
    @classmethod
    def _blank_is_none(cls, value: str | None) -> str | None:
        return value or None

    @field_validator("log_level", mode="before")
    @classmethod
    def _upper(cls, value: object) -> object:
        return value.strip().upper() if isinstance(value, str) else value

    @field_validator("under_systemd", mode="before")
    @classmethod
    def _present(cls, value: object) -> bool:
        return bool(value) and value not in ("0", "false", "False")

    @property
    def limits(self) -> Limits:
        """The fetch caps (`tracker.artifacts.Limits`)."""
        return Limits(self.max_file_bytes, self.max_safetensors_header_bytes)

    @property
    def effective_database_url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite:///{(self.state_dir / 'tracker.db').resolve()}"


def load_settings(**overrides: object) -> Settings:
    """Build Settings from overrides (CLI) over the environment over defaults, or raise ConfigError."""
    clean = {k: v for k, v in overrides.items() if v is not None}
    try:
        return Settings(**clean)  # type: ignore[arg-type]
    except ValidationError as exc:
        problems = tuple(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
        raise ConfigError("invalid settings", problems) from exc


def child_env(
    *, keep: Iterable[str] | None = None, drop: Iterable[str] = (), **extra: str
) -> dict[str, str]:
    """The environment of a child process (git): this process's (only the names in `keep` when
    given), without the names in `drop`, with `extra` set."""
    names = set(os.environ) if keep is None else set(keep) & set(os.environ)
    env = {k: os.environ[k] for k in names - set(drop)}
    env.update(extra)
    return env
