"""Archive search on PostgreSQL (full-text search plus ``pg_trgm``).

Interface only for now; the ranking is built in its own change. The store calls
:func:`search_archive` from :meth:`PostgresStore.search`, and the schema migrations call
:func:`create_search_schema` once, inside the migration's transaction.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import StoreError

if TYPE_CHECKING:
    from ._conn import PgConnection

__all__ = ["create_search_schema", "search_archive"]


def create_search_schema(conn: PgConnection) -> None:
    """Create the search tables and indexes. ``conn.execute`` takes ``?`` placeholders;
    ``conn.raw`` is the psycopg connection (``%s``). Runs inside a migration's transaction."""


def search_archive(store: Any, scope: str, query: str, k: int = 10, **options: Any) -> list[Any]:
    """The scope's archive hits for ``query``, best first (a list of ``SearchHit``)."""
    raise StoreError("archive search on PostgreSQL: not built yet")
