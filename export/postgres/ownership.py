"""Use only schemas and objects that the exporting role, a superuser or a role the user trusts owns.

With CREATE on the database, any role can create the schema `nnsql` (or a model's schema) before the
first export, with registry tables and a trigger of its own. `CREATE ... IF NOT EXISTS` would adopt them:
the trigger would run as the exporting role during its export, and the owner of a schema can drop and
replace what others create in it, such as the SECURITY DEFINER scoring functions. So before using a schema,
every object in it (tables, functions, types, operators, extensions) must be owned by a trusted role:
the exporting role, a superuser (who could change anything anyway), the database owner when the schema is
`pg_database_owner`'s (PostgreSQL 15's `public`) and that owner is trusted, or a role named with
`--registry-owner`. Triggers, rules and row security policies are never adopted: the exporter creates
none, so any on a table of these schemas is refused, whoever made it. Nor may any other role (PUBLIC
included) hold CREATE on these schemas: what it adds later is called instead of the objects checked,
or makes their calls ambiguous. An extension the exporter builds on (cube) must be owned by a trusted
role too: its owner may drop it with CASCADE.
"""

from __future__ import annotations

from collections.abc import Sequence

import psycopg

from ..errors import ExportError

# Roles trusted as owners, given the user's --registry-owner list.
TRUSTED = """
SELECT r.oid FROM pg_roles r
 WHERE r.rolsuper OR r.rolname = current_user OR r.rolname = ANY(%(owners)s::text[])
    OR (r.rolname = 'pg_database_owner'
        AND (SELECT d.rolsuper OR d.rolname = current_user OR d.rolname = ANY(%(owners)s::text[])
               FROM pg_database db JOIN pg_roles d ON d.oid = db.datdba
              WHERE db.datname = pg_catalog.current_database()))
"""

# Every object of the schemas with its owner; the schemas first.
OWNED = (
    """
WITH s AS (SELECT oid, nspname, nspowner FROM pg_namespace WHERE nspname = ANY(%(schemas)s::text[])),
objects AS (
    SELECT 0 AS rank, 'schema' AS kind, s.nspname::text AS name, s.nspowner AS owner FROM s
    UNION ALL
    SELECT 1, 'table', c.oid::regclass::text, c.relowner FROM pg_class c JOIN s ON c.relnamespace = s.oid
    UNION ALL
    SELECT 2, 'function', p.oid::regprocedure::text, p.proowner
      FROM pg_proc p JOIN s ON p.pronamespace = s.oid
    UNION ALL
    SELECT 3, 'type', t.oid::regtype::text, t.typowner FROM pg_type t JOIN s ON t.typnamespace = s.oid
    UNION ALL
    SELECT 4, 'operator', o.oid::regoperator::text, o.oprowner
      FROM pg_operator o JOIN s ON o.oprnamespace = s.oid
    UNION ALL
    -- A trusted extension's objects belong to the bootstrap superuser, but whoever created it controls
    -- them, and PostgreSQL lets any role with CREATE on the database put one in any schema
    SELECT 5, 'extension', e.extname::text, e.extowner FROM pg_extension e JOIN s ON e.extnamespace = s.oid
)
SELECT o.kind, o.name, pg_catalog.pg_get_userbyid(o.owner) FROM objects o
 WHERE (o.rank = 0 OR %(whole)s) AND o.owner NOT IN ("""
    + TRUSTED
    + """)
 ORDER BY o.rank, o.name
 LIMIT 1
"""
)

# Code that would run when the exporter (or a scoring role) reads or writes the schemas' tables.
ATTACHED = """
WITH t AS (SELECT c.oid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
            WHERE n.nspname = ANY(%(schemas)s::text[]))
SELECT 'trigger', tgname::text, tgrelid::regclass::text FROM pg_trigger
 WHERE NOT tgisinternal AND tgrelid IN (SELECT oid FROM t)
UNION ALL
SELECT 'rule', rulename::text, ev_class::regclass::text FROM pg_rewrite
 WHERE rulename <> '_RETURN' AND ev_class IN (SELECT oid FROM t)
UNION ALL
SELECT 'row security policy', polname::text, polrelid::regclass::text FROM pg_policy
 WHERE polrelid IN (SELECT oid FROM t)
LIMIT 1
"""

# Roles other than trusted ones that may create objects in the schemas (PUBLIC, grantee 0, included).
# Such a role could add, after the export, a function the scoring code or its callers would run instead
# of the one they name (`model.score(real[])` beside `score(float8[])`: an exact match wins over a cast),
# or one that makes their calls ambiguous (`cube(float8[], integer DEFAULT 0)` beside the extension's
# `cube(float8[])`: every call then fails), although every object there was trusted when checked.
CREATORS = (
    """
SELECT n.nspname::text,
       CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE pg_catalog.pg_get_userbyid(a.grantee) END
  FROM pg_catalog.pg_namespace n, pg_catalog.aclexplode(n.nspacl) AS a
 WHERE n.nspname = ANY(%(schemas)s::text[]) AND a.privilege_type = 'CREATE'
   AND (a.grantee = 0 OR a.grantee NOT IN ("""
    + TRUSTED
    + """))
 ORDER BY 1, 2
 LIMIT 1
"""
)

