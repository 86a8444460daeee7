"""Activating a kept version in a database: its scoring code installed again, its answer check run
again there, then the registry switched, all in the store's one transaction (a failure leaves the
active version scoring)."""

from __future__ import annotations

from typing import Any

from nnsql.export.errors import ExportError
from nnsql.export.registry.checks import from_document, require_agreement


def activate(store: Any, name: str, version: int) -> None:
    """Inside the store's session. PostgreSQL runs its own procedure (the one a DBA calls); DuckDB, which
    has no procedures, the same steps from here."""
    if store.target == "postgres":
        activate_postgres(store, name, version)
        return
    store.version_row(name, version)  # an unknown version is named before anything runs
    script, document, _spec = store.kept(name, version)
    store.con.execute(script)
    check = from_document(document)
    scores = store.scores(name, check.inputs)
    answers = store.answers(name, check.inputs, tuple(check.answers)) if check.answers else {}
    require_agreement(check, scores, answers, f"{name} version {version}")
    store.switch(name, version)


def activate_postgres(store: Any, name: str, version: int) -> None:
    import psycopg

    store.version_row(name, version)
    try:
        with store.con.transaction():
            store.con.execute("CALL nnsql.activate(%s, %s)", [name, version])
    except psycopg.Error as error:
        message = str(error).splitlines()[0].removeprefix("nnsql.activate: ")
        raise ExportError(message) from None
