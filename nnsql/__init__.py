"""nnsql: train a Keras model with N workers, compile it into DuckDB, PostgreSQL or Oracle SQL (or ONNX
for the HTTP scorer) with parity proven in the database, and serve it.

Every module of the project is imported under this one name (`nnsql.export`, `nnsql.train`, `nnsql.serve`,
...), so a user's own `train.py`, `export/` or `serve.py` in the working directory cannot shadow it. An
installed wheel holds the folders inside this package. A source checkout keeps them at the repository's top
(`export/`, `train/`, `serve/`, ...) and reaches them through committed symbolic links (`nnsql/export ->
../export`), so that `nnsql.export.ir.graph` is a path every tool can follow: `nnsql/export/ir/graph.py`.
"""

from pathlib import Path

__version__ = "0.1.0"


def source_checkout() -> Path | None:
    """The repository's root when this package runs from a source checkout; None when it is installed."""
    package = Path(__file__).resolve().parent
    # A checkout links the design folders into the package; a wheel holds them as plain folders.
    return package.parent if (package / "export").is_symlink() else None
