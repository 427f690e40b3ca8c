"""The PostgreSQL archive search's schema: its text search configuration, tables, functions and
triggers (the query side is search.py).

Tables (maintained by triggers on ``messages`` and ``vault``, never written by the store):

- ``search_docs(kind, id, scope, tsv)``: one row per message (kind 0) and vault document
  (kind 1). ``tsv`` holds the body at weight A and, for a message, the two messages
  before it in its scope at weight D (ranked at 0.3, as SQLite's ``ctx`` column). GIN
  index on ``(scope, tsv)`` (``btree_gin``): a scope's matches come out of the index
  already restricted to the scope.
- ``search_terms(lexeme, scope, docs)``: each scope's vocabulary with the number of its
  documents holding each lexeme (what FTS5's vocabulary table gives SQLite): document
  frequencies are read, never counted, and the alphabetic lexemes are trigram-indexed
  (``pg_trgm``) for the typo step. Per scope, so erasing a scope erases its words.
- ``search_stats(scope, docs)``: documents per scope, the N of BM25's idf.

Text is folded by the ``hub_stem`` configuration: ``unaccent`` then the English Snowball
stemmer without a stopword list (a stopword-only query still finds its words, as on
SQLite). Before parsing, everything that is not a letter or digit becomes a space, so
PostgreSQL's tokens are the ones the Python side sees (no e-mail or URL tokens).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._search_base import _CONTEXT_TURNS
from ..errors import StoreError

if TYPE_CHECKING:
    from ._conn import PgConnection

__all__ = ["CONFIG", "SEARCH_TABLES", "create_search_schema"]

# Written only by the triggers on messages and vault (erase vacuums them with those).
SEARCH_TABLES = ("search_docs", "search_terms", "search_stats")

CONFIG = "hub_stem"  # documents and queries: unaccent + English Snowball, no stopwords
_MAX_INDEXED_CHARS = 100_000  # a tsvector is limited to 1 MB: longer text is cut, never refused

_SCHEMA = f"""
CREATE EXTENSION IF NOT EXISTS pg_trgm;
CREATE EXTENSION IF NOT EXISTS btree_gin;
CREATE EXTENSION IF NOT EXISTS unaccent;

CREATE TEXT SEARCH DICTIONARY hub_english (TEMPLATE = snowball, Language = english);
CREATE TEXT SEARCH CONFIGURATION {CONFIG} (COPY = simple);
ALTER TEXT SEARCH CONFIGURATION {CONFIG}
    ALTER MAPPING FOR asciiword, word, numword, asciihword, hword, numhword,
        hword_asciipart, hword_part, hword_numpart
    WITH unaccent, hub_english;

CREATE TABLE search_docs (
    kind SMALLINT NOT NULL,  -- 0 message, 1 vault document
    id BIGINT NOT NULL,
    scope TEXT NOT NULL,
    tsv TSVECTOR NOT NULL,
    PRIMARY KEY (kind, id)
);
CREATE INDEX search_docs_match ON search_docs USING gin (scope, tsv);
CREATE INDEX search_docs_newest ON search_docs (scope, kind, id);

CREATE TABLE search_terms (
    lexeme TEXT NOT NULL,
    scope TEXT NOT NULL,
    docs BIGINT NOT NULL,
    PRIMARY KEY (lexeme, scope)
);
CREATE INDEX search_terms_trgm ON search_terms USING gin (scope, lexeme gin_trgm_ops)
    WHERE lexeme ~ '^[[:alpha:]]+$';

-- Documents per scope: the N of BM25's idf.
CREATE TABLE search_stats (
    scope TEXT PRIMARY KEY,
    docs BIGINT NOT NULL
);

-- ASCII punctuation (and '_') becomes a space, as the Python tokenizer splits there: no
-- e-mail, URL or file tokens. Spelt as byte ranges, not [:alnum:], which in a database
-- with the C locale would take every non-ASCII letter for punctuation.
CREATE FUNCTION hub_search_text(t TEXT) RETURNS TEXT LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT regexp_replace(left(t, {_MAX_INDEXED_CHARS}), '[\\x01-\\x2f\\x3a-\\x40\\x5b-\\x60\\x7b-\\x7f]+', ' ', 'g') $$;

