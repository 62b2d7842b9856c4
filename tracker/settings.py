"""Typed settings, prefix TRACKER_; precedence: CLI > environment > file > defaults.

Nothing is read at import time: `Settings()` (or `load_settings`) reads the environment when called.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from tracker.errors import ConfigError


class Settings(BaseSettings):
    """Every knob of tracker. All state lives under `state_dir`."""

    model_config = SettingsConfigDict(env_prefix="TRACKER_", extra="forbid", frozen=True)

    state_dir: Path = Field(
        default=Path("state"), description="Where the store, blobs and demo data live."
    )
    database_url: str | None = Field(
        default=None,
        description="SQLAlchemy URL; default sqlite:///<state_dir>/tracker.db (WAL). postgresql+psycopg://… for multi-worker.",
    )
    watchlist: Path = Field(default=Path("watchlist.yaml"), description="The watchlist file.")
    hf_endpoint: str | None = Field(
        default=None, description="Hub URL; falls back to HF_ENDPOINT, then the Hub."
    )
    hf_token: str | None = Field(default=None, description="Hub token; falls back to HF_TOKEN.")
    hub_public_url: str = Field(
        default="https://huggingface.co",
        description="The Hub's public URL, used in advisories (stable even when reading through a mirror or replica).",
    )
    watchlist_sync_s: float = Field(
        default=30.0, gt=0, description="How often the polling daemon re-reads the watchlist file."
    )
    http_timeout_s: float = Field(default=20.0, gt=0)
    retry_attempts: int = Field(default=4, ge=1, le=20)
    max_file_bytes: int = Field(
        default=64_000_000, gt=0, description="Cap on one tracked file's size."
    )
    max_safetensors_header_bytes: int = Field(
        default=100_000_000, gt=0, description="Cap on a safetensors header's declared length."
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
