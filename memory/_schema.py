"""Versioned schema: each migration moves ``PRAGMA user_version`` up by one.

A later release appends migrations; opening an older database runs the missing ones
in order, each inside its own transaction. Never edit a migration that has shipped.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ._search import count_search_documents, create_search_schema

if TYPE_CHECKING:  # sqlite-utils is imported by the store only when a migration runs
    import sqlite_utils

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "ensure_scope", "lock_scope", "migrate"]


def _v1_core(db: sqlite_utils.Database) -> None:
    db.execute(
        """
        CREATE TABLE scopes (
            scope TEXT PRIMARY KEY,
            kind TEXT NOT NULL,
            created REAL NOT NULL
        )"""
    )
    db.execute(
        """
        CREATE TABLE messages (
            id INTEGER PRIMARY KEY,
            scope TEXT NOT NULL REFERENCES scopes(scope),
            ext_id TEXT,
            chat TEXT,
            sender TEXT,
            role TEXT NOT NULL CHECK (role IN ('user', 'agent')),
            text TEXT NOT NULL,
            ts REAL NOT NULL,
            reply_to INTEGER,
            agent TEXT,
            also_sees TEXT NOT NULL DEFAULT '[]',
            via TEXT,
            needs TEXT NOT NULL DEFAULT '[]'
        )"""
    )
    db.execute("CREATE UNIQUE INDEX messages_scope_ext ON messages(scope, ext_id)")
    db.execute("CREATE INDEX messages_scope_id ON messages(scope, id)")
    db.execute(
        """
        CREATE TABLE calls (
            id INTEGER PRIMARY KEY,
            scope TEXT NOT NULL,
            agent TEXT NOT NULL,
            message_id INTEGER,
            via TEXT,
            also_sees TEXT NOT NULL DEFAULT '[]',
            model TEXT,
            persona INTEGER NOT NULL DEFAULT 0,
            rules INTEGER NOT NULL DEFAULT 0,
            tools INTEGER NOT NULL DEFAULT 0,
            facts INTEGER NOT NULL DEFAULT 0,
            history INTEGER NOT NULL DEFAULT 0,
            message INTEGER NOT NULL DEFAULT 0,
            total INTEGER NOT NULL DEFAULT 0,
            full_history_tokens INTEGER NOT NULL DEFAULT 0,
            prompt_tokens INTEGER,
            completion_tokens INTEGER,
            latency_ms REAL,
            ok INTEGER NOT NULL DEFAULT 1,
            ts REAL NOT NULL,
            extra TEXT NOT NULL DEFAULT '{}'
        )"""
    )
    db.execute("CREATE INDEX calls_scope ON calls(scope)")
    db.execute(
        """
        CREATE TABLE facts (
            id INTEGER PRIMARY KEY,
            scope TEXT NOT NULL,
            text TEXT NOT NULL,
            kind TEXT NOT NULL DEFAULT 'other'
                CHECK (kind IN ('identity', 'contact', 'preference', 'constraint', 'relationship', 'other')),
            key TEXT,
            confidence TEXT NOT NULL DEFAULT 'derived' CHECK (confidence IN ('explicit', 'derived')),
            source_message INTEGER,
            valid_from REAL NOT NULL,
            invalid_at REAL,
            superseded_by INTEGER
        )"""
    )
    db.execute("CREATE INDEX facts_scope_current ON facts(scope, invalid_at)")
    db.execute("CREATE INDEX facts_scope_key ON facts(scope, key, invalid_at)")
    db.execute(
        """
        CREATE TABLE vault (
            id INTEGER PRIMARY KEY,
            scope TEXT NOT NULL,
            kind TEXT NOT NULL,
            title TEXT NOT NULL DEFAULT '',
            body TEXT NOT NULL,
            meta TEXT NOT NULL DEFAULT '{}',
            agent TEXT,
            source_message INTEGER,
            created REAL NOT NULL,
            updated REAL NOT NULL
        )"""
    )
    db.execute("CREATE INDEX vault_scope ON vault(scope, kind, id)")
    db.execute(
        """
        CREATE TABLE tasks (
            id INTEGER PRIMARY KEY,
            scope TEXT NOT NULL,
            title TEXT NOT NULL,
            due TEXT,
            done INTEGER NOT NULL DEFAULT 0,
            created REAL NOT NULL,
            completed REAL
        )"""
    )
    db.execute("CREATE INDEX tasks_scope ON tasks(scope, done, id)")
    db.execute(
        """
        CREATE TABLE reminders (
            id INTEGER PRIMARY KEY,
            scope TEXT NOT NULL,
            chat TEXT,
            text TEXT NOT NULL,
            due REAL NOT NULL,
            every_seconds INTEGER,
            active INTEGER NOT NULL DEFAULT 1,
            last_sent REAL,
            created REAL NOT NULL
        )"""
    )
    db.execute("CREATE INDEX reminders_due ON reminders(active, due)")
    db.execute("CREATE INDEX reminders_scope ON reminders(scope)")


def _v3_coordination(db: sqlite_utils.Database) -> None:
    """Events (the id is the cursor), per-agent cursors, and claims with a TTL."""
    # AUTOINCREMENT: ids are never reused, not even after the newest events are erased,
    # so a cursor can never point at a later, different event.
    db.execute(
        """
        CREATE TABLE events (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            scope TEXT NOT NULL,
            ts REAL NOT NULL,
            agent TEXT NOT NULL,
            target TEXT,
            type TEXT NOT NULL,
            payload TEXT NOT NULL,
            message_id INTEGER
        )"""
    )
    db.execute("CREATE INDEX events_scope_id ON events(scope, id)")
    # unconsumed_events and latest_events: one id range per (type, broadcast) and per target.
    db.execute("CREATE INDEX events_scope_type ON events(scope, type, target, id)")
    db.execute("CREATE INDEX events_scope_target ON events(scope, target, id)")
    # latest_events(agents=...): what the collaborators did.
    db.execute("CREATE INDEX events_scope_agent ON events(scope, agent, id)")
    db.execute(
        """
        CREATE TABLE cursors (
            scope TEXT NOT NULL,
            agent TEXT NOT NULL,
            event_id INTEGER NOT NULL,
            PRIMARY KEY (scope, agent)
        )"""
    )
    db.execute(
        """
        CREATE TABLE claims (
            scope TEXT NOT NULL,
            key TEXT NOT NULL,
            holder TEXT NOT NULL,
            note TEXT NOT NULL DEFAULT '',
            acquired REAL NOT NULL,
            expires REAL NOT NULL,
            PRIMARY KEY (scope, key)
        )"""
    )


def _v4_call_sections_and_cache(db: sqlite_utils.Database) -> None:
    """Calls record the lessons, awareness and digest sections, and what prompt caching did."""
    for column in ("lessons", "awareness", "digest"):
        db.execute(f"ALTER TABLE calls ADD COLUMN {column} INTEGER NOT NULL DEFAULT 0")
    # NULL: the provider reported nothing about caching / the price is unknown (never 0).
    db.execute("ALTER TABLE calls ADD COLUMN cached_tokens INTEGER")
    db.execute("ALTER TABLE calls ADD COLUMN cache_write_tokens INTEGER")
    db.execute("ALTER TABLE calls ADD COLUMN billed_tokens REAL")
    db.execute("ALTER TABLE calls ADD COLUMN cost REAL")


def _v5_numbers_and_delivery(db: sqlite_utils.Database) -> None:
    """Per-scope task and reminder numbers that are never reused; reminder delivery state.

    ``num`` is what people see (#1, #2 ...) and what the tools accept; the row id stays
    internal. ``scope_counters`` holds the last number given per scope and kind, and
    ``erase`` keeps it, so after ``/forget all`` the next task is not #1 again. The
    numbering is a trigger, so every insert path gets it. Reminders also keep their
    failed deliveries (a restart continues the backoff) and ``paused`` (the chat answered
    403: the bot was blocked or removed) until the chat writes again.
    """
    conn = db.conn
    conn.execute(
        "CREATE TABLE scope_counters (scope TEXT NOT NULL, kind TEXT NOT NULL, last INTEGER NOT NULL,"
        " PRIMARY KEY (scope, kind))"
    )
    for table, kind in (("tasks", "task"), ("reminders", "reminder")):
        conn.execute(f"ALTER TABLE {table} ADD COLUMN num INTEGER")
        conn.execute(
            f"UPDATE {table} SET num = (SELECT n FROM (SELECT id, row_number() OVER (PARTITION BY scope ORDER BY id) AS n"
            f" FROM {table}) AS ranked WHERE ranked.id = {table}.id)"
        )
        conn.execute(f"CREATE UNIQUE INDEX {table}_scope_num ON {table}(scope, num)")
        conn.execute(
            f"INSERT INTO scope_counters(scope, kind, last) SELECT scope, '{kind}', max(num) FROM {table} GROUP BY scope"
        )
        conn.execute(
            f"CREATE TRIGGER {table}_number AFTER INSERT ON {table} WHEN new.num IS NULL BEGIN"
            f" INSERT INTO scope_counters(scope, kind, last) VALUES (new.scope, '{kind}', 1)"
            " ON CONFLICT(scope, kind) DO UPDATE SET last = last + 1;"
            f" UPDATE {table} SET num = (SELECT last FROM scope_counters WHERE scope = new.scope AND kind = '{kind}')"
            " WHERE id = new.id;"
            " END"
        )
    conn.execute("ALTER TABLE reminders ADD COLUMN failures INTEGER NOT NULL DEFAULT 0")
    conn.execute("ALTER TABLE reminders ADD COLUMN retry_at REAL")
    conn.execute("ALTER TABLE reminders ADD COLUMN paused REAL")
    conn.execute("CREATE INDEX reminders_chat ON reminders(chat)")


def _v6_team(db: sqlite_utils.Database) -> None:
    """Talk channels (messages, reactions, per-agent cursors) and each agent's own memory:
    lessons, strengths and weaknesses, goals, plans, and the person's feedback they come from."""
    # AUTOINCREMENT: a channel message id is a cursor (like an event id), never reused.
    db.execute(
        """
        CREATE TABLE channel_messages (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            scope TEXT NOT NULL,
            channel TEXT NOT NULL,
            agent TEXT NOT NULL,
            text TEXT NOT NULL,
            ts REAL NOT NULL,
            reply_to INTEGER,
            pinned INTEGER NOT NULL DEFAULT 0
        )"""
    )
    db.execute("CREATE INDEX channel_messages_channel ON channel_messages(scope, channel, pinned, id)")
    db.execute("CREATE INDEX channel_messages_scope_id ON channel_messages(scope, id)")
    db.execute(
        """
        CREATE TABLE channel_reactions (
            scope TEXT NOT NULL,
            message_id INTEGER NOT NULL,
            agent TEXT NOT NULL,
            reaction TEXT NOT NULL CHECK (reaction IN ('agree', 'disagree', 'important')),
            ts REAL NOT NULL,
            PRIMARY KEY (scope, message_id, agent, reaction)
        )"""
    )
    db.execute(
        """
        CREATE TABLE channel_cursors (
            scope TEXT NOT NULL,
            agent TEXT NOT NULL,
            message_id INTEGER NOT NULL,
            PRIMARY KEY (scope, agent)
        )"""
    )
    db.execute(
        """
        CREATE TABLE lessons (
            id INTEGER PRIMARY KEY,
            scope TEXT NOT NULL,
            agent TEXT NOT NULL,
            kind TEXT NOT NULL CHECK (kind IN ('success', 'failure', 'observation', 'improvement')),
            importance TEXT NOT NULL CHECK (importance IN ('low', 'medium', 'high')),
            text TEXT NOT NULL,
            topic TEXT,
            source TEXT NOT NULL DEFAULT 'agent',
            feedback_id INTEGER,
            ts REAL NOT NULL,
            seen INTEGER NOT NULL DEFAULT 1
        )"""
    )
    db.execute("CREATE INDEX lessons_scope_agent ON lessons(scope, agent, id)")
    db.execute(
        """
        CREATE TABLE agent_traits (
            scope TEXT NOT NULL,
            agent TEXT NOT NULL,
            kind TEXT NOT NULL CHECK (kind IN ('strength', 'weakness')),
            topic TEXT NOT NULL,
            evidence INTEGER NOT NULL,
            updated REAL NOT NULL,
            PRIMARY KEY (scope, agent, kind, topic)
        )"""
    )
    db.execute(
        """
        CREATE TABLE goals (
            id INTEGER PRIMARY KEY,
            scope TEXT NOT NULL,
            agent TEXT NOT NULL,
            text TEXT NOT NULL,
            status TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'achieved', 'abandoned')),
            progress INTEGER NOT NULL DEFAULT 0 CHECK (progress BETWEEN 0 AND 100),
            created REAL NOT NULL,
            updated REAL NOT NULL
        )"""
    )
    db.execute("CREATE INDEX goals_scope_agent ON goals(scope, agent, status, id)")
    db.execute(
        """
        CREATE TABLE plans (
            id INTEGER PRIMARY KEY,
            scope TEXT NOT NULL,
            agent TEXT NOT NULL,
            text TEXT NOT NULL,
            status TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'done', 'abandoned')),
            created REAL NOT NULL,
            updated REAL NOT NULL
        )"""
    )
    db.execute("CREATE INDEX plans_scope_agent ON plans(scope, agent, status, id)")
    db.execute(
        """
        CREATE TABLE feedback (
            id INTEGER PRIMARY KEY,
            scope TEXT NOT NULL,
            agent TEXT NOT NULL,
            reply_id INTEGER,
            source TEXT NOT NULL CHECK (source IN ('reaction', 'command', 'correction')),
            signal TEXT NOT NULL CHECK (signal IN ('positive', 'negative', 'neutral')),
            text TEXT NOT NULL,
            key TEXT,
            ts REAL NOT NULL,
            status TEXT NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'learnt')),
            lesson_id INTEGER
        )"""
    )
    # A redelivered reaction (same key) is recorded once.
    db.execute("CREATE UNIQUE INDEX feedback_scope_key ON feedback(scope, key)")
    db.execute("CREATE INDEX feedback_pending ON feedback(scope, status, id)")


def _v7_digest(db: sqlite_utils.Database) -> None:
    """The digest of each scope's older history, and how far reflection got in each scope."""
    db.execute(
        """
        CREATE TABLE digests (
            scope TEXT PRIMARY KEY,
            lines TEXT NOT NULL DEFAULT '[]',
            upto_id INTEGER NOT NULL DEFAULT 0,
            covered INTEGER NOT NULL DEFAULT 0,
            version INTEGER NOT NULL DEFAULT 0,
            kind TEXT NOT NULL DEFAULT '',
            mode TEXT NOT NULL DEFAULT '',
            made REAL NOT NULL DEFAULT 0,
            folds INTEGER NOT NULL DEFAULT 0,
            stats TEXT NOT NULL DEFAULT '{}'
        )"""
    )
    db.execute(
        """
        CREATE TABLE reflections (
            scope TEXT PRIMARY KEY,
            message_upto INTEGER NOT NULL DEFAULT 0,
            event_upto INTEGER NOT NULL DEFAULT 0,
            last_run REAL NOT NULL DEFAULT 0,
            stats TEXT NOT NULL DEFAULT '{}'
        )"""
    )


def _v9_answer_lookups(db: sqlite_utils.Database) -> None:
    """Indexes for "is this message answered?", asked several times a turn: without them
    both lookups scanned their whole table (16 ms at 200,000 calls). PostgreSQL has had
    them since its first version."""
    db.execute("CREATE INDEX messages_reply_to ON messages(reply_to) WHERE reply_to IS NOT NULL")
    db.execute("CREATE INDEX calls_message ON calls(message_id)")


def _v10_call_failures_and_tools(db: sqlite_utils.Database) -> None:
    """For the console: a failed call keeps why (its error's class and message, redacted),
    and each call how many tool calls it made, so "calls that used a tool" is a column
    test instead of parsing every call's JSON record.

    And the indexes its finding needs on a long scope: messages by time (a jump to a date, a
    date filter: one range scan, as PostgreSQL has had since its migration 3), people's
    messages by route (the routing chart, index only), failed calls and calls with tools
    (small partial indexes: the timeline's filters)."""
    db.execute("ALTER TABLE calls ADD COLUMN error_class TEXT")
    db.execute("ALTER TABLE calls ADD COLUMN error_message TEXT")
    db.execute("ALTER TABLE calls ADD COLUMN tool_calls INTEGER NOT NULL DEFAULT 0")
    db.execute(
        "UPDATE calls SET tool_calls = json_array_length(extra, '$.tool_calls')"
        " WHERE json_valid(extra) AND json_type(extra, '$.tool_calls') = 'array'"
    )
    db.execute("CREATE INDEX messages_scope_ts ON messages(scope, ts)")
    db.execute("CREATE INDEX messages_scope_route ON messages(scope, role, via)")
    db.execute("CREATE INDEX calls_failed ON calls(scope, message_id) WHERE ok = 0")
    db.execute("CREATE INDEX calls_tools ON calls(scope, message_id) WHERE tool_calls > 0")


def _v11_vault_numbers(db: sqlite_utils.Database) -> None:
    """Notes, emails and drafts numbered per kind within their scope (``num``): the first
    draft is Draft #1 whatever was kept before it. Like task numbers, never reused: the
    counters live in ``scope_counters`` (kind ``vault:<kind>``), which erase keeps, and a
    trigger numbers every insert. The row id stays internal (search rows refer to it)."""
    conn = db.conn
    conn.execute("ALTER TABLE vault ADD COLUMN num INTEGER")
    conn.execute(
        "UPDATE vault SET num = (SELECT n FROM (SELECT id, row_number() OVER (PARTITION BY scope, kind ORDER BY id) AS n"
        " FROM vault) AS ranked WHERE ranked.id = vault.id)"
    )
    conn.execute("CREATE UNIQUE INDEX vault_scope_kind_num ON vault(scope, kind, num)")
    conn.execute(
        "INSERT INTO scope_counters(scope, kind, last) SELECT scope, 'vault:' || kind, max(num) FROM vault GROUP BY scope, kind"
        " ON CONFLICT(scope, kind) DO UPDATE SET last = max(last, excluded.last)"
    )
    conn.execute(
        "CREATE TRIGGER vault_number AFTER INSERT ON vault WHEN new.num IS NULL BEGIN"
        " INSERT INTO scope_counters(scope, kind, last) VALUES (new.scope, 'vault:' || new.kind, 1)"
        " ON CONFLICT(scope, kind) DO UPDATE SET last = last + 1;"
        " UPDATE vault SET num = (SELECT last FROM scope_counters WHERE scope = new.scope AND kind = 'vault:' || new.kind)"
        " WHERE id = new.id;"
        " END"
    )


def _v12_chat_settings_and_access(db: sqlite_utils.Database) -> None:
    """Per-chat settings (/settings), the deployment's shared secrets (the webhook's), invite
    codes and the people paired through them, and updates the transport could not read."""
    db.execute(
        """
        CREATE TABLE chat_settings (
            scope TEXT PRIMARY KEY,
            timezone TEXT,
            language TEXT,
            agents TEXT,
            topics TEXT NOT NULL DEFAULT '{}',
            updated REAL NOT NULL
        )"""
    )
    db.execute("CREATE TABLE deployment_secrets (name TEXT PRIMARY KEY, value TEXT NOT NULL, created REAL NOT NULL)")
    db.execute(
        """
        CREATE TABLE invites (
            code TEXT PRIMARY KEY,
            note TEXT NOT NULL DEFAULT '',
            created REAL NOT NULL,
            expires REAL,
            uses_left INTEGER NOT NULL,
            created_by TEXT
        )"""
    )
    db.execute("CREATE TABLE paired_users (user_id INTEGER PRIMARY KEY, code TEXT NOT NULL, paired REAL NOT NULL)")
    db.execute(
        """
        CREATE TABLE rejected_updates (
            id INTEGER PRIMARY KEY,
            scope TEXT,
            update_id INTEGER,
            reason TEXT NOT NULL,
            body TEXT NOT NULL,
            received REAL NOT NULL
        )"""
    )
    db.execute("CREATE INDEX rejected_updates_scope ON rejected_updates(scope)")
    db.execute("CREATE INDEX calls_scope_ts ON calls(scope, ts)")


# Append only. Index i holds the migration from version i to i + 1.
MIGRATIONS: list[Callable[[sqlite_utils.Database], None]] = [
    _v1_core,
    create_search_schema,
    _v3_coordination,
    _v4_call_sections_and_cache,
    _v5_numbers_and_delivery,
    _v6_team,
    _v7_digest,
    count_search_documents,
    _v9_answer_lookups,
    _v10_call_failures_and_tools,
    _v11_vault_numbers,
    _v12_chat_settings_and_access,
]


SCHEMA_VERSION = len(MIGRATIONS)


def lock_scope(conn: Any, scope: str) -> None:
    """Make this transaction the only writer of ``scope`` until it ends.

    The record functions read, then write, in one transaction (a digest's version check,
    an agent's plan count, a lesson seen before): that is only safe with one writer at a
    time. SQLite has that already (``BEGIN IMMEDIATE``: one writer per file). PostgreSQL
    runs transactions side by side, so its connection takes a per-scope advisory lock,
    held to commit; other scopes go on in parallel. Call it first in the transaction,
    before the reads; :func:`ensure_scope` does.
    """
    lock = getattr(conn, "lock_scope", None)  # PostgreSQL's connection adapter has one
    if lock is not None:
        lock(scope)


def ensure_scope(conn: Any, scope: str, now: float) -> None:
    """Serialise with the scope's other writers (:func:`lock_scope`), then list ``scope`` in
    the scopes table (inside the caller's transaction); erase() walks it."""
    lock_scope(conn, scope)
    conn.execute(
        "INSERT INTO scopes(scope, kind, created) VALUES (?, ?, ?) ON CONFLICT(scope) DO NOTHING",
        (scope, scope.split(":", 1)[0], now),
    )


def migrate(db: sqlite_utils.Database) -> int:
    """Bring ``db`` to the newest schema; return the version it is at."""
    conn = db.conn
    current = conn.execute("PRAGMA user_version").fetchone()[0]
    if current > len(MIGRATIONS):
        from .errors import StoreError

        raise StoreError(
            f"database schema version {current} is newer than this release knows ({len(MIGRATIONS)}); upgrade agents-hub"
        )
    for version in range(current, len(MIGRATIONS)):
        with conn:  # one transaction per step: a crash leaves the last complete version
            conn.execute("BEGIN IMMEDIATE")
            # Another process may have run this step while we waited for the write lock.
            if conn.execute("PRAGMA user_version").fetchone()[0] > version:
                continue
            MIGRATIONS[version](db)
            conn.execute(f"PRAGMA user_version = {version + 1}")
    return len(MIGRATIONS)
