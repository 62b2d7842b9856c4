"""Typed settings, prefix TRACKER_; precedence: CLI > environment > defaults.

This is the one module that reads the process environment (`tests/test_architecture.py` checks
it): every knob, the Hub's `HF_ENDPOINT`/`HF_TOKEN` aliases and the systemd markers that choose
the log format are fields here. Nothing is read at import time: `load_settings` reads the
environment when called. `child_env` is the environment a subprocess (git) inherits.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterable, Mapping
from contextvars import ContextVar
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from pydantic import AliasChoices, Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from tracker.shared.artifacts import MAX_FILE_BYTES, MAX_HEADER_BYTES, Limits
from tracker.shared.errors import ConfigError
from tracker.shared.problems import describe

DEFAULT_HUB = "https://huggingface.co"
MIN_TOKEN_CHARS = 16
DAY_S = 86400
GiB = 1 << 30
MAX_RATE = 1_000_000
"""The most requests per window (or at once) a rate budget setting may allow."""
LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]


def _env(name: str, *aliases: str) -> AliasChoices:
    """The environment variables of a field, first found wins (CLI overrides use the field name)."""
    return AliasChoices(f"TRACKER_{name.upper()}", *aliases)


def cors_list(value: str) -> list[str]:
    """The origins of a `cors_origins` setting, in order."""
    return [o.strip().rstrip("/") for o in value.split(",") if o.strip()]


class Settings(BaseSettings):
    """Every knob of tracker. All state lives under `state_dir`."""

    model_config = SettingsConfigDict(
        env_prefix="TRACKER_",
        extra="forbid",
        frozen=True,
        populate_by_name=True,
        allow_inf_nan=False,
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
    public_url: str | None = Field(
        default=None,
        description="The URL readers reach `tracker serve` at (e.g. behind a reverse proxy): feed links are made absolute against it; unset: against each request's own URL (its Host header). Its host is the authority of feed and entry ids (tag:HOST,2026:…): set it once, before readers subscribe.",
    )
    watchlist_sync_s: float = Field(
        default=30.0,
        gt=0,
        le=DAY_S,
        description="How often the polling daemon re-reads the watchlist file.",
    )
    http_timeout_s: float = Field(
        default=20.0,
        gt=0,
        le=600,
        description="Connect and per-read timeout of one HTTP request; also the stall window: a body must bring 16 KiB (or its end) in every window.",
    )
    request_deadline_s: float = Field(
        default=120.0,
        gt=0,
        le=3600,
        description="Overall deadline of one Hub call (all its pages and redirects), however slowly the server answers.",
    )
    retry_after_cap_s: float = Field(
        default=60.0,
        ge=0,
        le=3600,
        description="The longest Retry-After honoured by sleeping; a longer one reschedules the repo instead (at most poll_backoff_max_s out, or the repo's interval when longer).",
    )
    poll_deadline_s: float = Field(
        default=900.0,
        gt=0,
        le=86400,
        description="Overall deadline of one repo's poll; the revisions stored before it are kept.",
    )
    retry_attempts: int = Field(default=4, ge=1, le=20)
    max_file_bytes: int = Field(
        default=MAX_FILE_BYTES, gt=0, le=GiB, description="Cap on one tracked file's size."
    )
    scan_max_file_bytes: int = Field(
        default=2_000_000,
        gt=0,
        le=GiB,
        description="`tracker scan` skips (and lists) a file larger than this.",
    )
    scan_max_files: int = Field(
        default=50_000,
        ge=1,
        le=10_000_000,
        description="`tracker scan` reads at most this many candidate files under its PATH.",
    )
    max_safetensors_header_bytes: int = Field(
        default=MAX_HEADER_BYTES,
        gt=0,
        le=GiB,
        description="Cap on a safetensors header's declared length.",
    )
    advisory_prefix: str = Field(default="TRACKER", pattern=r"^[A-Z][A-Z0-9]{1,15}$")
    render_backstop_cpu_s: int = Field(
        default=30,
        ge=1,
        le=DAY_S,
        description="CPU seconds a chat-template render request may use before its worker is killed and the revision is retried later (a backstop: render outcomes come from a deterministic step budget).",
    )
    render_backstop_wall_s: float = Field(
        default=120.0,
        gt=0,
        le=DAY_S,
        description="Seconds to wait for a chat-template render request before the worker is killed and the revision is retried later.",
    )
    analysis_timeout_s: float = Field(
        default=300.0,
        gt=0,
        le=86400,
        description="Wall-clock seconds the analysis of one revision (diffs, chat-template renders, estimate, preflight) may take in its worker; past it the worker is killed and the revision is recorded as could not analyse (retried only once this limit is raised).",
    )
    analysis_memory_mib: int = Field(
        default=4096,
        ge=64,
        le=1 << 20,
        description="Address space (MiB) the analysis of one revision may add to its worker; past it the revision is recorded as could not analyse (retried only once this limit is raised).",
    )
    webhook_allow_networks: str = Field(
        default="",
        description="Comma-separated CIDRs webhook targets may resolve to although not public (loopback, private, link-local are refused otherwise), e.g. 127.0.0.0/8,::1/128.",
    )
    http_header_timeout_s: float = Field(
        default=10.0,
        gt=0,
        le=600,
        description="Seconds `tracker serve` gives a client to send a request's whole header, from the connection (or the request's first byte on a kept-alive one); past it the connection is closed (slow-header clients cannot hold connections).",
    )
    http_parser: Literal["httptools", "h11"] = Field(
        default="httptools",
        description="uvicorn's HTTP/1.1 implementation behind `tracker serve` and `tracker demo --serve`: httptools (C, the faster; URLs up to 65,535 bytes, else 414) or h11 (pure Python; a request head of up to 16,384 bytes, h11's limit: a longer request line is answered 414, a longer head 431). Either answers what it refuses with a problem document.",
    )
    webhook_timeout_s: float = Field(
        default=10.0,
        gt=0,
        le=600,
        description="Seconds one webhook delivery attempt may take in all: connecting, sending, the answer's status, headers and the part of its body that is read (past it the attempt fails and is retried).",
    )
    webhook_concurrency: int = Field(
        default=8,
        ge=1,
        le=256,
        description="Subscriptions whose deliveries are attempted at once (each subscription's one at a time), so a slow receiver delays no other.",
    )
    webhook_max_attempts: int = Field(
        default=16, ge=1, le=100, description="Attempts of a webhook delivery before it fails."
    )
    webhook_retry_base_s: float = Field(
        default=5.0,
        gt=0,
        le=DAY_S,
        description="The first retry's backoff step; each further one doubles, with jitter.",
    )
    webhook_retry_max_s: float = Field(
        default=21600.0,
        gt=0,
        le=7 * DAY_S,
        description="The longest backoff step between two attempts.",
    )
    hub_webhook_secret: SecretStr | None = Field(
        default=None,
        description="The secret the Hub sends in X-Webhook-Secret to POST /v1/hooks/huggingface (unset: that endpoint is off).",
    )
    queue_check_s: float = Field(
        default=0.25,
        gt=0,
        le=60,
        description="How often the polling daemon looks at its queues: poll requests (Hub webhooks, manual triggers) and due webhook deliveries.",
    )
    worker_lease_s: float = Field(
        default=120.0,
        gt=0,
        le=86400,
        description="How long a worker's claim on a repo lasts without renewal; its heartbeat renews the claims of running polls every third of it, and a dead worker's repos are taken over once it runs out.",
    )
    worker_forget_s: float = Field(
        default=600.0,
        gt=0,
        le=86400,
        description="A worker without a heartbeat for this long (or a lease, when that is longer) leaves `tracker status` and the workers table (its leases ran out long before).",
    )
    poll_concurrency: int = Field(
        default=4,
        ge=1,
        le=256,
        description="Repos one polling daemon polls at the same time; it claims (leases) no more than it is polling, so a worker that dies strands at most this many repos for a lease.",
    )
    poll_jitter: float = Field(
        default=0.1,
        ge=0,
        le=1,
        description="Each repo's next poll comes up to this fraction of its interval later (chosen at random), so polls spread out.",
    )
    poll_backoff_max_s: float = Field(
        default=21600.0,
        gt=0,
        le=365 * DAY_S,
        description="A failing repo's wait doubles from its poll interval with each failure, up to this (or its interval when longer).",
    )
    rate_budget: Literal["auto", "on", "off"] = Field(
        default="auto",
        description="The shared request budget per Hub endpoint bucket: auto = on for huggingface.co only (a mirror or replica publishes no limits).",
    )
    hub_tier: Literal["anonymous", "free", "pro", "team", "enterprise"] = Field(
        default="free",
        description="The Hub account tier whose published 5-minute limits the rate budget follows.",
    )
    rate_window_s: float = Field(
        default=300.0, gt=0, le=86400, description="The rate budget's fixed window."
    )
    rate_api_per_window: int | None = Field(
        default=None,
        ge=1,
        le=MAX_RATE,
        description="Requests per window to /api/ (default: the tier's).",
    )
    rate_resolvers_per_window: int | None = Field(
        default=None,
        ge=1,
        le=MAX_RATE,
        description="Requests per window to file URLs (default: the tier's).",
    )
    rate_pages_per_window: int | None = Field(
        default=None,
        ge=1,
        le=MAX_RATE,
        description="Requests per window to other pages (default: the tier's).",
    )
    rate_burst: int = Field(
        default=10,
        ge=1,
        le=MAX_RATE,
        description="Requests a window may take at once; the rest of its quota is spread evenly over it.",
    )
    preflight_cache_dir: Path | None = Field(
        default=None,
        description="Where preflight keeps transformers wheels and their symbol tables; default <state_dir>/cache/preflight.",
    )
    effects_cache_dir: Path | None = Field(
        default=None,
        description="Where executed effects (transformers run on both sides of a change) are kept, keyed by their inputs, the installed libraries and tracker's code; default $XDG_CACHE_HOME/tracker/effects (~/.cache/tracker/effects).",
    )
    preflight_index_url: str | None = Field(
        default=None,
        description="The package index preflight fetches wheels from (pip download --index-url); default pip's own configuration.",
    )
    api_write_token: SecretStr | None = Field(
        default=None,
        description="The bearer token every write endpoint of the HTTP API needs (several, comma-separated, during rotation); unset: writes are refused.",
    )
    api_read_token: SecretStr | None = Field(
        default=None,
        description="When set, every read of the HTTP API (GET, OSV queries) needs this bearer token or a write token (several, comma-separated, during rotation); unset: reads are open.",
    )
    api_memo_bytes: int = Field(
        default=64 * 1024 * 1024,
        ge=0,
        le=16 * GiB,
        description="The most bytes of rendered answers (advisory list, feeds, diffs, pages) the HTTP API keeps in memory until the store changes; an answer over an eighth of it is rendered each time.",
    )
    cors_origins: str = Field(
        default="*",
        description="Origins a browser dashboard may call the HTTP API from (CORS): `*` any (no cookies are ever sent cross-origin; a read or write token travels in the Authorization header), a comma-separated list of origins (`https://dash.example.org`), or empty for none.",
    )
    log_level: LogLevel = Field(
        default="WARNING", description="structlog level (the systemd units set INFO)."
    )
    under_systemd: bool = Field(
        default=False,
        validation_alias=AliasChoices("JOURNAL_STREAM", "INVOCATION_ID"),
        description="Set by systemd (JOURNAL_STREAM/INVOCATION_ID): logs are JSON lines.",
    )

    notify_socket: str | None = Field(
        default=None,
        validation_alias=AliasChoices("NOTIFY_SOCKET"),
        description="Set by systemd for Type=notify units: the daemon reports READY=1 and WATCHDOG=1 there.",
    )
    watchdog_usec: int | None = Field(
        default=None,
        ge=0,
        le=DAY_S * 1_000_000,
        validation_alias=AliasChoices("WATCHDOG_USEC"),
        description="Set by systemd with WatchdogSec=: the daemon sends WATCHDOG=1 every half of it.",
    )

    @field_validator("state_dir")
    @classmethod
    def _a_directory(cls, value: Path) -> Path:
        if value.exists() and not value.is_dir():
            raise ValueError(f"{str(value)!r} exists and is not a directory")
        return value

    @field_validator("database_url")
    @classmethod
    def _a_database_url(cls, value: str | None) -> str | None:
        if not value:
            return None
        return check_database_url(value)

    @field_validator("cors_origins")
    @classmethod
    def _origins(cls, value: str) -> str:
        for origin in cors_list(value):
            if origin != "*" and (
                not origin.startswith(("http://", "https://")) or origin.count("/") != 2
            ):
                raise ValueError(
                    f"{origin!r} is not an origin (scheme://host[:port], no path) or '*'"
                )
        return value

    @field_validator("public_url")
    @classmethod
    def _public_url(cls, value: str | None) -> str | None:
        return cls._an_http_url(value) if value else None

    @field_validator("hf_endpoint", "hub_public_url")
    @classmethod
    def _an_http_url(cls, value: str) -> str:
        return check_http_url(value)

    @field_validator("webhook_allow_networks")
    @classmethod
    def _networks(cls, value: str) -> str:
        from tracker.webhooks.ssrf import parse_networks

        parse_networks(value)
        return value

    @field_validator("hub_webhook_secret")
    @classmethod
    def _hub_secret(cls, value: SecretStr | None) -> SecretStr | None:
        # Never echo the value: a problem names the variable only.
        if value is None or not value.get_secret_value():
            return None
        if not value.get_secret_value().isascii():
            raise ValueError("the Hub sends its webhook secret as ASCII only")
        return value

    @field_validator("hf_token")
    @classmethod
    def _blank_is_none(cls, value: str | None) -> str | None:
        return value or None

    @field_validator("api_write_token", "api_read_token")
    @classmethod
    def _tokens(cls, value: SecretStr | None) -> SecretStr | None:
        # Never echo the value: a problem names the variable only.
        if value is None or not value.get_secret_value().strip():
            return None
        tokens = [t.strip() for t in value.get_secret_value().split(",")]
        if any(len(t) < MIN_TOKEN_CHARS for t in tokens):
            raise ValueError(f"each token must be at least {MIN_TOKEN_CHARS} characters")
        return SecretStr(",".join(tokens))

    def api_tokens(self, which: Literal["read", "write"]) -> tuple[str, ...]:
        """The accepted bearer tokens: for writes the write tokens (empty: writes refused); for
        reads the read tokens and the write tokens, or none at all when no read token is set
        (empty: reads are open)."""

        def split(value: SecretStr | None) -> tuple[str, ...]:
            return tuple(value.get_secret_value().split(",")) if value is not None else ()

        write = split(self.api_write_token)
        if which == "write":
            return write
        read = split(self.api_read_token)
        return read + write if read else ()

    @field_validator("log_level", mode="before")
    @classmethod
    def _upper(cls, value: object) -> object:
        return value.strip().upper() if isinstance(value, str) else value

    @field_validator("under_systemd", mode="before")
    @classmethod
    def _present(cls, value: object) -> bool:
        return bool(value) and value not in ("0", "false", "False")

    @property
    def forget_workers_after_s(self) -> float:
        """How long after its last heartbeat a worker leaves `tracker status` and the workers
        table: `worker_forget_s`, or a lease when that is longer (its repos are taken over
        first)."""
        return max(self.worker_forget_s, self.worker_lease_s)

    @property
    def limits(self) -> Limits:
        """The fetch caps (`tracker.shared.artifacts.Limits`)."""
        return Limits(self.max_file_bytes, self.max_safetensors_header_bytes, self.poll_deadline_s)

    @property
    def effective_effects_cache_dir(self) -> Path:
        """Where executed effects are cached (`effects_cache_dir`, else the user's cache dir)."""
        if self.effects_cache_dir is not None:
            return self.effects_cache_dir
        base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        return Path(base) / "tracker" / "effects"

    @property
    def effective_preflight_cache_dir(self) -> Path:
        """Where preflight's wheels and symbol tables live (`preflight_cache_dir` or under the state dir)."""
        return self.preflight_cache_dir or self.state_dir / "cache" / "preflight"

    @property
    def effective_database_url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite:///{(self.state_dir / 'tracker.db').resolve()}"


def check_http_url(url: str) -> str:
    """`url` without a trailing slash if it is an http(s) URL with a host and, when it names one,
    a port in 1-65535; else ValueError (a bad port was accepted at start, then every request
    failed: "unexpected InvalidURL" for `:abc`, a misleading "Connection refused" for `:99999`)."""
    expected = "expected http(s)://HOST[:PORT] with PORT 1-65535"
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"{url!r} is not an http(s) URL; {expected}")
    try:
        port = parts.port
    except ValueError:
        port = 0
    if port == 0:
        raise ValueError(f"{url!r} has a bad port; {expected}")
    if not parts.hostname:
        raise ValueError(f"{url!r} has no host; {expected}")
    return url.rstrip("/")


