"""Every call of one of PostgreSQL's own functions in the SQL nnsql runs on PostgreSQL names its schema:
`pg_catalog.format(...)`, never `format(...)`. The texts read: `sql/postgres/*` (the registry, its
upgrade, activation, the runtime libraries, a model's template), the SQL inside the string literals of
`export/postgres/*.py` (the exporter's statements and the generated code's fragments), and the golden
PL/pgSQL and cube models (what the generator writes). A bare call is resolved through the search path,
where another role's look-alike with a closer argument type wins over pg_catalog's (docs/security.md);
the path is pinned too, so this is the second lock, and this test keeps it on every call.

The names are pg_catalog's functions on the test server; the texts are read as SQL: comments, string
literals and quoted identifiers are skipped, dollar-quoted bodies are read as code, and so is the format
string of every `format(...)` call (the SQL that `EXECUTE format(...)` builds and runs)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import psycopg
import pytest

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ("postgres_tiny.sql", "postgres_tiny_binary.sql", "postgres_cube_tiny.sql")
CALL = re.compile(r"([A-Za-z_][A-Za-z0-9_$]*)\s*\(")
JINJA = re.compile(r"\{\{.*?\}\}|\{%.*?%\}|\{#.*?#\}", re.S)

pytestmark = pytest.mark.postgres


def code_only(text: str) -> str:
    """`text` with comments, string literals and quoted identifiers blanked out (their length kept)."""
    text = JINJA.sub(lambda m: " " * len(m.group(0)), text)
    out, i = [], 0
    while i < len(text):
        if text.startswith("--", i):
            end = text.find("\n", i)
            end = len(text) if end < 0 else end
        elif text.startswith("/*", i):
            end = text.find("*/", i) + 2 or len(text)
        elif text[i] in "'\"":
            quote, end = text[i], i + 1
            while end < len(text):
                if text[end] == quote and text.startswith(quote * 2, end):
                    end += 2
                elif text[end] == quote:
                    end += 1
                    break
                else:
                    end += 1
        else:
            out.append(text[i])
            i += 1
            continue
        out.append(" " * (end - i))
        i = end
    return "".join(out)


def bare_calls(text: str, functions: set[str]) -> list[str]:
    """The calls of `functions` in SQL `text` that name no schema, the SQL of its format strings
    included (what `EXECUTE pg_catalog.format('...')` runs)."""
    code = code_only(text)
    found = []
    for match in CALL.finditer(code):
        name, before = match.group(1), code[: match.start()].rstrip()
        if name.lower() in functions and not before.endswith("."):
            found.append(name)
    for inner in format_strings(text, code):
        found += bare_calls(inner, functions)
    return found


FORMAT_CALL = re.compile(r"\bformat\s*\(", re.I)
LITERAL = re.compile(r"[Ee]?'((?:[^']|'')*)'")


def format_strings(text: str, code: str) -> list[str]:
    """The format strings of `format(...)` calls in `text` (`code`: text with literals blanked, of the
    same length), unquoted: the string literal that opens the arguments, with the literals that follow it
    on the next lines (SQL joins them: 'SELECT ...' newline 'WHERE ...')."""
    strings = []
    for match in FORMAT_CALL.finditer(code):
        pieces, position = [], after_white(text, match.end())
        while literal := LITERAL.match(text, position):
            pieces.append(literal.group(1).replace("''", "'"))
            position = after_white(text, literal.end())
            if "\n" not in text[literal.end() : position]:  # 'a' 'b' on one line is not one string
                break
        if pieces:
            strings.append("".join(pieces))
    return strings


def after_white(text: str, position: int) -> int:
    while position < len(text) and text[position].isspace():
        position += 1
    return position


def python_sql(path: Path) -> list[tuple[int, str]]:
    """The string literals of a module, docstrings left out (they are prose)."""
    tree = ast.parse(path.read_text())
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
    ]


def sql_texts() -> list[tuple[str, str]]:
    texts = [(str(p.relative_to(ROOT)), p.read_text()) for p in sorted((ROOT / "sql/postgres").iterdir())]
    texts += [(f"tests/golden/{name}", (ROOT / "tests/golden" / name).read_text()) for name in GOLDEN]
    for path in sorted((ROOT / "export/postgres").glob("*.py")):
        texts += [(f"{path.relative_to(ROOT)}:{line}", text) for line, text in python_sql(path)]
    return texts


@pytest.fixture(scope="module")
def catalog_functions(postgres_server) -> set[str]:
    with psycopg.connect(postgres_server.dsn(), autocommit=True) as con:
        rows = con.execute(
            "SELECT DISTINCT proname FROM pg_catalog.pg_proc WHERE pronamespace = 11"
        ).fetchall()
    return {str(name) for (name,) in rows}


# pg_catalog names that the command's help uses as words: "NAME (and what is in them)", "a version (see"
PROSE = {"name", "version"}


def test_every_call_of_a_pg_catalog_function_names_its_schema(catalog_functions):
    assert {"format", "pg_has_role", "exp", "unnest"} <= catalog_functions
    bare = [
        f"{where}: {name}("
        for where, text in sql_texts()
        for name in bare_calls(text, catalog_functions - PROSE)
    ]
    assert bare == []


def test_the_scan_finds_bare_calls_and_skips_what_is_not_code():
    functions = {"format", "pg_has_role", "exp", "max"}
    text = (
        "-- format(x) in a comment\n"
        "SELECT pg_catalog.format('%s', 'exp(1)'), \"max\"(1), pg_has_role (c.relowner, 'USAGE')\n"
        "AS $fn$ BEGIN RETURN exp(x); END $fn$; SELECT nnsql.max(1), t.max(2)"
    )
    assert bare_calls(text, functions) == ["pg_has_role", "exp"]


def test_the_scan_reads_the_sql_of_format_strings():
    """What `EXECUTE format(...)` runs is code too: its calls are found, its %I-qualified ones are not
    bare, and literals inside it are skipped."""
    functions = {"format", "to_jsonb", "exp", "max"}
    text = (
        "EXECUTE pg_catalog.format('SELECT to_jsonb(%I.labels(%s)) '\n"
        "    'FROM t WHERE x = ''exp(1)'' AND pg_catalog.exp(1) > max(2)', a, b);\n"
        "SELECT pg_catalog.format('%s', 'exp(0)'), upper('max(3)')"
    )
    assert bare_calls(text, functions) == ["to_jsonb", "max"]
