"""Text written into an Oracle script never starts a line of its own.

Found in the hostile pass of issue #32 (by reading the scripts; no SQL*Plus runs here): the model's
path went into the verify-and-switch script as a string literal as it was, line breaks included.
SQL*Plus reads a script line by line whatever the quotes: inside a block, a line of "." alone ends
the block unrun and the next line is one of SQL*Plus's own commands, so a model under a directory
named "m\\n.\\nHOST touch /tmp/x\\n" had the DBA who ran the script run `touch` in a shell. The path
is now written escaped (as every name is shown), and any other text that would break its line is
refused in one line (export/oracle/literals.py `script_literal`).
"""

from __future__ import annotations

import keras
import pytest

from nnsql.export.errors import ExportError
from nnsql.export.oracle.__main__ import main as export_oracle
from nnsql.text import printable
from tests import models
from tests.export.plsql_interpreter import load_scripts

pytestmark = pytest.mark.oracle

HOSTILE = "m\n.\nHOST touch nnsql-hostile-host\n"


def small_model() -> keras.Model:
    inputs = keras.Input((4,), name="features")
    return keras.Model(inputs, keras.layers.Dense(3, activation="softmax", name="classes")(inputs))


def test_a_path_with_line_breaks_stays_inside_its_literal(tmp_path):
    directory = tmp_path / HOSTILE
    directory.mkdir()
    path = models.save(small_model(), directory / "model")
    scripts = tmp_path / "scripts"
    args = ["--model", str(path), "--name", "m", "--script-only", str(scripts), "--quiet"]
    assert export_oracle([*args, "--sample-rows", "20"]) == 0
    for script in scripts.glob("*.sql"):
        lines = script.read_text().splitlines()
        assert not any(line.startswith("HOST") for line in lines), script.name
    (row,) = load_scripts(scripts).session.store.tables["NNSQL_MODELS"].rows
    assert row["SOURCE"] == printable(str(path))


@pytest.mark.parametrize("text", ["a\nb", "a\rb", "a\x00b", "a\u2028b"])
def test_any_text_that_would_break_its_line_is_refused(text):
    from nnsql.export.oracle.literals import script_literal

    with pytest.raises(ExportError, match="into an Oracle script"):
        script_literal(text)


def test_printable_text_is_the_usual_literal():
    from nnsql.export.oracle.literals import script_literal

    assert script_literal("it's") == "'it''s'"