# The extension's owner, unless trusted: it may drop the extension, and with CASCADE every column and
# function of other roles that uses its types.
EXTENSION = (
    """
SELECT pg_catalog.pg_get_userbyid(e.extowner) FROM pg_extension e
 WHERE e.extname = %(extension)s AND e.extowner NOT IN ("""
    + TRUSTED
    + """)
"""
)

OWNER_ADVICE = "drop it (a DBA), or pass --registry-owner {owner} if you trust that role"


def check_schemas(
    con: psycopg.Connection, schemas: Sequence[str], owners: Sequence[str], *, whole: bool = True
) -> None:
    """Raise ExportError (one line, naming the owner) unless every object of `schemas` is owned by a
    trusted role, none of their tables has a trigger, rule or policy, and no other role may create
    objects in them. `whole=False` checks only the schemas' owners and who may create in them (an
    extension's schema, where the exporter calls the extension's functions by their qualified names:
    only the schema's owner could swap them, by renaming the schema, and a role that may create there
    could add overloads that win over them or make them ambiguous). The caller creates
    a schema it will use before checking it, in its transaction, so that none can appear in between."""
    parameters = {"schemas": list(schemas), "owners": list(owners), "whole": whole}
    row = con.execute(OWNED, parameters).fetchone()
    if row is not None:
        kind, name, owner = row
        raise ExportError(
            f"{kind} {name} is owned by role '{owner}', not by '{exporter(con)}' (the exporting role) or a "
            f"superuser: its owner could change what scoring runs; refusing to use it: "
            + OWNER_ADVICE.format(owner=owner)
        )
    row = con.execute(ATTACHED, parameters).fetchone() if whole else None
    if row is not None:
        kind, name, table = row
        raise ExportError(
            f"table {table} has a {kind} '{name}', which would run inside the export; the exporter "
            "creates none and adopts none: refusing (a DBA should drop it)"
        )
    row = con.execute(CREATORS, parameters).fetchone()
    if row is not None:
        schema, role = row
        advice = (
            f"a DBA revokes it (REVOKE CREATE ON SCHEMA {schema} FROM {role})"
            if role == "PUBLIC"
            else f"a DBA revokes it (REVOKE CREATE ON SCHEMA {schema} FROM {role}), or pass --registry-owner "
            f"{role} if you trust that role"
        )
        raise ExportError(
            f"schema {schema} lets role {role} create objects in it: one could add a function that "
            f"scoring would call instead of, or beside, the one it names; refusing to use it: {advice}"
        )


def check_extension(con: psycopg.Connection, extension: str, owners: Sequence[str]) -> None:
    """Raise ExportError (one line, naming the owner) unless `extension` is owned by a trusted role, as
    the schemas are: whoever owns it may drop it with CASCADE, removing what the export built on it."""
    row = con.execute(EXTENSION, {"extension": extension, "owners": list(owners)}).fetchone()
    if row is not None:
        raise ExportError(
            f"extension {extension} is owned by role '{row[0]}', not by '{exporter(con)}' (the exporting "
            "role) or a superuser: its owner could drop it, and with it every column and function that "
            "uses it; refusing to use it: " + OWNER_ADVICE.format(owner=row[0])
        )


# The tensors' column as an earlier release made it (real[]), and its owner: registry.sql widens it to
# float8[] only as a role with the owner's privileges.
NARROW = """
SELECT pg_catalog.pg_get_userbyid(c.relowner) FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
 WHERE a.attrelid = 'nnsql.tensors'::regclass AND a.attname = 'value' AND a.atttypid = 'real[]'::regtype
"""


def check_widened(con: psycopg.Connection) -> None:
    """Raise ExportError (one line, naming the owner) while nnsql.tensors holds real[] weights: an earlier
    release's registry that registry.sql could not widen, the exporting role not having its owner's
    privileges. A version stored there would have its float64 weights rounded to float32."""
    row = con.execute(NARROW).fetchone()
    if row is not None:
        raise ExportError(
            f"nnsql.tensors stores weights as real[] (an earlier release's registry) and only its owner "
            f"'{row[0]}' may widen it to float8[]: export once as '{row[0]}', or a DBA runs ALTER TABLE "
            "nnsql.tensors ALTER COLUMN value TYPE float8[]; refusing to round weights to float32"
        )


def exporter(con: psycopg.Connection) -> str:
    """The connected (exporting) role."""
    row = con.execute("SELECT current_user").fetchone()
    return str(row[0]) if row else "?"
