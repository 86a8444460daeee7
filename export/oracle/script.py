"""`--script-only`: everything an Oracle export does, as SQL*Plus / SQLcl scripts a DBA can review and run.

DIR/install.sql runs, in order: 01_schema.sql (tables, types, nnsql_admin), 02_tensors_vN.sql (the weights
as PL/SQL blocks), 02_check_rows_vN.sql (the answer check kept for activating the version again from SQL:
`EXEC nnsql_admin.activate('NAME', N)`), 03_package_vN.sql (the version's package),
04_verify_and_switch_vN.sql (scores sample rows in the database, compares with TensorFlow's probabilities
embedded in the script, records the figures and only then switches the model's entry package), and
optionally 05_testdata.sql. 00_privileges.sql is for the DBA;
activate_vN.sql makes version N the active one again later (a roll back or forward): the same check on the
same rows, then the same switch.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
from jinja2 import Environment, FileSystemLoader, StrictUndefined
from tqdm import tqdm

from nnsql.text import printable

from ..ir import graph as ir
from ..ir import kinds
from ..publish import parity
from ..publish.pipeline import ExportRequest, Prepared, input_spec_json, output_columns
from .generator import SQL_DIR, TEMPLATES, OracleGenerator, StoredChunk, stored_chunks
from .kept_check import check_rows
from .literals import APPEND as APPEND  # the ONNX engine's scripts append with it too
from .literals import array_calls, double_literal, doubles
from .literals import script_literal as literal

VALUES_PER_BLOCK = 8000  # values per anonymous block: keeps each block small to compile
VERIFY_ROWS = 20  # sample rows embedded in the verify-and-switch script
AT_SCALE_ROWS = 6  # of which rows at scale (export/publish/samples.py), when the samples have them
HEADER = "WHENEVER SQLERROR EXIT FAILURE ROLLBACK\nSET DEFINE OFF\n"


def tensor_blocks(name: str, version: int, chunk: StoredChunk) -> Iterator[str]:
    """INSERT an empty array, then append the values block by block (each block a few KB)."""
    key = (
        f"model = {literal(name)} AND version = {version} AND tensor = {literal(chunk.tensor)} "
        f"AND chunk = {chunk.chunk}"
    )
    yield (
        "INSERT INTO nnsql_tensors (model, version, tensor, chunk, shape, layout, value) VALUES ("
        f"{literal(name)}, {version}, {literal(chunk.tensor)}, {chunk.chunk}, {literal(chunk.shape)}, "
        f"{literal(chunk.layout)}, UTL_NLA_ARRAY_FLT());"
    )
    for start in range(0, len(chunk.values), VALUES_PER_BLOCK):
        body = "\n".join(array_calls(chunk.values[start : start + VALUES_PER_BLOCK], "v"))
        yield (
            f"DECLARE\n    v UTL_NLA_ARRAY_FLT;\n{APPEND}\nBEGIN\n"
            f"    SELECT value INTO v FROM nnsql_tensors WHERE {key} FOR UPDATE;\n{body}\n"
            f"    UPDATE nnsql_tensors SET value = v WHERE {key};\nEND;\n/"
        )


def tensors_script(prepared: Prepared, name: str, version: int, progress: bool = False) -> str:
    parts = [HEADER, f"-- Weights of {name} version {version} ({prepared.graph.sha256()[:12]})."]
    parts.append(f"DELETE FROM nnsql_tensors WHERE model = {literal(name)} AND version = {version};")
    chunks = list(stored_chunks(prepared.graph))
    total = sum(chunk.values.size for chunk in chunks)
    bar = tqdm(
        total=total, desc=f"{name} v{version}: weights", unit="value", unit_scale=True, disable=not progress
    )
    with bar:
        for chunk in chunks:
            parts.extend(tensor_blocks(name, version, chunk))
            bar.update(chunk.values.size)
    parts.append("COMMIT;\n")
    return "\n".join(parts)


def rows_block(
    inputs: list[np.ndarray],
    expected: np.ndarray,
    allowed: np.ndarray,
    package: str,
    *,
    first_columns: int,
    graph: ir.Graph | None = None,
) -> str:
    """Per sample row: its inputs and the package's scores against what they are compared with (Keras's
    values; the float64 reference on rows at scale), each value within the row's tolerance (`allowed`,
    unscaled: check_row scales it by the value's own size as export/publish/parity.py `bounds` does). Ties
    are read from the first output (its `first_columns` values) as parity.check_answers reads them. With
    the `graph`, `predict` is scored and each function its kind offers is checked against a Keras user's
    answer (export/publish/parity.py's questions and margins); without, `predict_proba` (the ONNX engine's
    package)."""
    several = bool(graph is not None and graph.outputs)
    questions = parity.questions(graph.kind, several_outputs=several) if graph is not None else ()
    ties = parity.tie_margins(expected[:, :first_columns], allowed)
    if graph is not None:
        answers = kinds.keras_answers(
            graph.kind, expected[:, :first_columns], graph.classes, ties, several_outputs=several
        )
    lines = []
    for row in range(len(expected)):
        for index, values in enumerate(inputs):
            lines.append(f"    x{index} := UTL_NLA_ARRAY_FLT();")
            lines.extend(array_calls(values[row].ravel(), f"x{index}"))
        arguments = ", ".join(f"x{i}" for i in range(len(inputs)))
        expected_items = ", ".join(double_literal(p) for p in expected[row])
        function = "predict" if graph is not None else "predict_proba"
        lines.append(
            f"    check_row({row + 1}, {package}.{function}({arguments}), "
            f"UTL_NLA_ARRAY_DBL({expected_items}), {double_literal(allowed[row])}, "
            f"{double_literal(ties[row])});"
        )
        for function in questions:
            if answers.undecided[function][row]:
                continue
            call = f"{package}.{function}({arguments})"
            agrees = answer_condition(function, call, answers.answers[function][row], float(allowed[row]))
            lines.append(f"    check_answer({row + 1}, '{function}', {agrees});")
    return "\n".join(lines)


def check_rows_script(request: ExportRequest, prepared: Prepared, version: int) -> str:
    """The rows verify-and-switch checks, kept for `EXEC nnsql_admin.activate(name, version)`."""
    chosen = verify_rows(prepared)
    inputs = [prepared.samples.inputs[spec.name][chosen] for spec in prepared.graph.inputs]
    expected, allowed = prepared.gate.expected(chosen), row_tolerances(prepared)[chosen]
    blocks = check_rows(request.name, version, prepared.graph, inputs, expected, allowed)
    header = f"-- The answer check of {request.name} version {version}, kept for activating it again later."
    return "\n".join([HEADER, header, *(block + "\n/" for block in blocks), "COMMIT;\n"])


def schema_script() -> str:
    """The tables and types, then nnsql_admin (what a DBA calls to activate a version from SQL)."""
    return (SQL_DIR / "schema.sql").read_text() + (SQL_DIR / "admin.sql").read_text()


def check_declarations(inputs: int, first_columns: int) -> str:
    """The verify block's own variables: the input arrays, and check_row's per-column figures."""
    lines = [f"    x{i} UTL_NLA_ARRAY_FLT;" for i in range(inputs)]
    lines += [
        "    column_diff   UTL_NLA_ARRAY_DBL := UTL_NLA_ARRAY_DBL();  -- per column: the largest |d|",
        "    column_bound  UTL_NLA_ARRAY_DBL := UTL_NLA_ARRAY_DBL();  -- per column: the largest bound",
        f"    first_columns CONSTANT PLS_INTEGER := {first_columns};  -- the first output's: its argmax",
    ]
    return "\n".join(lines)


def row_tolerances(prepared: Prepared) -> np.ndarray:
    """Each sample row's tolerance, unscaled (each value's bound is computed from it by check_row)."""
    return prepared.gate.allowed(np.arange(prepared.samples.rows))


def verify_rows(prepared: Prepared) -> np.ndarray:
    """The rows the script checks: the first ordinary ones, then up to AT_SCALE_ROWS of those at scale
    (spread over their groups) whose reference is finite."""
    allowed = row_tolerances(prepared)
    at_scale = prepared.samples.at_scale
    scaled = np.flatnonzero(at_scale & np.isfinite(allowed))
    if len(scaled) > AT_SCALE_ROWS:
        scaled = scaled[np.linspace(0, len(scaled) - 1, AT_SCALE_ROWS).round().astype(int)]
    ordinary = np.flatnonzero(~at_scale)[: VERIFY_ROWS - len(scaled)]
    return np.concatenate([ordinary, scaled]).astype(int)


def answer_condition(function: str, call: str, expected: object, tolerance: float) -> str:
    """A PL/SQL condition: the function's answer equals the Keras user's (vectors within tolerance)."""
    if function == "predict_proba":
        return f"gap({call}, {doubles(expected)}) <= {tolerance!r}"  # type: ignore[arg-type]
    if function == "labels":
        return f"{call} = nnsql_labels({', '.join(literal(label) for label in expected)})"  # type: ignore[attr-defined]
    if function == "label":
        return f"{call} = {literal(str(expected))}"
    return f"{call} = {int(expected)}"  # type: ignore[call-overload]


def verify_and_switch_script(
    request: ExportRequest, prepared: Prepared, generator: OracleGenerator, *, activation: bool = False
) -> str:
    """The verify-and-switch script of a new version; with `activation`, the script that switches back to
    this version later (`activate_vN.sql`): the same check on the same rows, then the switch, and the
    registry row that exists already marked active."""
    chosen = verify_rows(prepared)
    rows = len(chosen)
    allowed = row_tolerances(prepared)
    inputs = [prepared.samples.inputs[spec.name][chosen] for spec in prepared.graph.inputs]
    environment = Environment(loader=FileSystemLoader(TEMPLATES), undefined=StrictUndefined)
    graph = prepared.graph
    questions = parity.questions(graph.kind, several_outputs=bool(graph.outputs))
    return environment.get_template("verify_and_switch.sql.j2").render(
        header=HEADER,
        append=APPEND,
        declarations=check_declarations(len(inputs), graph.first_size),
        rows_block=rows_block(
            inputs,
            prepared.gate.expected(chosen),
            allowed[chosen],
            generator.package,
            first_columns=graph.first_size,
            graph=graph,
        ),
        rows=rows,
        tolerance=repr(request.tolerance),
        questions=", ".join(questions) or "none",
        kind=graph.kind,
        kind_literal=literal(graph.kind),
        rule=kinds.KINDS[graph.kind].rule,
        name=generator.name,
        name_literal=literal(generator.name),
        version=generator.version,
        package=generator.package,
        sha256=literal(graph.sha256()),
        input_spec=literal(input_spec_json(graph)),
        classes=literal(json.dumps(list(graph.classes))),
        source=literal(printable(str(request.model_path))),
        metadata=metadata_expression(prepared.metadata),
        bounds=bounds_expression(graph, request.tolerance),
        sample_source=literal(printable(f"{prepared.samples.source} ({rows} of them scored by the script)")),
        dispatch_spec=generator.dispatch_spec(),
        dispatch_body=generator.dispatch_body(),
        check_compiled=check_compiled(generator.name),
        activation=activation,
    )


def bounds_expression(graph: ir.Graph, tolerance: float) -> str:
    """A PL/SQL expression of the bounds applied, as the other stores record them under `parity_bounds`
    (export/publish/parity.py `ParityReport.bounds`): each output's largest |d| and largest bound, from
    check_row's per-column figures once every row is checked."""
    head = json.dumps({"tolerance": tolerance, "rule": parity.RULE, "outputs": None})
    assert head.endswith("null}")
    figures = " || ', ' || ".join(
        f"output_figures({literal(json.dumps(name))}, {start + 1}, {stop})"
        for name, start, stop in output_columns(graph)
    )
    return f"{literal(head[: -len('null}')] + '[')} || {figures} || ']}}'"


