"""Oracle's values in Python: NUMBER as int/float (ORA-01426 past 1e126), BINARY_DOUBLE as numpy.float64,
BINARY_FLOAT as numpy.float32 (every operation rounded to float32), NULL as None, BOOLEAN as bool, and
collections (VARRAY and nested tables) indexed from 1.

Arithmetic takes the operands' highest numeric precedence (BINARY_DOUBLE, then BINARY_FLOAT, then NUMBER),
as Oracle's implicit conversions do. Comparisons of binary floating-point values follow Oracle, not IEEE:
NaN equals NaN and is greater than every other value.
"""

from __future__ import annotations

import contextvars
import math
from typing import Any

import numpy as np

F32, F64 = np.float32, np.float64
NUMBER_MAX = 1e126  # Oracle NUMBER's largest magnitude (just below 1.0E126)


class PlsqlError(Exception):
    """An Oracle error: RAISE_APPLICATION_ERROR(code, message) or one Oracle raises (ORA-06533...)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"ORA{code:06d}: {message}" if code < 0 else f"ORA-{code:05d}: {message}")
        self.code = code
        self.message = message


def ora(code: int, message: str) -> PlsqlError:
    return PlsqlError(code, message)


def checked(value: float | int) -> float | int:
    """A NUMBER result: ORA-01426 past NUMBER's range."""
    if isinstance(value, int):
        if abs(value) >= NUMBER_MAX:
            raise ora(-1426, "numeric overflow")
        return value
    if not abs(value) < NUMBER_MAX:
        raise ora(-1426, "numeric overflow")
    return value


def precedence(a: Any, b: Any) -> type | None:
    ta, tb = type(a), type(b)
    if ta is F64 or tb is F64:
        return F64
    if ta is F32 or tb is F32:
        return F32
    return None


def add(a: Any, b: Any) -> Any:
    if a is None or b is None:
        return None
    kind = precedence(a, b)
    if kind is not None:
        return kind(a) + kind(b)
    return checked(a + b)


def subtract(a: Any, b: Any) -> Any:
    if a is None or b is None:
        return None
    kind = precedence(a, b)
    if kind is not None:
        return kind(a) - kind(b)
    return checked(a - b)


def multiply(a: Any, b: Any) -> Any:
    if a is None or b is None:
        return None
    kind = precedence(a, b)
    if kind is not None:
        return kind(a) * kind(b)
    return checked(a * b)


def divide(a: Any, b: Any) -> Any:
    if a is None or b is None:
        return None
    kind = precedence(a, b)
    if kind is not None:
        return kind(a) / kind(b)  # IEEE: x/0 is infinite, 0/0 NaN
    if b == 0:
        raise ora(-1476, "divisor is equal to zero")
    quotient = a / b
    return checked(int(quotient) if isinstance(a, int) and isinstance(b, int) and a % b == 0 else quotient)


def negate(a: Any) -> Any:
    return None if a is None else -a


# The session's decimal character (the first of NLS_NUMERIC_CHARACTERS), which implicit conversions and
# TO_CHAR without an nlsparam use: a session in a German locale writes 1,5E-006.
DECIMAL = contextvars.ContextVar("decimal", default=".")


def to_char(value: Any) -> str | None:
    """TO_CHAR of a value, as string concatenation converts it, with the session's decimal character."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    return implicit_text(value).replace(".", DECIMAL.get())


def implicit_text(value: Any) -> str:
    """A number as Oracle converts it to text, with '.' for its decimal character."""
    if isinstance(value, bool):
        raise ora(-6550, "a BOOLEAN cannot be concatenated")
    if type(value) in (F32, F64):
        if np.isnan(value):
            return "Nan"
        if np.isinf(value):
            return "Inf" if value > 0 else "-Inf"
        mantissa, exponent = f"{float(value):.{8 if type(value) is F32 else 16}E}".split("E")
        return f"{mantissa.rstrip('0').rstrip('.')}E{int(exponent):+04d}"
    if isinstance(value, int) or float(value).is_integer():
        return str(int(value))
    text = repr(float(value))
    return text.replace("0.", ".", 1) if text.startswith(("0.", "-0.")) else text


def concat(a: Any, b: Any) -> str | None:
    left, right = to_char(a), to_char(b)
    if left is None and right is None:
        return None
    return (left or "") + (right or "")


def is_nan(value: Any) -> bool:
    return type(value) in (F32, F64) and bool(np.isnan(value))


def compare(a: Any, b: Any) -> int | None:
    """-1, 0 or 1 with Oracle's order (NaN the greatest, equal to itself); None when either is NULL."""
    if a is None or b is None:
        return None
    if isinstance(a, str) or isinstance(b, str):
        if not (isinstance(a, str) and isinstance(b, str)):
            a, b = to_char(a), to_char(b)
        return (a > b) - (a < b)
    kind = precedence(a, b)
    if kind is not None:
        a, b = kind(a), kind(b)
        nan_a, nan_b = bool(np.isnan(a)), bool(np.isnan(b))
        if nan_a or nan_b:
            return nan_a - nan_b
    return bool(a > b) - bool(a < b)


