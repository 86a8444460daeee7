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


# Every literal of the generated package and of the answer check it keeps goes through script_literal
# (export/oracle/generator.py, export/oracle/kept_check.py): a class name, a model name or a message
# that would break its line is refused there too, where they used to be quoted plainly.
BREAKING = [
    "cat\n.\nHOST touch nnsql-hostile-host",
    "cat\r\n/\nHOST touch nnsql-hostile-host",
    "cat\n#HOST touch nnsql-hostile-host",
    "cat\x00dog",
    "cat\x1b[2Jdog",
    "cat\u2028dog",
]


def sqlplus_lines(text: str) -> list[str]:
    """Lines SQL*Plus would read as its own: a payload's command, "." alone (ends a block), or a line
    opening with "#" (SQLPREFIX). "/" alone is every block's terminator and is not counted."""
    lines = [line.strip() for line in text.replace("\r", "\n").split("\n")]
    return [line for line in lines if line.upper().startswith("HOST") or line == "." or line.startswith("#")]


def generated_texts(graph, name: str = "tiny") -> list[str]:
    """The version's package (its entry package's text inside) and the answer check it keeps."""
    import numpy as np

    from nnsql.export.oracle.generator import OracleGenerator
    from nnsql.export.oracle.kept_check import check_rows

    generator = OracleGenerator(graph, name, 1)
    inputs = [np.zeros((2, 3), np.float32)]
    expected, allowed = np.array([[0.9, 0.1], [0.2, 0.8]]), np.full(2, 1e-5)
    kept = check_rows(name, 1, graph, inputs, expected, allowed)
    return [generator.version_package(), generator.dispatch_body(), *kept]


@pytest.mark.parametrize("text", BREAKING)
def test_a_class_name_that_would_break_its_line_is_refused_by_the_generator(text):
    from dataclasses import replace

    from tests.golden.graphs import tiny_graph

    try:
        texts = generated_texts(replace(tiny_graph(), classes=("no", text)))
    except ExportError as refused:
        assert "\n" not in str(refused)
        return
    assert [line for each in texts for line in sqlplus_lines(each)] == []
    pytest.fail(f"{text!r} was written into the package as it is")


@pytest.mark.parametrize("name", ["m\n.\nHOST touch nnsql-hostile-host", "m\x00"])
def test_a_model_name_that_would_break_its_line_is_refused_by_the_generator(name):
    from tests.golden.graphs import tiny_graph

    with pytest.raises(ExportError) as refused:
        generated_texts(tiny_graph(), name)
    assert "\n" not in str(refused.value)


def test_a_line_of_the_entry_package_that_sqlplus_would_read_is_refused():
    """The entry package travels as one literal over many lines (entry_literal): none of them may be a
    line SQL*Plus reads as its own, whatever a template holds."""
    from nnsql.export.oracle.literals import entry_literal

    assert entry_literal("BEGIN\n    NULL;\nEND;\n/") == "TO_CLOB('BEGIN\n    NULL;\nEND;')"
    for text in ("BEGIN\n.\nHOST touch x\nEND;", "BEGIN\n  #host touch x\nEND;", "BEGIN\n/\nEND;"):
        with pytest.raises(ExportError, match="into an Oracle script") as refused:
            entry_literal(text)
        assert "\n" not in str(refused.value)


# Printable class names with quotes, substitution and terminator characters, and names SQL*Plus commands
# start with: they stay inside their literals, and the scripts still install and answer with them.
ODD = ["it's", "R&D &x", "a;b", ". HOST x", "/ x", "#x", "@@x"]


def test_printable_odd_class_names_stay_in_their_literals_and_the_scripts_run(tmp_path):
    import json

    import numpy as np

    path = models.save(odd_model(), tmp_path / "model")
    (tmp_path / "model" / "metadata.json").write_text(json.dumps({"classes": ODD}))
    scripts = tmp_path / "scripts"
    args = ["--model", str(path), "--name", "odd", "--script-only", str(scripts), "--quiet"]
    assert export_oracle([*args, "--sample-rows", "20"]) == 0
    for script in scripts.glob("*.sql"):
        assert sqlplus_lines(script.read_text()) == [], script.name
    installed = load_scripts(scripts)
    for index, label in enumerate(ODD):
        row = np.zeros(len(ODD), np.float32)
        row[index] = 10.0
        assert installed.answer("label", {"features": row.tolist()}) == label


def odd_model() -> keras.Model:
    """One class per input: the input set highest is the class."""
    import numpy as np

    inputs = keras.Input((len(ODD),), name="features")
    model = keras.Model(inputs, keras.layers.Dense(len(ODD), activation="softmax", name="classes")(inputs))
    model.get_layer("classes").kernel.assign(np.eye(len(ODD), dtype=np.float32))
    return model
