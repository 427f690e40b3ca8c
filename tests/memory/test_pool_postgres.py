"""The PostgreSQL store's connections (``memory/postgres/_pool.py``, ``_conn.py``): no round
trip to check a connection out, a connection the server closed never handed out, an
unreachable server refused at once (no waiting) and served again as soon as it is back,
one connection for a whole session of store calls, and statements sent together."""

from __future__ import annotations

import time

import pytest

from scopehub.memory import NewMessage, StoreUnavailable, open_store

pytest.importorskip("psycopg", reason="the PostgreSQL driver is not installed (pip install -e '.[dev]')")

import psycopg

from scopehub.memory.postgres import _pool
from scopehub.memory.postgres._pool import Pool

A = "user:1"


@pytest.fixture
def pg(postgres_store_url):
    store = open_store(postgres_store_url)
    yield store
    store.close()


def counted_connects(monkeypatch) -> list[str]:
    attempts: list[str] = []
    real = psycopg.connect

    def connect(conninfo, **kwargs):
        attempts.append(conninfo)
        return real(conninfo, **kwargs)

    monkeypatch.setattr(_pool.psycopg, "connect", connect)
    return attempts


def test_an_unreachable_server_is_refused_at_once_and_served_again_when_it_is_back(postgres_url, tmp_path, monkeypatch):
    monkeypatch.setattr(_pool, "PROBE_INTERVAL", 0.05)
    attempts = counted_connects(monkeypatch)
    pool = Pool(f"postgresql://nobody@/nowhere?host={tmp_path}", max_size=2, kwargs={"autocommit": True})
    try:
        with pytest.raises(StoreUnavailable, match="unavailable"):
            pool.getconn()
        assert pool.down_for is not None
        # While it is down a checkout does not try (nor wait): the prober does, on its own thread.
        before = len([a for a in attempts if "nowhere" in a])
        for _ in range(5):
            with pytest.raises(StoreUnavailable):
                pool.getconn()
        tried = len([a for a in attempts if "nowhere" in a]) - before
        assert tried <= 2  # at most the prober's own attempts meanwhile, never one per checkout
        pool.conninfo = postgres_url  # the server "comes back"
        deadline = time.monotonic() + 30
        while pool.down_for is not None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert pool.down_for is None
        with pool.connection() as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
    finally:
        pool.close()


def test_a_checkout_sends_nothing_and_a_connection_the_server_ended_is_replaced(pg):
    pool = pg._pool
    with pool.connection() as conn:
        first = conn
        pid = conn.info.backend_pid
    sent: list[str] = []
    real = first.execute
    first.execute = lambda *a, **k: (sent.append(a[0]), real(*a, **k))[1]  # type: ignore[method-assign]
    with pool.connection() as again:
        assert again is first  # the same idle connection, taken without a round trip
    assert sent == []
    # The server ends that connection (a restart does this to all of them).
    with psycopg.connect(pg._pool.conninfo, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not _readable(first):
        time.sleep(0.02)
    # The next store call gets a live connection; nobody sees the dead one.
    assert pg.query("SELECT 2") == [(2,)]
    with pool.connection() as now:
        assert now is not first and now.info.backend_pid != pid


def _readable(conn) -> bool:
    import select

    return bool(select.select([conn.pgconn.socket], [], [], 0)[0])


def test_a_connection_given_back_in_a_transaction_is_closed_not_reused(pg):
    pool = pg._pool
    with pool.connection() as conn:
        conn.execute("BEGIN")
        left = conn
    assert left.closed
    with pool.connection() as fresh:
        assert fresh is not left and fresh.info.transaction_status == psycopg.pq.TransactionStatus.IDLE


def test_a_session_holds_one_connection_for_all_its_store_calls(pg, monkeypatch):
    checkouts: list[int] = []
    real = pg._pool.getconn
    monkeypatch.setattr(pg._pool, "getconn", lambda: (checkouts.append(1), real())[1])
    with pg.session():
        message = pg.append(NewMessage(scope=A, role="user", text="one checkout"))
        pg.set_route(message.id, "tasks", (), "local")
        assert [m.text for m in pg.window(A, 5)] == ["one checkout"]
        with pg.transaction() as conn:
            conn.execute("UPDATE messages SET via = ? WHERE id = ?", ("explicit", message.id))
    assert len(checkouts) == 1
    assert pg.get(A, message.id).via == "explicit"


def test_statements_whose_results_nobody_reads_travel_together(pg, monkeypatch):
    message = pg.append(NewMessage(scope=A, role="user", text="hello"))
    sent: list[str] = []
    real = psycopg.ClientCursor.execute

    def execute(self, query, params=None, **kw):
        sent.append(str(query))
        return real(self, query, params, **kw)

    monkeypatch.setattr(psycopg.ClientCursor, "execute", execute)
    pg.set_route(message.id, "tasks", ("notes",), "local")  # BEGIN, UPDATE, COMMIT: one round trip
    assert len(sent) == 1 and sent[0].startswith("BEGIN") and sent[0].endswith("COMMIT")
    sent.clear()
    again = pg.append(NewMessage(scope=A, role="agent", text="hi", agent="tasks", reply_to=message.id))
    # The insert with BEGIN, the lock, the scope row and COMMIT: its id is read after the block.
    assert len(sent) == 1 and sent[0].startswith("BEGIN") and sent[0].endswith("COMMIT")
    assert pg.get(A, message.id).agent == "tasks" and pg.get(A, again.id).reply_to == message.id
