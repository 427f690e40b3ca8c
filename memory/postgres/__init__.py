"""The PostgreSQL backend of the store (``pip install 'scopehub[postgres]'``).

``open_store("postgresql://...")`` returns a :class:`PostgresStore`; importing this
package needs psycopg 3 (its connection pool is the store's own, ``_pool.py``).
"""

from ._store import POSTGRES, PostgresStore, redact_url

__all__ = ["POSTGRES", "PostgresStore", "redact_url"]