CREATE FUNCTION hub_search_vault_text(title TEXT, body TEXT) RETURNS TEXT
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT CASE WHEN title = '' THEN body ELSE title || E'\\n' || body END $$;

-- Index documents: the body at weight A; a message's {_CONTEXT_TURNS} predecessors at D.
-- Their lexemes are counted in search_terms, the documents in search_stats.
CREATE FUNCTION hub_search_add(doc_kind SMALLINT, ids BIGINT[], scopes TEXT[], texts TEXT[])
RETURNS void LANGUAGE sql AS $$
    WITH added AS (
        INSERT INTO search_docs(kind, id, scope, tsv)
        SELECT doc_kind, d.id, d.scope,
            setweight(to_tsvector('{CONFIG}', hub_search_text(d.body)), 'A')
            || CASE WHEN doc_kind = 0 THEN setweight(to_tsvector('{CONFIG}', hub_search_text(coalesce(
                (SELECT string_agg(p.text, ' ' ORDER BY p.id DESC) FROM (
                    SELECT m.id, m.text FROM messages m
                    WHERE m.scope = d.scope AND m.id < d.id ORDER BY m.id DESC LIMIT {_CONTEXT_TURNS}) p),
                ''))), 'D') ELSE ''::tsvector END
        FROM unnest(ids, scopes, texts) AS d(id, scope, body)
        ON CONFLICT (kind, id) DO UPDATE SET scope = excluded.scope, tsv = excluded.tsv
        RETURNING scope, tsv
    ), counted AS (
        INSERT INTO search_terms(lexeme, scope, docs)
        SELECT l.lexeme, a.scope, count(*) FROM added a
        CROSS JOIN LATERAL unnest(tsvector_to_array(a.tsv)) AS l(lexeme)
        GROUP BY 1, 2 ORDER BY 1, 2
        ON CONFLICT (lexeme, scope) DO UPDATE SET docs = search_terms.docs + excluded.docs
    )
    INSERT INTO search_stats(scope, docs) SELECT scope, count(*) FROM added GROUP BY 1 ORDER BY 1
    ON CONFLICT (scope) DO UPDATE SET docs = search_stats.docs + excluded.docs;
$$;

CREATE FUNCTION hub_search_drop(doc_kind SMALLINT, ids BIGINT[]) RETURNS void LANGUAGE sql AS $$
    WITH gone AS (
        DELETE FROM search_docs WHERE kind = doc_kind AND id = ANY(ids) RETURNING scope, tsv
    ), counted AS (
        SELECT l.lexeme, g.scope, count(*) AS n FROM gone g
        CROSS JOIN LATERAL unnest(tsvector_to_array(g.tsv)) AS l(lexeme) GROUP BY 1, 2
    ), emptied AS (
        DELETE FROM search_terms s USING counted c
        WHERE s.lexeme = c.lexeme AND s.scope = c.scope AND s.docs <= c.n
    ), lowered AS (
        UPDATE search_terms s SET docs = s.docs - c.n FROM counted c
        WHERE s.lexeme = c.lexeme AND s.scope = c.scope AND s.docs > c.n
    )
    UPDATE search_stats t SET docs = greatest(0, t.docs - g.n)
    FROM (SELECT scope, count(*) AS n FROM gone GROUP BY 1) g WHERE t.scope = g.scope;
$$;

-- Statement-level triggers with transition tables: a COPY or a batch insert of
-- thousands of rows is indexed by one statement, its vocabulary by one upsert.
CREATE FUNCTION hub_search_messages_added() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM hub_search_add(0::SMALLINT, array_agg(id ORDER BY id), array_agg(scope ORDER BY id),
                           array_agg(text ORDER BY id)) FROM new_rows HAVING count(*) > 0;
    RETURN NULL;
