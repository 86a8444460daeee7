"""Elementwise activations written once, as small expressions over x, and rendered for each target.

Each formula uses only primitives every target has (exp, ln, sqrt, tanh, greatest, least, abs, a
conditional on x > 0, arithmetic). The primitives that can fail are made safe here, once, for every
formula (docs/numerics.md states the effect):
- `exp` clamps its own argument to [−CLAMP, CLAMP]: PostgreSQL raises on exp's overflow and underflow
  (where IEEE targets give inf and 0). exp(−700) ≈ 1e-304 stands for 0, so a result moves by < 1e-300.
- `ln` and `sqrt` read at least TINY and 0: PostgreSQL and DuckDB raise on ln(0) and sqrt(x < 0).
- PostgreSQL's formulas read their input guarded (export/postgres/generator.py): |x| < FLUSH counts as 0
  (a product such as gelu's x³ could otherwise round to 0, which PostgreSQL reports as an underflow),
  |x| > BOUND as ±BOUND (x³ could overflow). Both lie far outside float32 Keras's own range.
Targets render an expression with `render(expr, dialect)`; the numpy reference (export/ir/reference.py)
keeps independent definitions to check them against.
"""

from __future__ import annotations

from dataclasses import dataclass

CLAMP = 700.0  # |exp argument|: exp(±700) ≈ 1e±304, inside float64's normal range
TINY = 1e-300  # the least argument ln and 1/sqrt read
FLUSH = 1e-100  # guarded inputs: smaller magnitudes are 0, so x³ stays ≥ 1e-300 or is 0
BOUND = 1e100  # guarded inputs: larger magnitudes are ±BOUND, so x³ stays ≤ 1e300


@dataclass(frozen=True)
class Expr:
    op: str
    args: tuple[Expr | float, ...] = ()

    def __add__(self, other: Expr | float) -> Expr:
        return Expr("+", (self, other))

    def __radd__(self, other: float) -> Expr:
        return Expr("+", (other, self))

    def __sub__(self, other: Expr | float) -> Expr:
        return Expr("-", (self, other))

    def __rsub__(self, other: float) -> Expr:
        return Expr("-", (other, self))

    def __mul__(self, other: Expr | float) -> Expr:
        return Expr("*", (self, other))

    def __rmul__(self, other: float) -> Expr:
        return Expr("*", (other, self))

    def __truediv__(self, other: Expr | float) -> Expr:
        return Expr("/", (self, other))

    def __rtruediv__(self, other: float) -> Expr:
        return Expr("/", (other, self))

    def __neg__(self) -> Expr:
        return Expr("neg", (self,))


X = Expr("x")


def call(name: str, *args: Expr | float) -> Expr:
    return Expr(name, args)


def maximum(a: Expr | float, b: Expr | float) -> Expr:
    return call("greatest", a, b)


def minimum(a: Expr | float, b: Expr | float) -> Expr:
    return call("least", a, b)


def exp(a: Expr | float) -> Expr:
    """e^a with a clamped to [−CLAMP, CLAMP]: never an overflow or underflow on any target."""
    return call("exp", minimum(maximum(a, -CLAMP), CLAMP))


def ln(a: Expr | float) -> Expr:
    """ln(a) for a ≥ TINY; below, ln(TINY) ≈ −690.8 (ln(0) raises in PostgreSQL and DuckDB)."""
    return call("ln", maximum(a, TINY))


def sqrt(a: Expr | float) -> Expr:
    return call("sqrt", maximum(a, 0.0))


def if_positive(condition: Expr, then: Expr | float, otherwise: Expr | float) -> Expr:
    """`then` where condition > 0, else `otherwise` (both are computed by vectorised targets)."""
    return call("if_positive", condition, then, otherwise)


def sigmoid(x: Expr) -> Expr:
    return 1.0 / (1.0 + exp(-x))


def softplus(x: Expr) -> Expr:
    return maximum(x, 0.0) + ln(1.0 + exp(-call("abs", x)))


def hard_sigmoid(x: Expr) -> Expr:  # Keras 3: relu6(x + 3) / 6
    return minimum(maximum(x / 6.0 + 0.5, 0.0), 1.0)


# erfc(z) for z ≥ 0 as t·exp(−z² + P(t)), t = 1 / (1 + z/2): the Chebyshev fit of Numerical Recipes
# (erfcc), fractional error below 1.2e-7 everywhere; P's coefficients from the constant term up.
ERFC_COEFFICIENTS = (
    -1.26551223,
    1.00002368,
    0.37409196,
    0.09678418,
    -0.18628806,
    0.27886807,
    -1.13520398,
    1.48851587,
    -0.82215223,
    0.17087277,
)


