"""Builders the archive search tests share: messages and vault documents added at known times, a store on either backend."""

from __future__ import annotations

import importlib.util

import pytest

from scopehub.memory import (
    NewMessage,
    SearchHit,
    Store,
)

DAY = 86_400.0


NOW = 1_750_000_000.0


HAS_NUMPY = importlib.util.find_spec("numpy") is not None


def add(
    store: Store,
    scope: str,
    text: str,
    *,
    ts: float | None = None,
    role: str = "user",
    agent: str | None = None,
) -> int:
    return store.append(
        NewMessage(scope=scope, role=role, text=text, ts=NOW if ts is None else ts, agent=agent)
    ).id


def ids(hits: list[SearchHit]) -> list[int]:
    return [hit.id for hit in hits]


def add_vault(store: Store, scope: str, title: str, body: str) -> int:
    with store.transaction() as conn:  # SQL both backends speak
        conn.execute(
            "INSERT INTO scopes(scope, kind, created) VALUES (?, 'user', ?) ON CONFLICT DO NOTHING",
            (scope, NOW),
        )
        return conn.execute(
            "INSERT INTO vault(scope, kind, title, body, created, updated) VALUES (?, 'note', ?, ?, ?, ?)"
            " RETURNING id",
            (scope, title, body, NOW, NOW),
        ).fetchone()[0]


def fts_rows(store: Store) -> int:
    """Documents in the search index (SQLite's FTS table, PostgreSQL's search_docs)."""
    table = "search_fts" if store.dialect.is_sqlite else "search_docs"
    return store.query(f"SELECT count(*) FROM {table}")[0][0]


def open_backend(request: pytest.FixtureRequest, backend: str) -> Store:
    if backend == "postgres":
        from scopehub.memory import open_store

        server = request.getfixturevalue("postgres_server")
        url = server.new_database()
        request.addfinalizer(lambda: server.drop_database(url))
        opened = open_store(url)
        request.addfinalizer(opened.close)
        return opened
    return Store(":memory:")


# The search contract is the same on both backends: these tests run on each.
on_both_backends = pytest.mark.parametrize("store", ["sqlite", "postgres"], indirect=True)