def metadata_expression(metadata: dict[str, Any]) -> str:
    """The registry row's metadata: the model's, with the bounds the script computed (`:nn_bounds`)."""
    head = json.dumps({**metadata, "parity_bounds": None})
    assert head.endswith("null}")
    return f"{literal(head[: -len('null}')])} || :nn_bounds || '}}'"


def check_compiled(unit: str) -> str:
    environment = Environment(loader=FileSystemLoader(TEMPLATES), undefined=StrictUndefined)
    return environment.get_template("check_compiled.sql.j2").render(unit=unit)


def testdata_script(name: str, features: np.ndarray, labels: np.ndarray) -> str:
    table = f"{name}_testdata"
    parts = [
        HEADER,
        f"-- Test images of {name} as UTL_NLA_ARRAY_FLT rows (like CERN's testdata_array).",
        f"BEGIN EXECUTE IMMEDIATE 'DROP TABLE {table} PURGE'; EXCEPTION WHEN OTHERS THEN "
        "IF SQLCODE != -942 THEN RAISE; END IF; END;\n/",
        f"CREATE TABLE {table} (id NUMBER PRIMARY KEY, features UTL_NLA_ARRAY_FLT NOT NULL, label NUMBER)"
        "\n    VARRAY features STORE AS SECUREFILE LOB;",
    ]
    flat = features.reshape(len(features), -1)
    for row in range(len(flat)):
        body = "\n".join(array_calls(flat[row], "v"))
        parts.append(
            f"DECLARE\n    v UTL_NLA_ARRAY_FLT := UTL_NLA_ARRAY_FLT();\n{APPEND}\nBEGIN\n{body}\n"
            f"    INSERT INTO {table} (id, features, label) VALUES ({row}, v, {int(labels[row])});\nEND;\n/"
        )
    parts.append("COMMIT;\n")
    return "\n".join(parts)


