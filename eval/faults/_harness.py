"""Pieces the fault scenarios share: a hub over the real agents, fake models, child processes, log capture."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import random
import sqlite3
import sys
import zlib
from collections.abc import Iterator, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import click

from scopehub.agents import AgentRegistry, discover_agents
from scopehub.hub.facts import (
    FactKeeper,
)
from scopehub.hub.models import (
    ChatModel,
)
from scopehub.hub.models.testing import FunctionModel
from scopehub.hub.orchestrator import (
    Deps,
    Hub,
)
from scopehub.hub.settings import Settings
from scopehub.memory import SEARCH_METHODS, Store

from ._outcome import Outcome

log = logging.getLogger(__name__)

# -- shared pieces ------------------------------------------------------------------------------

EXTRACTOR_MARK = "You extract lasting facts"  # how a fake model tells the fact extractor's call apart
PHRASES = (
    "add buy milk to my tasks",
    "remind me tomorrow at 9 to call the bank",
    "here is an email from my boss: the report is due friday",
    "save a note: the wifi password is on the fridge",
    "tell me a joke",
    "what is on my todo list",
    "yes, at 7pm",
    "draft a reply to that email",
)


def hub_settings(**overrides: Any) -> Settings:
    """Settings for a scenario: the defaults (and HUB_* variables) plus ``overrides``, never a ``.env`` file."""
    return Settings(_env_file=None, **overrides)


@lru_cache(maxsize=1)
def agent_registry() -> AgentRegistry:
    return discover_agents()


def make_hub(
    store: Store,
    model: ChatModel | None,
    *,
    router_model: ChatModel | None = None,
    facts: bool | Any = False,
    **settings: Any,
) -> Hub:
    """A hub over the real agents with ``model``; ``facts=True`` adds a FactKeeper on the same model."""
    keeper = FactKeeper(store, model=model) if facts is True else (facts or None)
    deps = Deps(store=store, settings=hub_settings(**settings), model=model, router_model=router_model, facts=keeper)
    return Hub(deps, agent_registry())


def last_user_text(messages: Sequence[dict[str, Any]]) -> str:
    """The content of the last user message of a provider conversation."""
    for message in reversed(messages):
        if message.get("role") == "user":
            return str(message.get("content") or "")
    return ""


def is_extraction(messages: Sequence[dict[str, Any]]) -> bool:
    """Whether a model call is the fact extractor's."""
    return bool(messages) and str(messages[0].get("content") or "").startswith(EXTRACTOR_MARK)