def erfc_positive(z: Expr) -> Expr:
    """erfc(z) for z ≥ 0 (written for |u|), its exp() argument never above 0."""
    t = 1.0 / (1.0 + 0.5 * z)
    polynomial: Expr | float = ERFC_COEFFICIENTS[-1]
    for coefficient in reversed(ERFC_COEFFICIENTS[:-1]):
        polynomial = coefficient + t * polynomial
    return t * exp(-(z * z) + polynomial)


def gelu(x: Expr) -> Expr:
    """Keras's exact gelu, x·(1 + erf(x/√2))/2 = x·(1 − erfc(u)/2) for u = x/√2 ≥ 0, x·erfc(|u|)/2
    otherwise; the error of erfc_positive moves it by at most 1.2e-7·|x|."""
    tail = erfc_positive(call("abs", x) * 0.7071067811865476)
    return if_positive(x, x * (1.0 - 0.5 * tail), 0.5 * x * tail)


SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946
FORMULAS: dict[str, Expr] = {
    "elu": if_positive(X, X, exp(X) - 1.0),
    "selu": SELU_SCALE * if_positive(X, X, SELU_ALPHA * (exp(X) - 1.0)),
    "softplus": softplus(X),
    "softsign": X / (1.0 + call("abs", X)),
    "silu": X * sigmoid(X),
    "hard_sigmoid": hard_sigmoid(X),
    "hard_sigmoid_keras2": minimum(maximum(0.2 * X + 0.5, 0.0), 1.0),  # tf.keras: clip(0.2x + 0.5)
    "hard_silu": X * hard_sigmoid(X),
    "exponential": exp(X),
    "relu6": minimum(maximum(X, 0.0), 6.0),
    "leaky_relu": if_positive(X, X, 0.2 * X),
    "mish": X * call("tanh", softplus(X)),
    "gelu": gelu(X),
    # keras.ops.gelu(x, approximate=True): TensorFlow's tanh approximation
    "gelu_tanh": 0.5 * X * (1.0 + call("tanh", 0.7978845608028654 * (X + 0.044715 * X * X * X))),
    # internal: LayerNormalization's 1/sqrt(variance + epsilon) (export/frontend/normalization.py)
    "rsqrt": 1.0 / call("sqrt", maximum(X, TINY)),
    # internal: log_softmax's logarithm of a sum ≥ 1, and ReLU's threshold test x > 0 (1 or 0)
    "ln": ln(X),
    "step": if_positive(X, 1.0, 0.0),
    # internal: masked GlobalAveragePooling1D's 1/count, of a whole count that a product may give as
    # 0 ± rounding (the cube kernel's): NaN for a count of 0, Keras's 0/0
    "count_reciprocal": if_positive(X - 0.5, 1.0 / maximum(X, 0.5), Expr("nan")),
    "log_sigmoid": -softplus(-X),
}


DIALECTS = {
    # function names per dialect; `if_positive` and operators are rendered by `render`
    "sql": {
        "exp": "exp",
        "ln": "ln",
        "tanh": "tanh",
        "greatest": "greatest",
        "least": "least",
        "abs": "abs",
        "sqrt": "sqrt",
    },
    "plsql": {
        "exp": "EXP",
        "ln": "LN",
        "tanh": "TANH",
        "greatest": "GREATEST",
        "least": "LEAST",
        "abs": "ABS",
        "sqrt": "SQRT",
    },
    "numpy": {
        "exp": "np.exp",
        "ln": "np.log",
        "tanh": "np.tanh",
        "greatest": "np.maximum",
        "least": "np.minimum",
        "abs": "np.abs",
        "sqrt": "np.sqrt",
    },
}


NAN = {"sql": "CAST('NaN' AS DOUBLE PRECISION)", "plsql": "BINARY_DOUBLE_NAN", "numpy": "np.nan"}


def number(value: float, dialect: str) -> str:
    text = repr(float(value))
    return f"{text}d" if dialect == "plsql" else text  # BINARY_DOUBLE literals in PL/SQL


def render(expr: Expr | float, dialect: str, x: str) -> str:
    """The expression as text of `dialect` ('sql', 'plsql' or 'numpy'), the input being `x`."""
    if not isinstance(expr, Expr):
        return number(expr, dialect)
    args = [render(arg, dialect, x) for arg in expr.args]
    if expr.op == "x":
        return x
    if expr.op == "nan":
        return NAN[dialect]
    if expr.op in "+-*/":
        return f"({args[0]} {expr.op} {args[1]})"
    if expr.op == "neg":
        return f"(-{args[0]})"
    if expr.op == "if_positive":
        if dialect == "numpy":
            return f"np.where({args[0]} > 0, {args[1]}, {args[2]})"
        return f"(CASE WHEN {args[0]} > 0 THEN {args[1]} ELSE {args[2]} END)"
    return f"{DIALECTS[dialect][expr.op]}({', '.join(args)})"


def formula(activation: str, dialect: str, x: str) -> str:
    return render(FORMULAS[activation], dialect, x)