END
$$;
CREATE FUNCTION hub_search_messages_removed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM hub_search_drop(0::SMALLINT, array_agg(id)) FROM old_rows HAVING count(*) > 0;
    RETURN NULL;
END
$$;
CREATE FUNCTION hub_search_message_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM hub_search_drop(0::SMALLINT, ARRAY[OLD.id]);
    PERFORM hub_search_add(0::SMALLINT, ARRAY[NEW.id], ARRAY[NEW.scope], ARRAY[NEW.text]);
    RETURN NULL;
END
$$;
CREATE TRIGGER search_messages_added AFTER INSERT ON messages
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION hub_search_messages_added();
CREATE TRIGGER search_messages_removed AFTER DELETE ON messages
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION hub_search_messages_removed();
CREATE TRIGGER search_message_changed AFTER UPDATE OF text, scope ON messages FOR EACH ROW
    WHEN (OLD.text IS DISTINCT FROM NEW.text OR OLD.scope IS DISTINCT FROM NEW.scope)
    EXECUTE FUNCTION hub_search_message_changed();

CREATE FUNCTION hub_search_vault_added() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM hub_search_add(1::SMALLINT, array_agg(id), array_agg(scope),
                           array_agg(hub_search_vault_text(title, body))) FROM new_rows HAVING count(*) > 0;
    RETURN NULL;
END
$$;
CREATE FUNCTION hub_search_vault_removed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM hub_search_drop(1::SMALLINT, array_agg(id)) FROM old_rows HAVING count(*) > 0;
    RETURN NULL;
END
$$;
CREATE FUNCTION hub_search_vault_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM hub_search_drop(1::SMALLINT, ARRAY[OLD.id]);
    PERFORM hub_search_add(1::SMALLINT, ARRAY[NEW.id], ARRAY[NEW.scope],
                           ARRAY[hub_search_vault_text(NEW.title, NEW.body)]);
    RETURN NULL;
END
$$;
CREATE TRIGGER search_vault_added AFTER INSERT ON vault
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION hub_search_vault_added();
CREATE TRIGGER search_vault_removed AFTER DELETE ON vault
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION hub_search_vault_removed();
CREATE TRIGGER search_vault_changed AFTER UPDATE OF title, body, scope ON vault FOR EACH ROW
    WHEN (OLD.title IS DISTINCT FROM NEW.title OR OLD.body IS DISTINCT FROM NEW.body
          OR OLD.scope IS DISTINCT FROM NEW.scope)
    EXECUTE FUNCTION hub_search_vault_changed();

-- Rows written before this migration.
SELECT hub_search_add(0::SMALLINT, array_agg(id ORDER BY id), array_agg(scope ORDER BY id),
                      array_agg(text ORDER BY id)) FROM messages HAVING count(*) > 0;
SELECT hub_search_add(1::SMALLINT, array_agg(id), array_agg(scope),
                      array_agg(hub_search_vault_text(title, body))) FROM vault HAVING count(*) > 0;
"""


def create_search_schema(conn: PgConnection) -> None:
    """Migration step: extensions, text search configurations, tables, indexes, triggers.

    Runs inside the migration's transaction. ``pg_trgm``, ``btree_gin`` and ``unaccent``
    ship with PostgreSQL (contrib) and are trusted extensions: the database owner may
    create them without being a superuser.
    """
    import psycopg

    available = {
        row[0]
        for row in conn.raw.execute(
            "SELECT name FROM pg_available_extensions WHERE name IN ('pg_trgm', 'btree_gin', 'unaccent')"
        ).fetchall()
    }
    missing = sorted({"pg_trgm", "btree_gin", "unaccent"} - available)
    if missing:
        raise StoreError(
            "archive search needs the PostgreSQL extensions " + ", ".join(missing)
            + " (the contrib package of the server, e.g. postgresql-contrib)"
        )
    try:
        conn.raw.execute(_SCHEMA)
    except psycopg.errors.InsufficientPrivilege as exc:
        raise StoreError(
            f"archive search: cannot create its extensions or objects ({str(exc).strip()});"
            " run once as the database owner"
        ) from exc