def check_database_url(url: str) -> str:
    """`url` if it is a SQLite or PostgreSQL SQLAlchemy URL tracker can open, else ValueError."""
    example = "sqlite:////ABSOLUTE/PATH.db or postgresql+psycopg://USER@HOST[:PORT]/DB"
    parts = urlsplit(url)
    dialect = parts.scheme.partition("+")[0]
    if dialect == "sqlite":
        if not url.startswith("sqlite:///"):
            raise ValueError(f"{url!r} is not a SQLite URL (sqlite:///PATH); expected {example}")
        return url
    if dialect not in ("postgresql", "postgres"):
        raise ValueError(f"{url!r} is not a SQLite or PostgreSQL URL; expected {example}")
    try:
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError:
        raise ValueError(f"{url!r} has a bad port; expected {example}") from None
    if not parts.hostname or not parts.path.strip("/"):
        raise ValueError(f"{url!r} needs a host and a database name; expected {example}")
    return url


def allowed_range(name: str) -> str | None:
    """`>= 1 and <= 20` for a numeric Settings field (its bounds, from the model), else None."""
    field = Settings.model_fields.get(name)
    if field is None:
        return None
    parts = []
    for bound in field.metadata:
        for attr, op in (("gt", ">"), ("ge", ">="), ("lt", "<"), ("le", "<=")):
            value = getattr(bound, attr, None)
            if isinstance(value, int | float):
                shown = int(value) if float(value).is_integer() else value
                parts.append(f"{op} {shown}")
    return " and ".join(parts) or None