def echo_model(*, max_latency: float = 0.0, seed: int = 0) -> FunctionModel:
    """A fast fake model: after 0..``max_latency`` s it answers ``re: <the message>``; extraction finds nothing."""
    rng = random.Random(seed)

    async def answer(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        # Always yield to the loop, so concurrent chats really interleave.
        await asyncio.sleep(rng.uniform(0.0, max_latency) if max_latency > 0 else 0)
        if is_extraction(messages):
            return '{"facts": []}'
        return "re: " + last_user_text(messages)[:200]

    return FunctionModel(answer, name="echo")


def child_env() -> dict[str, str]:
    """The environment of child processes: no developer settings, offline litellm, the checkout root on the path.

    The root makes ``tests.fakes`` importable; ``scopehub`` itself comes from the interpreter's
    install, as in the parent (the test suite checks that this is the checkout).
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HUB_", "TELEGRAM_")) or k == "HUB_TEST_GUARD"}
    env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def fake_openai() -> Any:
    """The test suite's loopback OpenAI-compatible fake (``tests/fakes/openai_server/``), also
    when ``tests`` is not importable (the installed ``agents-hub`` command)."""
    try:
        from tests.fakes import openai_server
    except ImportError:
        root = Path(__file__).resolve().parents[2]
        # A module or (since it was split) a package: either is the checkout's fake.
        fake = root / "tests" / "fakes" / "openai_server"
        if not (fake.with_suffix(".py").is_file() or (fake / "__init__.py").is_file()):
            raise click.ClickException("this scenario needs the loopback fake in tests/fakes (a source checkout)") from None
        sys.path.insert(0, str(root))
        from tests.fakes import openai_server
    return openai_server


@contextlib.contextmanager
def quiet_litellm() -> Iterator[None]:
    """litellm prints help banners and logs every provider error: not what a report should show."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    previous = litellm.suppress_debug_info
    litellm.suppress_debug_info = True
    logger = logging.getLogger("LiteLLM")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        litellm.suppress_debug_info = previous
        logger.setLevel(level)


class LogRecords(logging.Handler):
    """Keeps log records (the fail-open scenario checks that failures are logged)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def text(self) -> str:
        return "\n".join(f"{r.name} {r.levelname} {r.getMessage()}" for r in self.records)


@contextlib.contextmanager
def capture_logs(name: str = "scopehub.hub") -> Iterator[LogRecords]:
    logger = logging.getLogger(name)
    handler = LogRecords()
    level = logger.level
    logger.setLevel(logging.INFO)  # tool failures are logged at INFO
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)




WORDS = ("milk", "bank", "report", "friday", "invoice", "dentist", "budget", "wifi", "garden", "flight")

def tail_of(path: Path, chars: int = 400) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")[-chars:].strip()
    except OSError:
        return ""


def write_log(path: Path, n: int, scopes: Sequence[str], seed: int) -> dict[tuple[str, str], str]:
    """A canonical JSONL chat log of ``n`` messages over ``scopes``; returns (scope, id) -> text."""
    rng = random.Random(seed)
    expected: dict[tuple[str, str], str] = {}
    with path.open("w", encoding="utf-8") as handle:
        for i in range(n):
            scope = scopes[i % len(scopes)]
            turn = i // len(scopes)
            ext_id = f"m{i}"
            text = f"message {i} about the {rng.choice(WORDS)} and the {rng.choice(WORDS)}"
            record: dict[str, Any] = {"id": ext_id, "scope": scope, "role": "user" if turn % 2 == 0 else "assistant", "text": text, "ts": 1_700_000_000 + i}
            if turn % 2:
                record["agent"] = "tasks"
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
            expected[(scope, ext_id)] = text
    return expected


class Observer:
    """A second connection that reads what is committed (WAL readers never block the writer)."""

    def __init__(self, db: Path) -> None:
        self.db = db
        self.conn: sqlite3.Connection | None = None

    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        if self.conn is None:
            if not self.db.exists():
                return []
            self.conn = sqlite3.connect(self.db, timeout=30, isolation_level=None)
        try:
            return self.conn.execute(sql, params).fetchall()
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):
                return []  # killed or still before the schema
            raise

    def count(self, scope: str | None = None) -> int:
        if scope is None:
            rows = self._query("SELECT count(*) FROM messages WHERE ext_id IS NOT NULL")
        else:
            rows = self._query("SELECT count(*) FROM messages WHERE scope = ?", (scope,))
        return rows[0][0] if rows else 0

    def snapshot(self) -> dict[tuple[str, str], str]:
        return {(s, e): t for s, e, t in self._query("SELECT scope, ext_id, text FROM messages WHERE ext_id IS NOT NULL")}

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def reopen(db: Path, out: Outcome, label: str) -> Store | None:
    """Open the file as a restarted process would (migrations included) and check its integrity."""
    try:
        store = Store(db)
    except Exception as exc:
        out.fail("crashed", f"{label}: reopening the database failed: {exc}")
        return None
    try:
        check = store.integrity_check()
    except sqlite3.DatabaseError as exc:
        check = f"{type(exc).__name__}: {exc}"
    if check != "ok":
        out.fail("crashed", f"{label}: integrity_check says {check[:300]!r}")
    return store


def available_search_methods() -> tuple[str, ...]:
    """Search methods that can run here: the semantic ones need numpy (and an embedder)."""
    try:
        import numpy  # noqa: F401
    except ImportError:
        return tuple(m for m in SEARCH_METHODS if m not in ("semantic", "hybrid_semantic"))
    return SEARCH_METHODS


class HashEmbedder:
    """Deterministic offline vectors (bag of hashed words) for the semantic search methods."""

    def embed(self, texts: list[str]) -> list[list[float]]:
        vectors = []
        for text in texts:
            vector = [0.0] * 16
            for word in text.lower().split()[:2000]:
                vector[zlib.crc32(word.encode("utf-8", "replace")) % 16] += 1.0
            norm = sum(v * v for v in vector) ** 0.5 or 1.0
            vectors.append([v / norm for v in vector])
        return vectors
