"""The SQL functions the generated PL/SQL calls, with Oracle's typing: a BINARY_DOUBLE (or BINARY_FLOAT)
argument gives an IEEE result of that type (EXP(1000d) is infinity), a NUMBER argument a NUMBER that
raises ORA-01426 past 1e126 and ORA-01428 outside a function's domain."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

import numpy as np

from tests.export.plsql.values import (
    DECIMAL,
    F32,
    F64,
    PlsqlError,
    checked,
    compare,
    ora,
    precedence,
    to_char,
)


def numeric(function: Callable, ieee: Callable, domain: Callable[[float], bool] = lambda x: True) -> Callable:
    def apply(x: Any) -> Any:
        if x is None:
            return None
        kind = type(x)
        if kind in (F32, F64):
            return kind(ieee(x))
        if not domain(x):
            raise ora(-1428, f"argument '{to_char(x)}' is out of range")
        try:
            return checked(function(x))
        except OverflowError:
            raise ora(-1426, "numeric overflow") from None

    return apply


def extreme(pick: int) -> Callable:
    """GREATEST (pick 1) or LEAST (-1): numeric arguments converted to the highest precedence among them."""

    def apply(*args: Any) -> Any:
        if any(arg is None for arg in args):
            return None
        kinds = {type(arg) for arg in args}
        kind = F64 if F64 in kinds else F32 if F32 in kinds else None
        if kind is not None and not isinstance(args[0], str):
            args = tuple(kind(arg) for arg in args)
        best = args[0]
        for arg in args[1:]:
            if compare(arg, best) == pick:
                best = arg
        return best

    return apply


def trunc(x: Any, places: Any = 0) -> Any:
    if x is None:
        return None
    if type(x) in (F32, F64):
        return type(x)(np.trunc(x)) if not places else type(x)(math.trunc(float(x) * 10**places) / 10**places)
    return math.trunc(x) if not places else math.trunc(x * 10**places) / 10**places


def power(x: Any, y: Any) -> Any:
    if x is None or y is None:
        return None
    kind = precedence(x, y)
    if kind is not None:
        return kind(np.power(kind(x), kind(y)))
    try:
        return checked(x**y)
    except OverflowError:
        raise ora(-1426, "numeric overflow") from None


def raise_application_error(code: Any, message: Any, keep: Any = False) -> None:
    code = int(code)
    if not -20999 <= code <= -20000:
        raise ora(-21000, f"error number argument to raise_application_error of {code} is out of range")
    raise PlsqlError(code, to_char(message) or "")


NLS_NUMERIC = re.compile(r"\s*NLS_NUMERIC_CHARACTERS\s*=\s*'(.)(.)'\s*$", re.I)


def to_char_call(value: Any, model: str | None = None, nls: str | None = None) -> str | None:
    """TO_CHAR(n), or TO_CHAR(n, 'TME', nlsparam): scientific notation with the fewest digits that give the
    value back, its decimal character from the nlsparam (else the session's). The generated scripts use no
    other format model; another raises ORA-01481 here rather than guessing."""
    if model is None or value is None:
        return to_char(value)
    if model.upper() != "TME":
        raise ora(-1481, "invalid number format model")
    decimal = DECIMAL.get()
    if nls is not None:
        found = NLS_NUMERIC.match(nls)
        if found is None:
            raise ora(-12702, "invalid NLS parameter string used in SQL function")
        decimal = found[1]
    number = float(value)
    text = next(
        (f"{number:.{digits}E}" for digits in range(17) if float(f"{number:.{digits}E}") == number),
        f"{number:.17E}",
    )
    mantissa, exponent = text.split("E")
    return f"{mantissa}E{int(exponent):+03d}".replace(".", decimal)


def substr(text: Any, position: Any, length: Any = None) -> str | None:
    """SUBSTR with a positive 1-based position (the generated PL/SQL uses no other); '' is NULL."""
    if text is None or position is None:
        return None
    start = max(int(position), 1) - 1
    part = str(to_char(text))[start:] if length is None else str(to_char(text))[start : start + int(length)]
    return part or None


def nvl(a: Any, b: Any) -> Any:
    return b if a is None else a


def to_binary(kind: type) -> Callable:
    def convert(x: Any) -> Any:
        if x is None:
            return None
        return kind(float(x) if isinstance(x, str) else x)

    return convert


FUNCTIONS: dict[str, Callable] = {
    "EXP": numeric(math.exp, np.exp),
    "LN": numeric(math.log, np.log, lambda x: x > 0),
    "SQRT": numeric(math.sqrt, np.sqrt, lambda x: x >= 0),
    "TANH": numeric(math.tanh, np.tanh),
    "ABS": numeric(abs, np.abs),
    "SIGN": numeric(lambda x: (x > 0) - (x < 0), np.sign),
    "FLOOR": numeric(math.floor, np.floor),
    "CEIL": numeric(math.ceil, np.ceil),
    "GREATEST": extreme(1),
    "LEAST": extreme(-1),
    "TRUNC": trunc,
    "POWER": power,
    "NVL": nvl,
    "TO_BINARY_DOUBLE": to_binary(F64),
    "TO_BINARY_FLOAT": to_binary(F32),
    "TO_CHAR": to_char_call,
    "SUBSTR": substr,
    "TO_CLOB": lambda s: None if s is None else str(to_char(s)),
    "REPLACE": lambda s, old, new=None: (
        None if s is None else (s.replace(old, new or "") if old else s) or None
    ),
    "LENGTH": lambda s: None if s is None or to_char(s) == "" else len(str(to_char(s))),
    "UPPER": lambda s: None if s is None else str(to_char(s)).upper(),
    "LOWER": lambda s: None if s is None else str(to_char(s)).lower(),
    "RAISE_APPLICATION_ERROR": raise_application_error,
}
CONSTANTS: dict[str, Any] = {
    "BINARY_DOUBLE_NAN": F64(np.nan),
    "BINARY_DOUBLE_INFINITY": F64(np.inf),
    "BINARY_FLOAT_NAN": F32(np.nan),
    "BINARY_FLOAT_INFINITY": F32(np.inf),
}
# Predefined exceptions: name → SQLCODE.
EXCEPTIONS = {
    "NO_DATA_FOUND": 100,
    "TOO_MANY_ROWS": -1422,
    "ZERO_DIVIDE": -1476,
    "VALUE_ERROR": -6502,
    "COLLECTION_IS_NULL": -6531,
    "SUBSCRIPT_OUTSIDE_LIMIT": -6532,
    "SUBSCRIPT_BEYOND_COUNT": -6533,
}