def _field_named(loc: str) -> str:
    """The Settings field an error's location names (a field name or one of its variables)."""
    if loc in Settings.model_fields:
        return loc
    for name, field in Settings.model_fields.items():
        alias = field.validation_alias
        if isinstance(alias, AliasChoices) and loc in alias.choices:
            return name
    return loc


def _variable(name: str) -> str:
    """The environment variable a Settings field is read from."""
    field = Settings.model_fields.get(name)
    alias = field.validation_alias if field is not None else None
    if isinstance(alias, AliasChoices) and isinstance(alias.choices[0], str):
        return alias.choices[0]
    return f"TRACKER_{name.upper()}"


def known_variables() -> frozenset[str]:
    """Every TRACKER_* variable tracker reads."""
    return frozenset(_variable(name) for name in Settings.model_fields) - {
        "JOURNAL_STREAM",
        "NOTIFY_SOCKET",
        "WATCHDOG_USEC",
    }


def unknown_variables() -> list[tuple[str, str | None]]:
    """TRACKER_* variables in the environment that are no setting, each with the closest known
    one (TRACKER_TEST_* belong to the test suite)."""
    known = sorted(known_variables())
    out: list[tuple[str, str | None]] = []
    for name in sorted(os.environ):
        if (
            name.startswith("TRACKER_")
            and name not in known
            and not name.startswith("TRACKER_TEST_")
        ):
            close = difflib.get_close_matches(name, known, n=1)
            out.append((name, close[0] if close else None))
    return out


