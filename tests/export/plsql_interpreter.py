"""Runs the `--script-only` scripts of an Oracle export with the PL/SQL interpreter of tests/export/plsql:
install.sql in order (schema, tensors, the version package, then verify-and-switch, the in-database gate
that scores the sample rows through check_row and check_answer and only then switches the model), in one
session, and then answers calls of the model's entry package as Oracle would.

Nothing here knows a helper of the package: predict, the functions users query and every helper they
call run from the generated text; UTL_NLA's BLAS calls follow Oracle's documented semantics
(tests/export/plsql/utl_nla.py).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np

from tests.export.plsql.interpreter import Compiler
from tests.export.plsql.parser import parse_expression
from tests.export.plsql.scope import Scope
from tests.export.plsql.session import Rows, Session
from tests.export.plsql.types import ScalarType
from tests.export.plsql.utl_nla import gemm as blas_gemm
from tests.export.plsql.utl_nla import gemv as blas_gemv
from tests.export.plsql.values import PlsqlError

OracleError = PlsqlError
REFUSED = -20020  # a function the model's output kind does not offer
__all__ = ["OracleError", "OracleExpression", "PlsqlError", "Rows", "blas_gemm", "blas_gemv", "load_scripts"]


class InstalledModel:
    """A model installed by its scripts in a session of its own; calls go through the entry package."""

    def __init__(self, directory: Path) -> None:
        self.session = Session()
        self.session.run_script(directory / "install.sql")
        package = re.search(r"CREATE OR REPLACE PACKAGE (\w+) AUTHID", self.entry_text(directory))
        assert package is not None, f"{directory} has no entry package"
        self.name = package[1].upper()
        predict = self.session.packages[self.name].routine("PREDICT")
        self.parameters = [param.name for param in predict.node.params]
        for counts in self.session.loop_counts.values():  # count the calls made after the install
            counts[:] = [0, 0]

    @property
    def steps_run(self) -> int:
        """Time steps (`FOR nn_t` loop bodies) run to their end since the install."""
        run, skipped = self.session.loop_counts.get("NN_T", [0, 0])
        return run - skipped

    @property
    def steps_skipped(self) -> int:
        """Time steps a mask ended early (CONTINUE) since the install."""
        return self.session.loop_counts.get("NN_T", [0, 0])[1]

    @staticmethod
    def entry_text(directory: Path) -> str:
        scripts = sorted(
            directory.glob("04_verify_and_switch_v*.sql"), key=lambda p: int(p.stem.rsplit("v", 1)[1])
        )
        return scripts[-1].read_text()

    @property
    def gemv_calls(self) -> list[dict[str, Any]]:
        """The scalar arguments of every BLAS_GEMV call so far (the verify script's first)."""
        return [arguments for name, arguments in self.session.blas_calls if name == "BLAS_GEMV"]

    def arguments(self, inputs: dict[str, object]) -> list[object]:
        given = {name.upper(): value for name, value in inputs.items()}
        return [given[parameter] for parameter in self.parameters]

    def run(self, inputs: dict[str, object]) -> np.ndarray | None:
        """NAME.predict of one row: None for a NULL input; PlsqlError for what the package raises."""
        return self.session.call(self.name, "predict", *self.arguments(inputs))

    def answer(self, function: str, inputs: dict[str, object], *extra: float) -> object:
        """NAME.<function> of one row; a function the output kind refuses raises AssertionError with
        the package's message."""
        try:
            return self.session.call(self.name, function, *self.arguments(inputs), *extra)
        except PlsqlError as error:
            if error.code == REFUSED:
                raise AssertionError(error.message) from None
            raise


CACHE: dict[tuple, InstalledModel] = {}


def load_scripts(directory: Path) -> InstalledModel:
    """The model of a `--script-only` directory, installed once per version of its scripts."""
    versions = [(p.name, p.stat().st_mtime_ns, p.stat().st_size) for p in sorted(directory.glob("*.sql"))]
    key = (str(directory.resolve()), *versions)
    if key not in CACHE:
        CACHE[key] = InstalledModel(directory)
    return CACHE[key]


class OracleExpression:
    """A PL/SQL expression over z, run by the interpreter element by element: z declared BINARY_DOUBLE
    (as the package's activation procedures declare it), or NUMBER with `number` (what the package must
    never do: NUMBER raises ORA-01426 past 1e126). The result is TO_BINARY_FLOAT of the value."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.tree = parse_expression(text)

    def evaluate(self, z: Any, type_name: str) -> Any:
        scope = Scope(None, Session())
        scope.symbols["Z"] = ("var", ScalarType(type_name))
        scope.frame = {"Z": ScalarType(type_name).convert(z)}
        with np.errstate(all="ignore"):
            return Compiler(scope).expression(self.tree)()

    def number(self, z: float) -> float:
        return float(self.evaluate(z, "NUMBER"))

    def __call__(self, z: np.ndarray) -> np.ndarray:
        with np.errstate(all="ignore"):
            return np.array(
                [np.float32(self.evaluate(value, "BINARY_DOUBLE")) for value in z], dtype=np.float32
            )
