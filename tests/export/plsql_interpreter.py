"""Executes the input checks and the network body of a generated Oracle package with numpy, from the
generated text alone.

Independent of the generator: it reads the `--script-only` files, takes every BLAS argument from the
rendered PL/SQL (not from the generator's data structures) and every stored array from the INSERT/append
blocks, and runs `UTL_NLA.BLAS_GEMV` as Oracle documents it:
    y := alpha·op(A)·x + beta·y, A an m×n matrix stored in `a` with leading dimension lda,
    pack 'C' column-major (A(i,j) = a[i + j·lda]) or 'R' row-major (A(i,j) = a[i·lda + j]),
    op(A) = A for trans 'N', Aᵀ for 'T'/'C'; x read with stride incx, y with stride incy.
Arithmetic is float32 like BINARY_FLOAT; activations follow the package's BINARY_DOUBLE procedures:
relu, sigmoid, tanh and softmax as the template writes them, every other one by evaluating the
procedure's own expression text (`OracleExpression`) with Oracle's two kinds of numbers: a BINARY_DOUBLE
overflows to infinity and underflows to 0 as IEEE says, a NUMBER (an unsuffixed literal) raises
ORA-01426 past 1e126 (EXP of more than about 290). So a formula that slipped into NUMBER arithmetic would
fail here as it would in Oracle.
The checks (`IF <condition> THEN RETURN NULL | RAISE_APPLICATION_ERROR(...) END IF;` before the network)
run as PL/SQL would: the package's helpers first_null, first_nonfinite and first_outside as their bodies
define them, over the row as bound to a UTL_NLA_ARRAY_FLT (BINARY_FLOAT: a value beyond float32's range
is infinite there).

`answer` runs what users query beside predict: the first output's probabilities (their statements, in the
same forms) and score, label or labels, each read from its generated text (the comparison and threshold
as written, the class labels from the package's literals).
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import numpy as np

FLOAT = re.compile(r"(-?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)f")
KEY = re.compile(r"model = '(\w+)' AND version = (\d+) AND tensor = '([\w.]+)' AND chunk = (\d+)")


ELEMENTWISE_OPS = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "max": np.maximum,
    "min": np.minimum,
}


def blas_gemv(trans, m, n, alpha, a, lda, x, incx, beta, y, incy, pack="C"):
    a = np.asarray(a, dtype=np.float32)
    if pack == "C":
        matrix = np.array([[a[i + j * lda] for j in range(n)] for i in range(m)], dtype=np.float32)
    elif pack == "R":
        matrix = np.array([[a[i * lda + j] for j in range(n)] for i in range(m)], dtype=np.float32)
    else:
        raise ValueError(f"pack must be 'C' or 'R', not {pack!r}")
    op = matrix if trans.upper() == "N" else matrix.T
    x_vector = np.asarray(x, dtype=np.float32)[:: int(incx)][: op.shape[1]]
    result = np.array(y, dtype=np.float32, copy=True)
    current = result[:: int(incy)][: op.shape[0]]
    updated = np.float32(alpha) * (op @ x_vector) + np.float32(beta) * current
    result[:: int(incy)][: op.shape[0]] = updated.astype(np.float32)
    return result


def blas_gemm(transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, pack="C"):
    """C := alpha·op(A)·op(B) + beta·C with op(A) m×k, op(B) k×n, C m×n; 'R' row-major, 'C' column-major."""

    def matrix(values, rows, cols, ld, transposed):
        stored = (cols, rows) if transposed else (rows, cols)  # the matrix as stored, before op()
        values = np.asarray(values, dtype=np.float32)
        if pack == "R":
            full = np.array([[values[i * ld + j] for j in range(stored[1])] for i in range(stored[0])])
        else:
            full = np.array([[values[i + j * ld] for j in range(stored[1])] for i in range(stored[0])])
        return full.T if transposed else full

    op_a = matrix(a, m, k, lda, transa.upper() != "N")
    op_b = matrix(b, k, n, ldb, transb.upper() != "N")
    current = matrix(c, m, n, ldc, False)
    result = (np.float32(alpha) * (op_a @ op_b) + np.float32(beta) * current).astype(np.float32)
    out = np.array(c, dtype=np.float32, copy=True)
    for i in range(m):
        for j in range(n):
            out[i * ldc + j if pack == "R" else i + j * ldc] = result[i, j]
    return out


def activate(kind: str, v: np.ndarray) -> np.ndarray:
    z = v.astype(np.float64)
    if kind == "relu":
        return np.where(v < 0, np.float32(0), v).astype(np.float32)
    if kind == "sigmoid":
        return (1 / (1 + np.exp(-np.clip(z, -700, 700)))).astype(np.float32)
    if kind == "tanh":
        return np.tanh(z).astype(np.float32)
    if kind == "softmax":
        e = np.exp(np.maximum(z - z.max(), -700))
        return (e / e.sum()).astype(np.float32)
    raise ValueError(f"unknown activation procedure activate_{kind}")


class OracleError(Exception):
    """What Oracle would raise (ORA-01426 numeric overflow, ORA-01428 argument out of range)."""


NUMBER_MAX = 1e126  # Oracle NUMBER's largest magnitude


class Number(float):
    """An Oracle NUMBER: arithmetic among NUMBERs raises ORA-01426 past NUMBER_MAX; with a BINARY_DOUBLE
    (a numpy value) the result is a BINARY_DOUBLE (Oracle's numeric precedence)."""

    @staticmethod
    def checked(value: float) -> Number:
        if not abs(value) < NUMBER_MAX:
            raise OracleError(f"ORA-01426: numeric overflow ({value:g})")
        return Number(value)

    def _apply(self, other: Any, operation) -> Any:
        if isinstance(other, Number) or type(other) in (int, float):
            return Number.checked(operation(float(self), float(other)))
        return operation(np.float64(self), other)

    def __add__(self, other):
        return self._apply(other, lambda a, b: a + b)

    def __radd__(self, other):
        return self._apply(other, lambda a, b: b + a)

    def __sub__(self, other):
        return self._apply(other, lambda a, b: a - b)

    def __rsub__(self, other):
        return self._apply(other, lambda a, b: b - a)

    def __mul__(self, other):
        return self._apply(other, lambda a, b: a * b)

    def __rmul__(self, other):
        return self._apply(other, lambda a, b: b * a)

    def __truediv__(self, other):
        return self._apply(other, lambda a, b: a / b)

    def __rtruediv__(self, other):
        return self._apply(other, lambda a, b: b / a)

    def __neg__(self):
        return Number(-float(self))


def _exp(a):
    if isinstance(a, Number):
        return Number.checked(math.exp(a)) if a < 300 else Number.checked(math.inf)
    return np.exp(a)


def _ln(a):
    if isinstance(a, Number) and a <= 0:
        raise OracleError("ORA-01428: argument is out of range (LN)")
    return Number(math.log(a)) if isinstance(a, Number) else np.log(a)


def _sqrt(a):
    if isinstance(a, Number) and a < 0:
        raise OracleError("ORA-01428: argument is out of range (SQRT)")
    return Number(math.sqrt(a)) if isinstance(a, Number) else np.sqrt(a)


def _first_type(function):
    """GREATEST/LEAST: the result has the first argument's type."""

    def apply(a, b):
        result = function(np.float64(a), np.float64(b))
        if not isinstance(a, Number):
            return result
        if np.ndim(result) == 0:
            return Number.checked(float(result))
        if not (np.abs(result) < NUMBER_MAX).all():  # a vector converted to NUMBER
            raise OracleError("ORA-01426: numeric overflow")
        return result

    return apply


ORACLE_FUNCTIONS = {
    "EXP": _exp,
    "LN": _ln,
    "SQRT": _sqrt,
    "TANH": np.tanh,
    "ABS": np.abs,
    "GREATEST": _first_type(np.maximum),
    "LEAST": _first_type(np.minimum),
    "_case": lambda condition, then, otherwise: np.where(np.float64(condition) > 0, then, otherwise),
    "BINARY_DOUBLE_NAN": np.float64(np.nan),
}
LITERAL = re.compile(r"(?<![\w.])(\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)(d?)(?![\w.])")


CASE_WORDS = (("CASE WHEN ", "_case("), (" > 0 THEN ", ", "), (" ELSE ", ", "), (" END", ")"))


class OracleExpression:
    """A PL/SQL expression of the activation procedures over z (BINARY_DOUBLE), evaluated over a vector
    with Oracle's types: `1.5d` is a BINARY_DOUBLE, `700` a NUMBER."""

    def __init__(self, text: str) -> None:
        python = text
        for plsql, replacement in CASE_WORDS:  # first: CASE's "> 0" is no NUMBER
            python = python.replace(plsql, replacement)
        python = LITERAL.sub(lambda m: f"np.float64({m[1]})" if m[2] else f"Number({m[1]})", python)
        self.text, self.code = text, compile(python, "<plsql>", "eval")

    def number(self, z: float) -> float:
        """The expression with z declared NUMBER instead (what the package must never do)."""
        return float(eval(self.code, {"np": np, "Number": Number, **ORACLE_FUNCTIONS}, {"z": Number(z)}))

    def __call__(self, z: np.ndarray) -> np.ndarray:
        with np.errstate(all="ignore"):  # BINARY_DOUBLE: IEEE infinities and zeros, no error
            value = eval(self.code, {"np": np, "Number": Number, **ORACLE_FUNCTIONS}, {"z": z})
            return np.broadcast_to(np.asarray(value, dtype=np.float64), z.shape).astype(np.float32)


def formulas(package_text: str) -> dict[str, OracleExpression]:
    """activation → the expression of its generated procedure `activate_<activation>`."""
    found = re.findall(
        r"PROCEDURE activate_(\w+)\(v IN OUT NOCOPY UTL_NLA_ARRAY_FLT\) IS\s+z BINARY_DOUBLE;\s+BEGIN\s+"
        r"FOR i IN 1 \.\. v\.COUNT LOOP\s+z := TO_BINARY_DOUBLE\(v\(i\)\);\s+"
        r"v\(i\) := TO_BINARY_FLOAT\((.*)\);\s+END LOOP;",
        package_text,
    )
    return {name: OracleExpression(text) for name, text in found}


def read_tensors(script: str) -> dict[tuple[str, int], np.ndarray]:
    """(tensor, chunk) → values, from 02_tensors_vN.sql: an INSERT of an empty array, then append blocks."""
    tensors: dict[tuple[str, int], list[float]] = {}
    for block in re.split(r"^/\s*$", script, flags=re.MULTILINE):
        insert = re.search(r"VALUES \('(\w+)', (\d+), '([\w.]+)', (\d+),", block)
        if insert and "INSERT INTO nnsql_tensors" in block:
            tensors[(insert[3], int(insert[4]))] = []
        key = KEY.search(block)
        if key and "append(" in block:
            values = tensors[(key[3], int(key[4]))]
            for call in re.findall(r"append\(v, UTL_NLA_ARRAY_FLT\((.*?)\)\);", block):
                values.extend(float(number) for number in FLOAT.findall(call))
    return {key: np.array(values, dtype=np.float32) for key, values in tensors.items()}


def found(pattern: str, text: str) -> str:
    """The first group of the pattern's match in text (the package must contain it)."""
    match = re.search(pattern, text)
    assert match is not None, f"the package has no {pattern!r}"
    return match[1]


def parse_arguments(text: str) -> dict[str, str]:
    return {name: value.strip() for name, value in re.findall(r"(\w+) => ([^,]+)", text)}


def literal_number(text: str) -> float:
    return float(text.rstrip("fF"))


class PlsqlError(Exception):
    """RAISE_APPLICATION_ERROR(code, message) raised by the package."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"ORA{code}: {message}")
        self.code = code
        self.message = message


def binary_float(values: object) -> np.ndarray:
    """A row as Oracle holds it in a UTL_NLA_ARRAY_FLT (NULL elements as NaN here; first_null sees them)."""
    row = [np.nan if value is None else value for value in np.asarray(values, dtype=object).ravel()]
    with np.errstate(over="ignore"):
        return np.asarray(row, dtype=np.float64).astype(np.float32)


# The package's helpers, as their PL/SQL bodies in version_package.sql.j2 define them: the 0-based index
# of the first value found, or None (NULL).
def first_index(hits: np.ndarray) -> int | None:
    found_at = np.flatnonzero(hits)
    return int(found_at[0]) if len(found_at) else None


def first_null(raw: object, _: int) -> int | None:
    return first_index(np.array([value is None for value in np.asarray(raw, dtype=object).ravel()]))


def first_nonfinite(raw: object, _: int) -> int | None:  # p(i) IS NAN OR p(i) IS INFINITE
    return first_index(~np.isfinite(binary_float(raw)))


def first_outside(raw: object, bound: int) -> int | None:  # p(i) < 0 OR p(i) >= bound OR p(i) <> TRUNC(p(i))
    p = binary_float(raw)
    return first_index((p < 0) | (p >= bound) | (p != np.trunc(p)))


HELPERS = {"first_null": first_null, "first_nonfinite": first_nonfinite, "first_outside": first_outside}
CHECK = re.compile(r"IF (.+?) THEN (.+?) END IF;")
RAISE = re.compile(r"RAISE_APPLICATION_ERROR\((-\d+), '((?:[^']|'')*)'(?: \|\| (.+))?\);")


def evaluate(expression: str, row: dict[str, object]) -> object:
    """An expression of a check: `x.COUNT`, a helper call, or a literal integer."""
    if match := re.fullmatch(r"(\w+)\.COUNT", expression):
        return len(np.asarray(row[match[1]], dtype=object).ravel())
    if match := re.fullmatch(r"(\w+)\((\w+)(?:, (\d+))?\)", expression):
        return HELPERS[match[1]](row[match[2]], int(match[3] or 0))
    return int(expression)


def holds(condition: str, row: dict[str, object]) -> bool:
    if match := re.fullmatch(r"(\w+) IS NULL", condition):
        return row[match[1]] is None
    if match := re.fullmatch(r"(.+) IS NOT NULL", condition):
        return evaluate(match[1], row) is not None
    if match := re.fullmatch(r"(.+) <> (.+)", condition):
        return evaluate(match[1], row) != evaluate(match[2], row)
    raise AssertionError(f"check condition the reference does not know: {condition}")


class PackageInterpreter:
    """Runs `predict` (and, with `answer`, the functions users query) of a generated version package on one
    row at a time."""

    def __init__(self, package_text: str, tensors: dict[tuple[str, int], np.ndarray]) -> None:
        loads = re.findall(r"load_tensor\('([\w.]+)', (\d+), (\w+)\);", package_text)
        self.globals = {variable: tensors[(tensor, int(chunk))] for tensor, chunk, variable in loads}
        predict = package_text.split("FUNCTION predict(", 2)[2]  # the body, after the declaration
        self.checks = CHECK.findall(predict.split("BEGIN", 1)[1].split("ensure_loaded;", 1)[0])
        body = package_text.split("-- begin network", 1)[1].split("-- end network", 1)[0]
        self.statements = [line.strip() for line in body.strip().splitlines() if line.strip()]
        self.output = found(r"-- end network\s+RETURN (\w+);", package_text)
        signature = found(r"FUNCTION predict\((.*?)\) RETURN", package_text)
        self.text = package_text.split("PACKAGE BODY", 1)[1]
        self.parameters = re.findall(r"(\w+) IN UTL_NLA_ARRAY_FLT", signature)
        self.gemv_calls: list[dict[str, str]] = []
        self.steps_run = self.steps_skipped = 0  # loop bodies run to the end, and ended by a mask
        self.gemm_calls: list[dict[str, str]] = []
        self.formulas = formulas(package_text)

    def run(self, inputs: dict[str, object]) -> np.ndarray | None:
        """predict of one row: its checks (None for RETURN NULL, PlsqlError for an error), then
        the network."""
        for condition, outcome in self.checks:
            if not holds(condition, inputs):
                continue
            if outcome == "RETURN NULL;":
                return None
            error = RAISE.fullmatch(outcome)
            assert error is not None, f"check outcome the reference does not know: {outcome}"
            argument = "" if error[3] is None else str(evaluate(error[3], inputs))
            raise PlsqlError(int(error[1]), error[2].replace("''", "'") + argument)
        env: dict[str, np.ndarray] = dict(self.globals)
        env.update({name: binary_float(value) for name, value in inputs.items()})
        self.execute(self.statements, env)
        return env[self.output]

    def probabilities(self, p: np.ndarray) -> np.ndarray:
        """first_probabilities(p): its statements between the markers, run like the network's."""
        body = self.text.split("-- begin probabilities", 1)[1].split("-- end probabilities", 1)[0]
        env = {"p": p}
        self.execute([line.strip() for line in body.strip().splitlines() if line.strip()], env)
        return env["q"]

    def function_text(self, function: str) -> str:
        match = re.search(rf"FUNCTION {function}\(.*?END {function};", self.text, re.DOTALL)
        assert match is not None, f"the package body has no function {function}"
        return match[0]

    def decide(self, q: np.ndarray) -> int:
        """decide(q): `CASE WHEN q(2) > t THEN 1 ELSE 0 END`, or the argmax loop (`>`: the first best)."""
        text = self.function_text("decide")
        if threshold := re.search(r"RETURN CASE WHEN q\(2\) (>=?) ([\d.]+) THEN 1 ELSE 0 END;", text):
            above = q[1] >= float(threshold[2]) if threshold[1] == ">=" else q[1] > float(threshold[2])
            return int(above)
        comparison = found(r"IF q\(i\) (>=?) q\(best\) THEN best := i;", text)
        best = 0
        for i in range(1, len(q)):
            if q[i] > q[best] or (comparison == ">=" and q[i] == q[best]):
                best = i
        return best

    def classes(self) -> list[str]:
        listed = found(r"g_classes CONSTANT label_list := label_list\((.*?)\);\n", self.text)
        return [value.replace("''", "'") for value in re.findall(r"'((?:[^']|'')*)'", listed)]

    def answer(self, function: str, inputs: dict[str, object], threshold: float = 0.5) -> object:
        """What `function` of the version package returns for one row; a refusing function raises
        AssertionError with its message."""
        text = self.function_text(function)
        if refused := re.search(r"RAISE_APPLICATION_ERROR\(-20020, '(.*)'\);", text):
            raise AssertionError(refused[1].replace("''", "'"))
        p = self.run(inputs)
        if p is None:  # a NULL input: every function returns NULL
            return None
        if function == "predict_proba":
            return self.probabilities(p) if "first_probabilities(p)" in text else p
        if function == "predict_logits":
            return p
        q = self.probabilities(p)
        if function in ("score", "label"):
            score = self.decide(q)
            return score if function == "score" else self.classes()[score]
        comparison = found(r"IF q\(i\) (>=?) threshold THEN", text)
        chosen = q >= threshold if comparison == ">=" else q > threshold
        return [label for label, keep in zip(self.classes(), chosen, strict=True) if keep]

    def execute(self, statements: list[str], env: dict) -> None:
        """Statements in order; a `FOR nn_t IN [REVERSE] 0 .. n LOOP` block runs its body per step."""
        index = 0
        while index < len(statements):
            loop = re.fullmatch(r"FOR nn_t IN (REVERSE )?0 \.\. (\d+) LOOP", statements[index])
            if loop is None:
                self.step(statements[index], env)
                index += 1
                continue
            end = statements.index("END LOOP;", index)
            last = int(loop[2])
            for t in range(last, -1, -1) if loop[1] else range(last + 1):
                env["nn_t"] = t
                self.loop_body(statements[index + 1 : end], env)
            index = end + 1

    def loop_body(self, body: list[str], env: dict) -> None:
        """One step; `IF mask(nn_t + 1) = 0 THEN [statement] CONTINUE; END IF;` ends it early."""
        for statement in body:
            skip = re.fullmatch(r"IF (\w+)\(nn_t \+ 1\) = 0 THEN (.*?)CONTINUE; END IF;", statement)
            if skip is None:
                self.step(statement, env)
            elif env[skip[1]][env["nn_t"]] == 0:
                if skip[2].strip():
                    self.step(skip[2].strip(), env)
                self.steps_skipped += 1
                return
        self.steps_run += 1

    def step(self, statement: str, env: dict[str, np.ndarray]) -> None:
        if match := re.fullmatch(r"(\w+) := zeros\((\d+)\);", statement):
            env[match[1]] = np.zeros(int(match[2]), dtype=np.float32)
        elif match := re.fullmatch(r"(\w+) := slice\((\w+), (\d+), (\d+)\);", statement):
            start, count = int(match[3]), int(match[4])
            env[match[1]] = env[match[2]][start - 1 : start - 1 + count].copy()
        elif match := re.fullmatch(r"UTL_NLA\.BLAS_GEMV\((.*)\);", statement):
            args = parse_arguments(match[1])
            self.gemv_calls.append(args)
            env[args["y"]] = blas_gemv(
                trans=args["trans"].strip("'"),
                m=int(args["m"]),
                n=int(args["n"]),
                alpha=literal_number(args["alpha"]),
                a=env[args["a"]],
                lda=int(args["lda"]),
                x=env[args["x"]],
                incx=int(args["incx"]),
                beta=literal_number(args["beta"]),
                y=env[args["y"]],
                incy=int(args["incy"]),
                pack=args.get("pack", "'C'").strip("'"),
            )
        elif match := re.fullmatch(r"UTL_NLA\.BLAS_GEMM\((.*)\);", statement):
            args = parse_arguments(match[1])
            self.gemm_calls.append(args)
            env[args["c"]] = blas_gemm(
                transa=args["transa"].strip("'"),
                transb=args["transb"].strip("'"),
                m=int(args["m"]),
                n=int(args["n"]),
                k=int(args["k"]),
                alpha=literal_number(args["alpha"]),
                a=env[args["a"]],
                lda=int(args["lda"]),
                b=env[args["b"]],
                ldb=int(args["ldb"]),
                beta=literal_number(args["beta"]),
                c=env[args["c"]],
                ldc=int(args["ldc"]),
                pack=args.get("pack", "'C'").strip("'"),
            )
        elif match := re.fullmatch(r"(\w+) := gather\((\w+), (\w+)\);", statement):
            source, indices = env[match[2]], env[match[3]].astype(np.int64)
            env[match[1]] = np.where(indices < 0, np.float32(0), source[np.maximum(indices, 0)])
        elif match := re.fullmatch(r"(\w+) := tile\((\w+), (\d+)\);", statement):
            env[match[1]] = np.tile(env[match[2]], int(match[3]))
        elif match := re.fullmatch(r"(\w+) := group_max\((\w+), (\d+)\);", statement):
            env[match[1]] = env[match[2]].reshape(-1, int(match[3])).max(axis=1)
        elif match := re.fullmatch(r"place\((\w+), (\w+), (\d+)\);", statement):
            offset, source = int(match[3]), env[match[2]]
            env[match[1]][offset : offset + len(source)] = source
        elif match := re.fullmatch(r"activate_(\w+)\((\w+)\);", statement):
            formula = self.formulas.get(match[1])
            values = env[match[2]]
            env[match[2]] = formula(values.astype(np.float64)) if formula else activate(match[1], values)
        elif match := re.fullmatch(r"(\w+) := step_of\((\w+), nn_t, (\d+)\);", statement):
            width, t = int(match[3]), env["nn_t"]
            env[match[1]] = env[match[2]][t * width : (t + 1) * width].copy()
        elif match := re.fullmatch(r"(\w+) := elementwise\((\w+), (\w+), '(\w+)'\);", statement):
            operation = ELEMENTWISE_OPS[match[4]]
            env[match[1]] = operation(env[match[2]], env[match[3]]).astype(np.float32)
        elif match := re.fullmatch(r"(\w+) := lookup\((\w+), (\w+), (\d+)\);", statement):
            table = env[match[3]].reshape(-1, int(match[4]))
            env[match[1]] = table[env[match[2]].astype(np.int64)].ravel()
        elif match := re.fullmatch(r"(\w+) := step_mask\((\w+), (\d+)\);", statement):
            steps = env[match[2]].reshape(int(match[3]), -1)
            env[match[1]] = np.any(steps != 0, axis=1).astype(np.float32)
        elif match := re.fullmatch(r"append_first\((\w+), (\w+|zeros\(\d+\)), (\d+)\);", statement):
            count = int(match[3])
            source = np.zeros(count, np.float32) if match[2].startswith("zeros(") else env[match[2]][:count]
            env[match[1]] = np.concatenate([env[match[1]], source]).astype(np.float32)
        elif match := re.fullmatch(r"(\w+) := complement\((\w+)\);", statement):
            p = env[match[2]][0]
            env[match[1]] = np.array([np.float32(1) - p, p], dtype=np.float32)
        elif match := re.fullmatch(r"(\w+) := UTL_NLA_ARRAY_FLT\(\);", statement):
            env[match[1]] = np.zeros(0, np.float32)
        elif match := re.fullmatch(r"(\w+) := (\w+);", statement):
            env[match[1]] = env[match[2]].copy()
        else:
            raise AssertionError(f"statement the reference does not know: {statement}")


def load_scripts(directory: Path, version: int = 1) -> PackageInterpreter:
    tensors = read_tensors((directory / f"02_tensors_v{version}.sql").read_text())
    return PackageInterpreter((directory / f"03_package_v{version}.sql").read_text(), tensors)