CLI_OVERRIDES: ContextVar[Mapping[str, object] | None] = ContextVar("cli_overrides", default=None)
"""Settings given as options on the command line (`tracker --state-dir DIR …`), set by the CLI's
root callback for the command it runs; `load_settings` puts them over the environment."""


def load_settings(**overrides: object) -> Settings:
    """Build Settings from overrides (the CLI's, then these) over the environment over defaults,
    or raise ConfigError (one problem per bad setting, named by its variable). Unknown TRACKER_*
    variables are warned about (with the setting they may have meant), never silently ignored."""
    import structlog

    log = structlog.get_logger(__name__)
    for name, close in unknown_variables():
        hint = f" (did you mean {close}?)" if close else ""
        log.warning(
            "settings.unknown_variable",
            variable=name,
            did_you_mean=close,
            message=f"{name} is not a tracker setting{hint}; it is ignored",
        )
    clean = {k: v for k, v in {**(CLI_OVERRIDES.get() or {}), **overrides}.items() if v is not None}
    try:
        return Settings(**clean)  # type: ignore[arg-type]
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            field = str(error["loc"][0]) if error["loc"] else ""
            where = _variable(field) if field in Settings.model_fields else field
            problem = describe({**error, "loc": error["loc"][1:]}, None, where)
            bounds = allowed_range(_field_named(field))
            problems.append(f"{problem} (allowed: {bounds})" if bounds else problem)
        raise ConfigError("invalid settings", tuple(dict.fromkeys(problems))) from exc


def child_env(
    *, keep: Iterable[str] | None = None, drop: Iterable[str] = (), **extra: str
) -> dict[str, str]:
    """The environment of a child process (git): this process's (only the names in `keep` when
    given), without the names in `drop`, with `extra` set."""
    names = set(os.environ) if keep is None else set(keep) & set(os.environ)
    env = {k: os.environ[k] for k in names - set(drop)}
    env.update(extra)
    return env
