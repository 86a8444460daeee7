"""`--engine onnx --script-only DIR`: the model file for Oracle's in-database ONNX Runtime, its metadata
and the SQL*Plus scripts that load, verify and switch it (see export/oracle/onnx_engine.py for the rules).

DIR/NAME.onnx goes into an Oracle directory object; DIR/install_onnx_vN.sql runs, as the owning user:
onnx_package_vN.sql (the version's package: it writes the JSON metadata and scores rows through
PREDICTION, PREDICTION_PROBABILITY and PREDICTION_SET), the load (DBMS_VECTOR.LOAD_ONNX_MODEL), an
in-database check of sample rows against TensorFlow's probabilities, and only then the switch of the entry
package NAME_onnx. DIR/NAME_metadata.json is the same JSON for other loaders (a BLOB from a client,
LOAD_ONNX_MODEL_CLOUD, OML4Py). DIR/00_privileges_onnx.sql is for the DBA.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from nnsql.text import printable

from ..codegen.generator import render_template
from ..errors import ExportError
from ..onnx import flat_model
from ..onnx.flat_model import FlatModel, Verified
from ..onnx.flatten import FEATURES
from ..publish import budget
from ..publish.pipeline import ExportRequest, load_test_split
from .generator import TEMPLATES, check_oracle_name
from .literals import script_literal as literal
from .onnx_engine import OPSET, TARGET, check_limits, metadata, metadata_parts
from .script import (
    APPEND,
    HEADER,
    VERIFY_ROWS,
    check_compiled,
    check_declarations,
    rows_block,
    testdata_script,
)

MAX_LITERAL = 32_000  # a PL/SQL string literal holds at most 32,767 bytes


@dataclass(frozen=True)
class Names:
    """The Oracle objects of one version."""

    name: str
    version: int

    @property
    def model(self) -> str:  # the mining model
        return f"{self.name}_onnx_v{self.version}".upper()

    @property
    def package(self) -> str:  # the version's package
        return f"{self.name}_onnx_v{self.version}_pkg"

    @property
    def entry(self) -> str:  # the stable entry package
        return f"{self.name}_onnx"

    @property
    def file(self) -> str:
        return f"{self.name}.onnx"


def plsql_literal(text: str, what: str) -> str:
    if len(text.encode()) > MAX_LITERAL:
        raise ExportError(f"the {what} take {len(text.encode()):,} bytes; a PL/SQL literal holds 32,000")
    return literal(text)


def package_context(built: FlatModel, names: Names) -> dict[str, Any]:
    head, tail = metadata_parts(built)
    return {
        "name": names.name,
        "version": names.version,
        "package": names.package,
        "entry": names.entry,
        "model": names.model,
        "file": names.file,
        "features": FEATURES,
        "values": built.values,
        "attributes": built.attributes,
        "parameters": ", ".join(f"{a.parameter} IN UTL_NLA_ARRAY_FLT" for a in built.attributes),
        "arguments": ", ".join(a.parameter for a in built.attributes),
        "labels": ", ".join(literal(label) for label in built.labels) or "NULL",
        "classification": built.function == "classification",
        "metadata_head": plsql_literal(head, "class labels"),
        "metadata_tail": literal(tail),
    }


def install_script(
    built: FlatModel, names: Names, verified: Verified, request: ExportRequest, directory: str
) -> str:
    chosen = np.flatnonzero(np.isfinite(verified.allowed))[:VERIFY_ROWS]  # rows with a finite reference
    rows = len(chosen)
    # predict_proba is the first output alone (PREDICTION_SET's probabilities, or the one value of a
    # regression): the other outputs of a model with several are not what the mining model scores.
    first = first_width(built)
    inputs = [verified.samples.inputs[a.segment.name][chosen] for a in built.attributes]
    comment = (
        f"nnsql model {names.name} version {names.version} from {printable(str(request.model_path))}; "
        f"{verified.report.summary()} in onnxruntime at export ({verified.sample_source})"
    )
    context = {
        **package_context(built, names),
        "header": HEADER,
        "script": f"install_onnx_v{names.version}.sql",
        "package_file": f"onnx_package_v{names.version}.sql",
        "directory": directory,
        "rows": rows,
        "tolerance": repr(request.tolerance),
        "declarations": check_declarations(len(inputs), first),
        "append": APPEND,
        "rows_block": rows_block(
            inputs,
            verified.expected[chosen][:, :first],
            verified.allowed[chosen],
            names.package,
            first_columns=first,
        ),
        "check_compiled_package": check_compiled(names.package),
        "check_compiled_entry": check_compiled(names.entry),
        "comment": literal(comment[:3900]),
    }
    return render_template(TEMPLATES, "onnx_install.sql.j2", context)


def first_width(built: FlatModel) -> int:
    """The values of the first output as predict_proba gives them (a sigmoid's p as [1 - p, p])."""
    width = built.model.graph.output[0].type.tensor_type.shape.dim[-1].dim_value
    return 2 if built.two_class else int(width)


def privileges_script(directory: str) -> str:
    return (
        "-- Least privilege for nnsql's Oracle ONNX route (23ai/26ai). Run as a DBA; replace the names.\n"
        "GRANT CREATE SESSION, CREATE PROCEDURE, CREATE MINING MODEL TO nnsql_owner;\n"
        "GRANT DB_DEVELOPER_ROLE TO nnsql_owner;  -- DBMS_VECTOR, as Oracle's own examples grant it\n"
        f"-- The directory the model file is copied into (an existing one, or: CREATE DIRECTORY {directory}"
        " AS '/path');\n"
        f"GRANT READ ON DIRECTORY {directory} TO nnsql_owner;\n"
    )


def write(
    directory: Path, request: ExportRequest, version: int, oracle_directory: str, progress: bool
) -> tuple[list[Path], Verified]:
    """Convert, verify and write everything; returns the paths written (install script first) and the
    export-time check."""
    check_oracle_name(request.name)
    limits = budget.Budget(seconds=request.parity_seconds)
    built, verified = flat_model.prepare(
        request.model_path, request.sample_rows, request.tolerance, limits, OPSET, TARGET, progress
    )
    check_limits(built)
    names = Names(request.name, version)
    context = package_context(built, names)
    package = HEADER + render_template(TEMPLATES, "onnx_version_package.sql.j2", context)
    files = {
        f"install_onnx_v{version}.sql": install_script(built, names, verified, request, oracle_directory),
        names.file: built.model.SerializeToString(),
        f"onnx_package_v{version}.sql": package,
        f"{request.name}_metadata.json": json.dumps(metadata(built), indent=1) + "\n",
        "00_privileges_onnx.sql": privileges_script(oracle_directory),
    }
    if request.load_test_data:  # the PL/SQL route's table: NAME_onnx takes the same arrays
        files["testdata.sql"] = testdata_script(request.name, *load_test_split(built.source_metadata))
    directory.mkdir(parents=True, exist_ok=True)
    for filename, content in files.items():
        path = directory / filename
        path.write_bytes(content) if isinstance(content, bytes) else path.write_text(content)
    return [directory / filename for filename in files], verified


def oracle_directory_name(name: str) -> str:
    """A directory object's name as the dictionary holds it (upper case), or a one-line error."""
    if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_$#]{0,127}", name):
        raise ExportError(
            f"invalid --onnx-directory {name!r}: give an Oracle directory object's name, e.g. DATA_PUMP_DIR"
        )
    return name.upper()
