"""A PostgreSQL password with ``@ / : # %`` in it works as typed, and never shows in messages."""

from __future__ import annotations

import pytest

pytest.importorskip("psycopg", reason="the PostgreSQL driver is not installed (pip install -e '.[dev]')")

from psycopg.conninfo import conninfo_to_dict

from scopehub.memory import NewMessage, StoreError, open_store
from scopehub.memory.postgres._url import database_url, normalise_url, redact_url

HARD = "p@ss/w:rd#50%off?x&y=z"


@pytest.mark.parametrize(
    "url, password, host, dbname",
    [
        (f"postgresql://hub:{HARD}@db.example:5432/hub", HARD, "db.example", "hub"),
        ("postgresql://hub:a%40b@db/hub", "a@b", "db", "hub"),  # already encoded: left as it is
        ("postgres://hub:ünï©ode@db/hub", "ünï©ode", "db", "hub"),
        ("postgresql://hub:@db/hub", "", "db", "hub"),
    ],
)
def test_the_password_reaches_libpq_whole(url, password, host, dbname):
    parsed = conninfo_to_dict(normalise_url(url))
    assert parsed.get("password", "") == password
    assert (parsed["user"], parsed["host"], parsed["dbname"]) == ("hub", host, dbname)


def test_a_percent_escape_is_kept_and_a_lone_percent_is_encoded():
    assert normalise_url("postgresql://hub:100%25@db/hub") == "postgresql://hub:100%25@db/hub"
    assert conninfo_to_dict(normalise_url("postgresql://hub:100%@db/hub"))["password"] == "100%"


def test_urls_without_a_password_are_left_alone():
    for url in ("postgresql:///hub?host=/tmp/sock", "postgresql://hub@db/hub", "postgresql://db:5433/hub?sslmode=require"):
        assert normalise_url(url) == url
        assert redact_url(url) == url


def test_redaction_hides_every_part_of_the_password():
    shown = redact_url(f"postgresql://hub:{HARD}@db.example:5432/hub")
    assert shown == "postgresql://hub:***@db.example:5432/hub"
    for part in ("p@ss", "w:rd", "50%off", "x&y"):
        assert part not in shown


def test_a_url_built_from_parts_reads_back_as_the_parts():
    url = database_url(user="hub", password=HARD, host="db.example", port=5432, dbname="hub", sslmode="require")
    parsed = conninfo_to_dict(url)
    assert (parsed["user"], parsed["password"], parsed["host"], parsed["port"], parsed["dbname"], parsed["sslmode"]) == (
        "hub", HARD, "db.example", "5432", "hub", "require",
    )  # fmt: skip


def test_a_role_with_such_a_password_opens_the_store_by_its_raw_url(postgres_server, postgres_url):
    import psycopg

    parsed = conninfo_to_dict(postgres_url)
    role = "hub_hard_password"
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute(f'DROP ROLE IF EXISTS "{role}"')
        admin.execute(f"CREATE ROLE \"{role}\" LOGIN PASSWORD '{HARD}'")
        admin.execute(f'GRANT ALL ON DATABASE "{parsed["dbname"]}" TO "{role}"')
        admin.execute(f'GRANT ALL ON SCHEMA public TO "{role}"')
    host = parsed.get("host", "")
    raw = f"postgresql://{role}:{HARD}@/{parsed['dbname']}?host={host}" + (f"&port={parsed['port']}" if parsed.get("port") else "")
    # The test server trusts local sockets: over TCP the password itself is checked, so also
    # prove that libpq received it whole (the parsed URL), which is what broke.
    assert conninfo_to_dict(normalise_url(raw))["password"] == HARD
    with open_store(raw) as store:
        store.append(NewMessage(scope="user:1", role="user", text="in"))
        assert [m.text for m in store.window("user:1", 5)] == ["in"]
        assert HARD not in store.path and "***" in store.path
    with pytest.raises(StoreError) as refused:
        open_store(f"postgresql://{role}:{HARD}@/no_such_database_here?host={host}")
    assert "p@ss" not in str(refused.value) and "50%off" not in str(refused.value)
