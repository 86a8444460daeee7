"""nnsql: train a Keras model with N workers, compile it into DuckDB, PostgreSQL or Oracle SQL (or ONNX
for the HTTP scorer) with parity proven in the database, and serve it.

Every module of the project is imported under this one name (`nnsql.export`, `nnsql.train`, `nnsql.serve`,
...), so a user's own `train.py`, `export/` or `serve.py` in the working directory cannot shadow it. An
installed wheel holds the folders inside this package. A source checkout keeps them at the repository's top
(`export/`, `train/`, `serve/`, ...): here the checkout's root joins the package's search path, so that
`nnsql.export` is `./export` and `python -m export.oracle` keeps working beside `nnsql export oracle`.
"""

from pathlib import Path

__version__ = "0.1.0"
# The folders at the top of a checkout that are subpackages of nnsql once installed.
FOLDERS = ("export", "train", "serve", "bench", "demo", "imagedata")


def source_checkout() -> Path | None:
    """The repository's root when this package runs from a source checkout; None when it is installed."""
    package = Path(__file__).resolve().parent
    if (package / "export").is_dir():  # installed: the folders are inside the package
        return None
    root = package.parent
    return root if any((root / name / "__init__.py").is_file() for name in FOLDERS) else None


_checkout = source_checkout()
if _checkout is not None and str(_checkout) not in __path__:
    __path__.append(str(_checkout))
