"""The PostgreSQL backend of the store (``pip install 'scopehub[postgres]'``).

``open_store("postgresql://...")`` returns a :class:`PostgresStore`; importing this
package needs psycopg 3 and psycopg-pool.
"""

from ._store import POSTGRES, PostgresStore, redact_url

__all__ = ["POSTGRES", "PostgresStore", "redact_url"]