def compare_op(op: str, a: Any, b: Any) -> bool | None:
    if op in ("=", "<>") and (isinstance(a, Collection) or isinstance(b, Collection)):
        equal = Collection.equal(a, b)
        return equal if op == "=" or equal is None else not equal
    order = compare(a, b)
    if order is None:
        return None
    return {
        "=": order == 0,
        "<>": order != 0,
        "<": order < 0,
        ">": order > 0,
        "<=": order <= 0,
        ">=": order >= 0,
    }[op]


def logical_and(a: bool | None, b: bool | None) -> bool | None:
    if a is False or b is False:
        return False
    return None if a is None or b is None else True


def logical_or(a: bool | None, b: bool | None) -> bool | None:
    if a is True or b is True:
        return True
    return None if a is None or b is None else False


def logical_not(a: bool | None) -> bool | None:
    return None if a is None else not a


def subscript(value: Any) -> int:
    """A subscript as PL/SQL converts it to PLS_INTEGER: rounded to the nearest whole number."""
    if value is None:
        raise ora(-6502, "PL/SQL: numeric or value error: NULL index")
    if isinstance(value, int):
        return value
    number = float(value)
    if not math.isfinite(number):
        raise ora(-6502, "PL/SQL: numeric or value error")
    return math.floor(abs(number) + 0.5) * (1 if number >= 0 else -1)


class Collection:
    """A VARRAY (with its limit) or a nested table of one element type, subscripts from 1."""

    __slots__ = ("_array", "items", "type")

    def __init__(self, type_: Any, items: list | None = None) -> None:
        self.type = type_  # a CollectionType
        self.items = items if items is not None else []
        self._array: np.ndarray | None = None

    def copy(self) -> Collection:
        twin = Collection(self.type, list(self.items))
        twin._array = self._array
        return twin

    def index(self, value: Any) -> int:
        position = subscript(value)
        if position < 1 or (self.type.limit is not None and position > self.type.limit):
            raise ora(-6532, "Subscript outside of limit")
        if position > len(self.items):
            raise ora(-6533, "Subscript beyond count")
        return position - 1

    def get(self, value: Any) -> Any:
        items = self.items
        if type(value) is int and 0 < value <= len(items):  # the common case, checked as index() does
            return items[value - 1]
        return items[self.index(value)]

    def set(self, value: Any, element: Any) -> None:
        items = self.items
        position = value - 1 if type(value) is int and 0 < value <= len(items) else self.index(value)
        items[position] = self.type.element.convert(element)
        self._array = None

    def extend(self, count: int = 1) -> None:
        if self.type.limit is not None and len(self.items) + count > self.type.limit:
            raise ora(-6532, "Subscript outside of limit")
        self.items.extend([None] * count)
        self._array = None

    def trim(self, count: int = 1) -> None:
        if count > len(self.items):
            raise ora(-6533, "Subscript beyond count")
        del self.items[len(self.items) - count :]
        self._array = None

    def array(self, dtype: type) -> np.ndarray:
        """The elements as a numpy array (for UTL_NLA); a NULL element is an error there."""
        if self._array is None or self._array.dtype != dtype:
            if any(item is None for item in self.items):
                raise ora(-6502, "PL/SQL: numeric or value error: NULL element in a UTL_NLA array")
            with np.errstate(all="ignore"):
                self._array = np.array(self.items, dtype=dtype)
        return self._array

    def assign_array(self, values: np.ndarray) -> None:
        kind = F32 if self.type.element.name == "BINARY_FLOAT" else F64
        array = values.astype(kind)
        self.items = list(array)
        self._array = array

    @staticmethod
    def equal(a: Any, b: Any) -> bool | None:
        """Nested tables compare as multisets (order does not matter); a VARRAY cannot be compared."""
        if a is None or b is None:
            return None
        if a.type.limit is not None or b.type.limit is not None:
            raise ora(-6550, "PLS-00306: a VARRAY cannot be compared with =")
        if len(a.items) != len(b.items):
            return False
        if any(item is None for item in a.items + b.items):
            return None
        return sorted(map(str, a.items)) == sorted(map(str, b.items))
