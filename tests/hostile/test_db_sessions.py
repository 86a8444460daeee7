"""Every PostgreSQL session nnsql opens has only pg_catalog and pg_temp on its search_path, whatever the
DSN, PGOPTIONS or the role's settings ask for: all of them go through export/postgres/store.connect."""

from __future__ import annotations

import re

import psycopg
import pytest

from nnsql.export.postgres.store import connect
from tests.conftest import REPO

PINNED = "pg_catalog, pg_temp"
SHIPPED = ("export", "serve", "train", "nnsql", "bench", "demo")


def test_only_the_store_opens_postgresql_sessions():
    opened = [
        f"{path.relative_to(REPO)}:{number}"
        for folder in SHIPPED
        for path in sorted((REPO / folder).rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if re.search(r"psycopg\.(connect|Connection\.connect)\(", line)
    ]
    assert [where.split(":")[0] for where in opened] == ["export/postgres/store.py"], opened


@pytest.mark.postgres
def test_a_session_is_pinned_whatever_the_dsn_and_the_role_ask(postgres_server, postgres_dsn, monkeypatch):
    with psycopg.connect(postgres_dsn, autocommit=True) as admin:
        admin.execute("DROP ROLE IF EXISTS pinned_alice; CREATE ROLE pinned_alice LOGIN")
        admin.execute("ALTER ROLE pinned_alice SET search_path = public, pinned_alice")
    dsn = postgres_server.dsn(psycopg.conninfo.conninfo_to_dict(postgres_dsn)["dbname"], user="pinned_alice")
    monkeypatch.setenv("PGOPTIONS", "-c search_path=public")
    for asked in (dsn, f"{dsn} options='-c search_path=public'"):
        with connect(asked) as con:
            assert con.execute("SHOW search_path").fetchone() == (PINNED,)
            con.rollback()  # an export's first transaction starts here: still pinned
            assert con.execute("SHOW search_path").fetchone() == (PINNED,)
