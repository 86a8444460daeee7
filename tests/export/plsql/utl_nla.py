"""UTL_NLA's BLAS_GEMV and BLAS_GEMM on BINARY_FLOAT arrays, as Oracle documents them (the reference BLAS
semantics plus a `pack` argument):

    BLAS_GEMV: y := alpha·op(A)·x + beta·y, A an m×n matrix, op(A) = A for trans 'N', Aᵀ for 'T' or 'C';
    BLAS_GEMM: C := alpha·op(A)·op(B) + beta·C, op(A) m×k, op(B) k×n, C m×n.

A matrix is stored in its array with leading dimension ld: pack 'C' (the default) column-major,
element (i, j) at a[i + j·ld] with ld ≥ rows; pack 'R' row-major, at a[i·ld + j] with ld ≥ columns.
x is read with stride incx, y written with stride incy (both positive here). An argument out of those
bounds, or an array too short for what the arguments say, is an error, as the reference BLAS's XERBLA
and a VARRAY subscript beyond its count are in Oracle.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tests.export.plsql.values import Collection, ora, subscript

F32 = np.float32


def stored(values: np.ndarray, rows: int, columns: int, ld: int, pack: str) -> np.ndarray:
    """The rows×columns matrix an array holds with leading dimension ld."""
    pack = pack.upper()
    if pack not in ("C", "R"):
        raise ora(-20000, f"UTL_NLA: pack must be 'C' or 'R', not {pack!r}")
    lead = rows if pack == "C" else columns
    if ld < max(1, lead):
        raise ora(-20000, f"UTL_NLA: illegal leading dimension {ld} (at least {max(1, lead)})")
    if rows == 0 or columns == 0:
        return np.zeros((rows, columns), F32)
    outer = columns if pack == "C" else rows
    needed = (outer - 1) * ld + lead
    if len(values) < needed:
        raise ora(
            -6533, f"Subscript beyond count: the matrix needs {needed} values, the array has {len(values)}"
        )
    block = np.lib.stride_tricks.as_strided(
        values, shape=(outer, lead), strides=(ld * values.itemsize, values.itemsize)
    )
    return block.T if pack == "C" else block


def strided(values: np.ndarray, count: int, increment: int, name: str) -> np.ndarray:
    if increment < 1:
        raise ora(-20000, f"UTL_NLA: inc{name} must be positive here, got {increment}")
    needed = 1 + (count - 1) * increment if count else 0
    if len(values) < needed:
        raise ora(-6533, f"Subscript beyond count: {name} needs {needed} values, has {len(values)}")
    return values[:needed:increment]


def transposed(flag: str) -> bool:
    flag = flag.upper()
    if flag not in ("N", "T", "C"):
        raise ora(-20000, f"UTL_NLA: trans must be 'N', 'T' or 'C', not {flag!r}")
    return flag != "N"


def gemv(trans, m, n, alpha, a, lda, x, incx, beta, y, incy, pack="C") -> np.ndarray:
    """The new y (a float32 array of y's length)."""
    if m < 0 or n < 0:
        raise ora(-20000, "UTL_NLA: m and n must be at least 0")
    matrix = stored(np.asarray(a, F32), m, n, lda, pack)
    op = matrix.T if transposed(trans) else matrix
    rows, columns = op.shape
    vector = strided(np.asarray(x, F32), columns, incx, "x")
    result = np.array(y, dtype=F32, copy=True)
    current = strided(result, rows, incy, "y")
    product = (op @ vector).astype(F32)
    updated = F32(alpha) * product + F32(beta) * current
    result[: len(current) * incy : incy] = updated
    return result


def gemm(transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, pack="C") -> np.ndarray:
    """The new C (a float32 array of c's length)."""
    if min(m, n, k) < 0:
        raise ora(-20000, "UTL_NLA: m, n and k must be at least 0")
    a_t, b_t = transposed(transa), transposed(transb)
    op_a = stored(np.asarray(a, F32), *((k, m) if a_t else (m, k)), lda, pack)
    op_b = stored(np.asarray(b, F32), *((n, k) if b_t else (k, n)), ldb, pack)
    op_a, op_b = (op_a.T if a_t else op_a), (op_b.T if b_t else op_b)
    result = np.array(c, dtype=F32, copy=True)
    current = stored(result, m, n, ldc, pack)
    updated = F32(alpha) * (op_a @ op_b).astype(F32) + F32(beta) * current
    target = np.lib.stride_tricks.as_strided(result, shape=current.shape, strides=current.strides)
    target[...] = updated
    return result


SIGNATURES = {
    "BLAS_GEMV": ("TRANS", "M", "N", "ALPHA", "A", "LDA", "X", "INCX", "BETA", "Y", "INCY", "PACK"),
    "BLAS_GEMM": (
        "TRANSA",
        "TRANSB",
        "M",
        "N",
        "K",
        "ALPHA",
        "A",
        "LDA",
        "B",
        "LDB",
        "BETA",
        "C",
        "LDC",
        "PACK",
    ),
}
ROUTINES: dict[str, tuple[Callable[..., np.ndarray], str]] = {
    "BLAS_GEMV": (gemv, "Y"),
    "BLAS_GEMM": (gemm, "C"),
}


def utl_nla_call(compiler: Any, name: str, args: list) -> Callable[[], None]:
    """The call `UTL_NLA.<name>(...)` with positional or named arguments; the output array (y or c, IN
    OUT) is updated in place. Each call's scalar arguments are recorded in the session's blas_calls."""
    if name not in SIGNATURES:
        raise ora(
            -6550, f"PLS-00302: component '{name}' must be declared (UTL_NLA subset: {sorted(SIGNATURES)})"
        )
    names = SIGNATURES[name]
    thunks = {}
    for position, (keyword, arg) in enumerate(args):
        key = keyword or (names[position] if position < len(names) else "?")
        if key not in names or key in thunks:
            raise ora(-6550, f"PLS-00306: wrong number or types of arguments in call to '{name}'")
        thunks[key] = compiler.expression(arg)
    if missing := set(names) - set(thunks) - {"PACK"}:
        raise ora(-6550, f"PLS-00306: missing arguments {sorted(missing)} in call to '{name}'")
    function, output = ROUTINES[name]
    calls = compiler.session.blas_calls

    def run() -> None:
        given = {key: thunk() for key, thunk in thunks.items()}
        arguments: dict[str, Any] = {}
        for key, value in given.items():
            if isinstance(value, Collection):
                arguments[key.lower()] = value.array(F32)
            elif value is None:
                raise ora(-6502, f"PL/SQL: numeric or value error: {key} is NULL")
            elif isinstance(value, str):
                arguments[key.lower()] = value
            elif key in ("ALPHA", "BETA"):
                arguments[key.lower()] = F32(value)
            else:
                arguments[key.lower()] = subscript(value)
        calls.append((name, {k: a for k, a in arguments.items() if not isinstance(a, np.ndarray)}))
        given[output].assign_array(function(**arguments))

    return run
