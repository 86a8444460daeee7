"""How a PostgreSQL export computes its Dense products, and which way the connected role may use.

Three kernels compute the same scores (the parity gate checks each):
- `plpython`: numpy inside the server. Fastest; plpython3u is an untrusted language, so a superuser must
  create it, and the server's Python needs numpy.
- `cube`: the trusted contrib extension `cube` (PostgreSQL 13+: any role with CREATE on the database may
  create it; managed services allow it). Its C function `cube_distance` gives dot products (below).
- `plpgsql`: plain PL/pgSQL loops. Needs nothing.

`--kernel auto` takes the first of KERNELS the role can use, probed in a savepoint that is rolled back.

The cube kernel's algebra. cube points hold at most 100 coordinates, so a Dense input of n values is cut
into chunks of k ≤ 100. The stored points are v = w − M (each unit's kernel column, shifted by a power of
two M ≥ max(w) + 1), because `cube_distance` branches on the sign of each x_i − v_i: with x_i > −1 the
sign never changes and the branch is predicted (3.8× faster, measured), and with v named first it takes
the branch cube tests first. For every chunk, exactly:

    x·w = x·v + M·Σx = (|x + M|² − k·M² + |v|² − |x − v|²) / 2

|x + M|² and |x − v|² are cube distances squared; the points v and |v|² are literals of the generated
code. Any input gives the exact identity; inputs below −1 only run slower. The rounding grows with
|x|², which matters once it outgrows the 3·n·M² the shift already brings: when a chunk's norm exceeds
R = M·2^⌈log₂ √(3n)⌉, x is first divided by the power of two s at or above largest norm / R (exact) and
the product multiplied back: x·w = s·((x/s)·w); it then grows with s. Rows of values within ±1 (images)
keep s = 1 and skip the division.
Rounding: with u = 2⁻⁵³, each squared distance of k terms is within (k + 3)·u of itself relatively;
a unit's K chunk distances d_c are summed as the squared distance of the point (d_1, …, d_K) from the
origin (a square root, K terms, a square root and a power: (K + 4)·u more), so the error of one product
is at most

    (k + K + 9) · u · (|x/s|² + |w|² + 3·n·M²) · 2 · s

summed over the chunks (`dot_error_bound`, tested against float64 numpy on inputs of ±1e3). A weight
below 2⁻²⁹·M loses at most u·M in w − M, which that bound covers. For the MNIST MLP (M = 2, R = 128)
and rows within [0, 1] it is ~2e-10 (s = 1); for ±1e2, ±1e3 and ±1e4 inputs over 784 values 1e-8, 1e-7
and 1e-6, on products of mean size 5e1, 5e2 and 5e3: ~3e-10 relative, at most.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # the [postgres] extra: `nnsql export onnx` imports this module without it
    import psycopg

KERNELS = ("plpython", "cube", "plpgsql")  # fastest first: the order `auto` tries them in
CHOICES = ("auto", *KERNELS)
CUBE_MAX_DIM = 100  # cube's compile-time limit on coordinates per point
UNIT_ROUNDOFF = 2.0**-53

# What a kernel needs in the database, run in a savepoint that is always rolled back.
PROBES: dict[str, tuple[str, ...]] = {
    "plpython": ("CREATE EXTENSION IF NOT EXISTS plpython3u", "DO $$import numpy$$ LANGUAGE plpython3u"),
    "cube": ("CREATE SCHEMA IF NOT EXISTS nnsql", "CREATE EXTENSION IF NOT EXISTS cube SCHEMA nnsql"),
    "plpgsql": (),
}
MISSING = {
    "plpython": "plpython3u with numpy needs a superuser (CREATE EXTENSION plpython3u) and numpy in the "
    "server's Python",
    "cube": "the trusted extension cube is missing and this role may not create it: a DBA runs "
    "`CREATE EXTENSION cube` (see --grant-script), or grants CREATE on the database",
    "plpgsql": "",
}


# A probe that gave up waiting for a lock (lock_timeout, export/postgres/store.py): the extension is being
# created or changed in another session's open transaction, which is not what MISSING says.
LOCKED = (
    "another session holds a lock on what it needs (its extension being created or changed in a "
    "transaction it keeps open; lock_timeout): find it in pg_stat_activity (pg_blocking_pids) and try again"
)


class _Rollback(Exception):
    """Raised inside a probe's savepoint to undo what the probe created."""


