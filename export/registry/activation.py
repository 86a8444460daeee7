"""Activating a kept version in a database: its scoring code installed again, its answer check run
again there, then the registry switched, all in the store's one transaction (a failure leaves the
active version scoring)."""

from __future__ import annotations

from typing import Any

from ..errors import ExportError
from .checks import from_document, require_agreement


def activate(store: Any, name: str, version: int) -> None:
    """Inside the store's session. PostgreSQL runs its own procedure (the one a DBA calls); DuckDB, which
    has no procedures, the same steps from here."""
    if store.target == "postgres":
        activate_postgres(store, name, version)
        return
    if store.target in ("spark", "oracle"):  # the store runs the check where the version's code lives
        store.activate_version(name, version)
        return
    store.version_row(name, version)  # an unknown version is named before anything runs
    script, document, _spec = store.kept(name, version)
    for statement in scoring_code(script, name):
        store.con.execute(statement)
    check = from_document(document)
    scores = store.scores(name, check.inputs)
    answers = store.answers(name, check.inputs, tuple(check.answers)) if check.answers else {}
    require_agreement(check, scores, answers, f"{name} version {version}")
    store.switch(name, version)


def scoring_code(script: str, name: str) -> list[str]:
    """The kept script's statements, each read by DuckDB's own parser, when every one is what the
    exporter writes: the model's schema and macros in it (sql/duckdb/model.sql.j2). The script lives in the
    database file, which whoever can write the file can change: anything else (a COPY that writes a file,
    an ATTACH, a macro in another schema) is refused in one line, never run."""
    import duckdb

    allowed = (f"create schema if not exists {name}", f"create or replace macro {name}.")
    statements = []
    for statement in duckdb.extract_statements(script):
        text = " ".join(uncommented(statement.query).split()).rstrip(";").strip()
        first = text.lower()
        if first != allowed[0] and not first.startswith(allowed[1]):
            raise ExportError(
                f"the kept scoring code of {name} holds a statement the exporter never writes "
                f"({' '.join(text.split()[:4])} …): not run, not activated"
            )
        statements.append(statement.query)
    return statements


def uncommented(query: str) -> str:
    """The statement without the comments that lead it (the template's `--` lines, any `/* */`)."""
    text = query.lstrip()
    while text.startswith(("--", "/*")):
        end = text.find("\n") if text.startswith("--") else text.find("*/") + 1
        text = text[end + 1 :].lstrip() if end > 0 else ""
    return text


def activate_postgres(store: Any, name: str, version: int) -> None:
    import psycopg

    store.version_row(name, version)
    try:
        with store.con.transaction():
            store.con.execute("CALL nnsql.activate(%s, %s)", [name, version])
    except psycopg.Error as error:
        message = str(error).splitlines()[0].removeprefix("nnsql.activate: ")
        raise ExportError(message) from None
