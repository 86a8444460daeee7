"""The versions of an Oracle schema's models: listed from nnsql_models, activated by the schema's own
nnsql_admin.activate (which runs the version's kept answer check in the database before it switches),
removed when inactive (`nnsql models --oracle-dsn`)."""

from __future__ import annotations

from typing import Any

from ..errors import ExportError
from ..oracle.store import OracleStore

LISTING = """\
SELECT m.name, m.version, m.created, m.active, m.output_kind, m.classes, m.parity_rows,
       m.parity_max_abs_diff, m.source,
       (SELECT COUNT(*) FROM nnsql_check_rows c WHERE c.model = m.name AND c.version = m.version)
FROM nnsql_models m"""
KEYS = (
    "name",
    "version",
    "created",
    "active",
    "output_kind",
    "classes",
    "parity_rows",
    "parity_max_abs_diff",
    "source",
    "activatable",
)

# One block, so that the version's rows and package go together and the active version is refused
# inside the database, whatever changed since the registry was read.
REMOVE = """\
DECLARE
    found PLS_INTEGER;
BEGIN
    SELECT COUNT(*) INTO found FROM nnsql_models WHERE name = :name AND version = :version;
    IF found = 0 THEN
        RAISE_APPLICATION_ERROR(-20031, :name || ' has no version ' || TO_CHAR(:version));
    END IF;
    SELECT COUNT(*) INTO found FROM nnsql_models WHERE name = :name AND version = :version AND active = 'Y';
    IF found > 0 THEN
        RAISE_APPLICATION_ERROR(-20035, :name || ' version ' || TO_CHAR(:version)
            || ' is the active one: activate another before removing it');
    END IF;
    DELETE FROM nnsql_check_rows WHERE model = :name AND version = :version;
    DELETE FROM nnsql_tensors WHERE model = :name AND version = :version;
    DELETE FROM nnsql_models WHERE name = :name AND version = :version;
    COMMIT;
    BEGIN
        EXECUTE IMMEDIATE 'DROP PACKAGE '
            || DBMS_ASSERT.ENQUOTE_NAME(DBMS_ASSERT.SIMPLE_SQL_NAME(:name || '_v' || TO_CHAR(:version)));
    EXCEPTION WHEN OTHERS THEN
        IF SQLCODE != -4043 THEN RAISE; END IF;  -- a package already dropped by hand
    END;
END;"""


def application_message(error: Exception) -> str:
    """The first line of an error the PL/SQL raised, without its ORA code and procedure name."""
    line = str(error).splitlines()[0]
    if line.startswith("ORA-20"):
        line = line.split(": ", 1)[-1]
    return line.removeprefix("nnsql_admin.activate: ")


def text(row: dict[str, Any]) -> str:
    """The classes column, a CLOB the driver hands over as a LOB to read."""
    classes = row["classes"]
    return str(classes.read() if hasattr(classes, "read") else classes or "[]")


class OracleVersions(OracleStore):
    """OracleStore's connection, used to list, activate and remove versions."""

    @property
    def where(self) -> str:
        return f"Oracle {self.dsn}"

    def versions(self, name: str | None = None) -> list[dict[str, Any]]:
        statement, params = LISTING, {}
        if name is not None:
            statement, params = statement + " WHERE m.name = :name", {"name": name}
        with self.con.cursor() as cursor:
            cursor.execute(statement + " ORDER BY m.name, m.version", params)
            rows = cursor.fetchall()
        listed = [dict(zip(KEYS, row, strict=True)) for row in rows]
        return [
            {**row, "active": row["active"] == "Y", "activatable": row["activatable"] > 0} for row in listed
        ]

    def run_block(self, block: str, name: str, version: int) -> None:
        """A PL/SQL block with the model's name and version bound; its refusal as one line."""
        try:
            with self.con.cursor() as cursor:
                cursor.execute(block, {"name": name, "version": version})
        except self.oracledb.DatabaseError as error:
            raise ExportError(application_message(error)) from None

    def activate_version(self, name: str, version: int) -> None:
        """The schema's nnsql_admin.activate: the check in the database, then the switch, or nothing."""
        self.run_block("BEGIN nnsql_admin.activate(:name, :version); END;", name, version)

    def remove(self, name: str, version: int) -> None:
        """An inactive version's package, tensors, kept check and registry row (the active one is refused)."""
        self.run_block(REMOVE, name, version)