def privileges_script(name: str) -> str:
    environment = Environment(loader=FileSystemLoader(SQL_DIR), undefined=StrictUndefined)
    template = environment.get_template("privileges.sql.j2")
    return template.render(owner="nnsql_owner", role=f"{name}_scorer", name=name)


def write_scripts(
    directory: Path,
    request: ExportRequest,
    prepared: Prepared,
    version: int,
    test_data: tuple[np.ndarray, np.ndarray] | None = None,
    progress: bool = False,
) -> list[Path]:
    """Write the scripts; returns their paths in the order install.sql runs them."""
    generator = OracleGenerator(prepared.graph, request.name, version)
    files: dict[str, str] = {
        "00_privileges.sql": privileges_script(request.name),
        "01_schema.sql": HEADER + schema_script(),
        f"02_tensors_v{version}.sql": tensors_script(prepared, request.name, version, progress),
        f"02_check_rows_v{version}.sql": check_rows_script(request, prepared, version),
        f"03_package_v{version}.sql": HEADER
        + generator.version_package()
        + check_compiled(generator.package),
        f"04_verify_and_switch_v{version}.sql": verify_and_switch_script(request, prepared, generator),
    }
    if test_data is not None:
        files["05_testdata.sql"] = testdata_script(request.name, *test_data)
    # Not run by install.sql: what a DBA runs to make this version the active one again later.
    files[f"activate_v{version}.sql"] = verify_and_switch_script(
        request, prepared, generator, activation=True
    )
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for filename, text in files.items():
        path = directory / filename
        path.write_text(text)
        written.append(path)
    runs = [path.name for path in written if path.name[:1].isdigit() and not path.name.startswith("00_")]
    (directory / "install.sql").write_text(install_script(runs))
    return written


def install_script(names: Iterable[str]) -> str:
    lines = [HEADER, "-- Run as the owning user: sqlplus user@host:port/service @install.sql"]
    lines += [f"@@{name}" for name in names]
    return "\n".join(lines) + "\n"
