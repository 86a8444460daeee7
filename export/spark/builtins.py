"""The built-in functions the generated Spark SQL calls, checked in the session before an export uses it.

Spark SQL 4.0 has no qualified name for a built-in (`system.builtin.exp` is refused by the session
catalog), and a session's temporary function of the same name replaces it for the rest of the session:
`CREATE TEMPORARY FUNCTION exp AS '…'` with a Hive class, or a Python UDF registered as `abs`. The
generated SQL and the gate would then run the replacement. So an export refuses a session in which a
function it calls is not Spark's own expression; a fresh session has none.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from ..errors import ExportError

# A call by a bare name: an identifier followed by "(", not the last part of a qualified name.
CALL = re.compile(r"(?<![\w.`])([A-Za-z_]\w*)\s*\(")
SPARKS_OWN = "org.apache.spark.sql.catalyst.expressions."


def called(statements: Iterable[str]) -> set[str]:
    """The bare names the statements call (built-ins and keywords such as CAST)."""
    return {match.lower() for statement in statements for match in CALL.findall(statement)}


def replaced(spark: Any, names: Iterable[str]) -> list[tuple[str, str]]:
    """(name, class) of each name the session's function registry (built-ins and temporary functions,
    which a query consults first) holds as a function that is not Spark's own. A persistent function of
    the same name in the current database is not one: a query calls the built-in, although
    `catalog.getFunction(name)` names the persistent one (a `default.exp` made by anyone who may write
    the catalog refused every export)."""
    found = []
    for name in sorted(names):
        for function in spark.catalog.listFunctions(pattern=name):
            if function.name.lower() != name or not function.isTemporary:
                continue  # a keyword such as CAST lists nothing; a persistent function never runs here
            implementation = str(function.className)
            if not implementation.startswith(SPARKS_OWN):
                found.append((name, implementation))
    return found


def refuse_replaced(spark: Any, statements: Iterable[str]) -> None:
    """One line naming the first replaced built-in, or nothing."""
    found = replaced(spark, called(statements))
    if found:
        name, implementation = found[0]
        raise ExportError(
            f"this Spark session replaces the built-in function {name} (with {implementation}), which "
            "the generated SQL calls: export from a fresh session"
        )
