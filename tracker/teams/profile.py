"""Team profiles: the watchlist's `teams:` block, validated (`TeamFields`) and resolved to frozen
values (`Team`).

A team lists the repos it uses (each with the revision it pins, or the ref it follows), the cards
it runs on and how many, the transformers/vLLM versions it runs, and per repo its workloads
(fine-tune method and settings, serving engine, context, batch, tensor parallel), the generation
settings it passes itself, whether it applies the chat template, pads with the tokenizer, uses a
classification head or runs remote code. Anything left out is unknown, never assumed: the impact
of an advisory that needs it says so (`tracker.teams.impact`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from tracker.estimate.settings import DEFAULT_CARDS
from tracker.shared.domain import RepoId, is_ref_name, parse_repo_id
from tracker.shared.errors import InvalidRepoIdError

WorkloadKind = Literal["lora", "qlora", "full", "serve"]
Sharding = Literal["none", "zero1", "zero2", "zero3", "fsdp"]
_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
_VERSION = re.compile(r"^[0-9][A-Za-z0-9.+!-]{0,63}$")
CARD_NAMES = tuple(c.name for c in DEFAULT_CARDS)


def _team_name(value: str) -> str:
    if not _NAME.match(value):
        raise ValueError(
            f"team name {value!r} must be 1-64 of lowercase letters, digits, '.', '_' or '-'"
        )
    return value


def _repo_id(value: str) -> str:
    try:
        return parse_repo_id(value)
    except InvalidRepoIdError as exc:
        raise ValueError(str(exc)) from exc


def _ref(value: str) -> str:
    if not is_ref_name(value):
        raise ValueError(f"must be a branch, tag or commit name, not {value!r}")
    return value


def _version(value: str) -> str:
    if not _VERSION.match(value):
        raise ValueError(f"must be a release version such as 4.57.1, not {value!r}")
    return value


_Str = Annotated[str, Field(strict=True)]
_Pos = Annotated[int, Field(strict=True, ge=1, le=10_000_000)]


class CardsFields(BaseModel):
    """`cards: {name: "L4 24 GB", count: 2}`: a card of the estimate's catalogue, or any card
    with its `vram_gb`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Annotated[_Str, Field(min_length=1, max_length=64)]
    count: Annotated[int, Field(strict=True, ge=1, le=1024)] = 1
    vram_gb: Annotated[float, Field(gt=0, le=10_000)] | None = None

    @model_validator(mode="after")
    def _known(self) -> CardsFields:
        if self.vram_gb is None and self.name not in CARD_NAMES:
            raise ValueError(
                f"card {self.name!r} is not in the estimate's catalogue ({', '.join(CARD_NAMES)}): "
                "give its vram_gb"
            )
        return self


class WorkloadFields(BaseModel):
    """One workload on a repo: a fine-tune (`lora`, `qlora`, `full`) or `serve`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: WorkloadKind
    rank: _Pos | None = None
    context: _Pos | None = None
    batch: _Pos = 1
    sharding: Sharding | None = None
    engine: Annotated[_Str, Field(min_length=1, max_length=32)] | None = None
    tensor_parallel: _Pos | None = None

    @model_validator(mode="after")
    def _fits_kind(self) -> WorkloadFields:
        if self.kind == "serve" and (self.rank is not None or self.sharding is not None):
            raise ValueError("rank and sharding are fine-tune settings; a serve workload has none")
        if self.kind != "serve" and (self.engine is not None or self.tensor_parallel is not None):
            raise ValueError("engine and tensor_parallel are serving settings")
        if self.kind == "full" and self.rank is not None:
            raise ValueError("a full fine-tune has no LoRA rank")
        return self


class TeamRepoFields(BaseModel):
    """A repo a team uses and how."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: Annotated[_Str, AfterValidator(_repo_id)]
    revision: Annotated[_Str, AfterValidator(_ref)] | None = None
    follows: Annotated[_Str, AfterValidator(_ref)] | None = None
    workloads: list[WorkloadFields] | None = None
    generation: (
        list[Annotated[_Str, Field(min_length=1, max_length=64)]] | Literal["all"] | None
    ) = None
    chat_template: Annotated[bool, Field(strict=True)] | None = None
    padding: Annotated[bool, Field(strict=True)] | None = None
    classification_head: Annotated[bool, Field(strict=True)] | None = None
    trust_remote_code: Annotated[bool, Field(strict=True)] | None = None

    @model_validator(mode="after")
    def _one_position(self) -> TeamRepoFields:
        if self.revision is not None and self.follows is not None:
            raise ValueError("give the revision it pins or the ref it follows, not both")
        return self


