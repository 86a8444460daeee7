"""The layout of generated SQL changes white space only, and never inside a quoted string or name."""

import re

from nnsql.export.codegen.sqlformat import wrap


def without_space(text: str) -> str:
    return re.sub(r"\s+", "", text)


def test_long_lines_break_at_brackets_and_keep_their_meaning():
    line = "SELECT " + ", ".join(f"f(x{i}, [1, 2, {{a: 3}}])" for i in range(30)) + " FROM t"
    text = wrap(line, width=60)
    assert max(len(row) for row in text.splitlines()) <= 60
    assert without_space(text) == without_space(line)


def test_quoted_strings_and_names_are_never_split():
    quoted = "'a label, with (brackets) and  two spaces that is longer than the width allows'"
    name = '"a quoted, (odd) name"'
    line = f"SELECT g({quoted}, {name}, {quoted} || 'x') FROM t WHERE " + " AND ".join(["a = 1"] * 20)
    text = wrap(line, width=40)
    assert quoted in text and name in text and text.count(quoted) == 2
    assert without_space(text) == without_space(line)


def test_unbalanced_lines_and_comments_pass_through():
    assert wrap("-- " + "x, " * 80) == "-- " + "x, " * 80
    opened = "list_transform([" + ", ".join(["a + b"] * 40) + "], lambda v:"
    assert without_space(wrap(opened, width=50)) == without_space(opened)
    assert "\n\n" not in wrap(opened, width=50) and "\n/\n" not in wrap(opened, width=50)