def unusable_reason(con: psycopg.Connection, kernel: str) -> str | None:
    """None when the connected role can score with `kernel`, else the first line of the server's error."""
    import psycopg

    try:
        with con.transaction():
            for statement in PROBES[kernel]:
                con.execute(statement)
            raise _Rollback
    except _Rollback:
        return None
    except psycopg.errors.LockNotAvailable:
        return LOCKED
    except psycopg.Error as error:
        return str(error).splitlines()[0] if str(error) else type(error).__name__


def choose(con: psycopg.Connection, requested: str) -> str:
    """The kernel to install: `requested` if usable, or for `auto` the fastest usable one."""
    from ..errors import ExportError

    if requested != "auto":
        reason = unusable_reason(con, requested)
        if reason == LOCKED:
            raise ExportError(f"--kernel {requested} cannot run now: {LOCKED}")
        if reason is not None:
            raise ExportError(f"--kernel {requested} cannot run here ({reason}): {MISSING[requested]}")
        return requested
    return next(kernel for kernel in KERNELS if unusable_reason(con, kernel) is None)


def cube_schema(con: psycopg.Connection) -> str:
    """The schema the cube extension lives in (a DBA may have created it anywhere)."""
    row = con.execute(
        "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace "
        "WHERE e.extname = 'cube'"
    ).fetchone()
    if row is None:
        con.execute("CREATE EXTENSION cube SCHEMA nnsql")
        return "nnsql"
    return str(row[0])


def cube_found(con: psycopg.Connection) -> str:
    """The cube extension as the database holds it, for a message: its schema and owner."""
    row = con.execute(
        "SELECT n.nspname, pg_catalog.pg_get_userbyid(e.extowner) FROM pg_extension e "
        "JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'cube'"
    ).fetchone()
    return "the cube extension" if row is None else f"the cube extension (schema {row[0]}, owner {row[1]})"


@dataclass(frozen=True)
class CubeKernel:
    """A Dense kernel (inputs × units) as the cube kernel stores it: unit-major shifted points."""

    inputs: int
    units: int
    chunk: int  # coordinates per point; the last chunk of a unit may hold fewer
    shift: float  # M, a power of two
    vectors: np.ndarray  # (units, inputs) float64: kernel.T − M (exact for float32 |w| ≥ 2⁻²⁹·M)
    norms: np.ndarray  # (units,) |v|² per unit, summed exactly

    @property
    def chunks(self) -> int:
        return -(-self.inputs // self.chunk)


def cube_kernel(kernel: np.ndarray) -> CubeKernel:
    inputs, units = kernel.shape
    chunks = -(-inputs // CUBE_MAX_DIM)
    shift = 2.0 ** math.ceil(math.log2(max(float(np.max(kernel)), 0.0) + 1.0))
    vectors = kernel.T.astype(np.float64) - shift
    norms = np.array([math.fsum(row * row) for row in vectors])
    return CubeKernel(inputs, units, -(-inputs // chunks), shift, vectors, norms)


def scale_limit(layout: CubeKernel) -> float:
    """R: the largest chunk norm the kernel takes undivided, a power of two at or above √(3n)·M."""
    return layout.shift * 2.0 ** math.ceil(math.log2(math.sqrt(3 * layout.inputs)))


def input_scale(x: np.ndarray, layout: CubeKernel) -> np.ndarray:
    """Per row, the power of two s the generated code divides x by: 1 while the largest norm of the
    row's chunks stays within R, else at or above largest norm / R."""
    rows, limit = np.asarray(x, np.float64), scale_limit(layout)
    peak = np.max(
        [
            np.linalg.norm(rows[:, c : c + layout.chunk], axis=1)
            for c in range(0, rows.shape[1], layout.chunk)
        ],
        axis=0,
    )
    return np.where(peak > limit, 2.0 ** np.ceil(np.log(np.maximum(peak / limit, 1.0)) / np.log(2.0)), 1.0)


def dot_error_bound(x: np.ndarray, kernel: np.ndarray) -> np.ndarray:
    """Per row and unit, the bound above on |x·w(cube kernel) − x·w(exact)|, for x/s times s."""
    layout = cube_kernel(kernel)
    scale = input_scale(x, layout)[:, None]
    x_norms = np.sum((np.asarray(x, np.float64) / scale) ** 2, axis=1, keepdims=True)
    w_norms = np.sum(np.asarray(kernel, np.float64) ** 2, axis=0)[None, :]
    spread = 3 * layout.inputs * layout.shift**2
    terms = layout.chunk + (layout.chunks + 4 if layout.chunks > 1 else 0) + 5
    bound: np.ndarray = 2 * terms * UNIT_ROUNDOFF * (x_norms + w_norms + spread) * scale
    return bound