class TeamFields(BaseModel):
    """A `teams:` item."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Annotated[_Str, AfterValidator(_team_name)]
    description: Annotated[_Str, Field(max_length=500)] | None = None
    cards: CardsFields | None = None
    transformers: Annotated[_Str, AfterValidator(_version)] | None = None
    vllm: Annotated[_Str, AfterValidator(_version)] | None = None
    repos: Annotated[list[TeamRepoFields], Field(min_length=1)]


@dataclass(frozen=True)
class Cards:
    name: str
    count: int
    vram_gb: float

    def __str__(self) -> str:
        return f"{self.count} × {self.name}"


@dataclass(frozen=True)
class Workload:
    kind: WorkloadKind
    rank: int | None
    context: int | None
    batch: int
    sharding: Sharding | None
    engine: str | None
    tensor_parallel: int | None

    def __str__(self) -> str:
        if self.kind == "serve":
            parts = [f"serve ({self.engine})" if self.engine else "serve"]
            if self.tensor_parallel:
                parts.append(f"tensor parallel {self.tensor_parallel}")
        else:
            name = {"lora": "LoRA", "qlora": "QLoRA", "full": "full fine-tune"}[self.kind]
            parts = [f"{name} r={self.rank}" if self.rank else name]
            if self.sharding and self.sharding != "none":
                parts.append(self.sharding)
        if self.context:
            parts.append(f"{self.context} tokens")
        parts.append(f"batch {self.batch}")
        return ", ".join(parts)


@dataclass(frozen=True)
class TeamRepo:
    repo_id: RepoId
    revision: str | None
    follows: str | None
    workloads: tuple[Workload, ...] | None
    generation: tuple[str, ...] | Literal["all"] | None
    chat_template: bool | None
    padding: bool | None
    classification_head: bool | None
    trust_remote_code: bool | None

    @property
    def position(self) -> str:
        """What the team runs: `pins R`, `follows REF` or (neither said) `follows the watched
        ref`."""
        if self.revision is not None:
            return f"pins {self.revision}"
        return f"follows {self.follows}" if self.follows else "follows the watched ref"


@dataclass(frozen=True)
class Team:
    name: str
    description: str | None
    cards: Cards | None
    transformers: str | None
    vllm: str | None
    repos: tuple[TeamRepo, ...]

    def repo(self, repo_id: str) -> TeamRepo | None:
        return next((r for r in self.repos if r.repo_id == repo_id), None)


def team_of(fields: TeamFields) -> Team:
    """The frozen value of a validated `teams:` item."""
    cards = None
    if fields.cards is not None:
        vram = fields.cards.vram_gb or next(
            c.vram_gb for c in DEFAULT_CARDS if c.name == fields.cards.name
        )
        cards = Cards(fields.cards.name, fields.cards.count, vram)
    return Team(
        name=fields.name,
        description=fields.description,
        cards=cards,
        transformers=fields.transformers,
        vllm=fields.vllm,
        repos=tuple(
            TeamRepo(
                repo_id=RepoId(r.id),
                revision=r.revision,
                follows=r.follows,
                workloads=None
                if r.workloads is None
                else tuple(
                    Workload(
                        w.kind, w.rank, w.context, w.batch, w.sharding, w.engine, w.tensor_parallel
                    )
                    for w in r.workloads
                ),
                generation=r.generation if r.generation in (None, "all") else tuple(r.generation),  # type: ignore[arg-type]
                chat_template=r.chat_template,
                padding=r.padding,
                classification_head=r.classification_head,
                trust_remote_code=r.trust_remote_code,
            )
            for r in fields.repos
        ),
    )


def team_problems(teams: list[TeamFields]) -> list[str]:
    """Names listed twice, and a repo listed twice in one team."""
    out: list[str] = []
    seen: set[str] = set()
    for i, t in enumerate(teams):
        if t.name in seen:
            out.append(f"teams[{i}]: team {t.name} is listed twice")
        seen.add(t.name)
        ids = [r.id for r in t.repos]
        for rid in sorted({r for r in ids if ids.count(r) > 1}):
            out.append(f"teams[{i}] ({t.name}): {rid} is listed twice")
    return out
