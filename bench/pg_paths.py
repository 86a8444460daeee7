"""Shared by the benchmarks: export one model to PostgreSQL with each kernel (PL/pgSQL, cube, PL/Python)
and time a scoring query on each."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from .scoring import best_seconds


def fetch_all(connection: Any, query: str) -> list:
    return connection.execute(query).fetchall()


def time_postgres_paths(
    store: Any,
    model_path: Path,
    base: str,
    query: Callable[[str], str],
    load: Callable[[str], None] | None = None,
) -> dict[str, float]:
    """Seconds of `query(name)` for the model exported as `base_<kernel>` with each PostgreSQL kernel;
    `load(name)` prepares the rows after each export. A kernel the server cannot run is skipped, said so."""
    from nnsql.export.compile import prepare
    from nnsql.export.errors import ExportError
    from nnsql.export.postgres.generator import CAPABILITIES
    from nnsql.export.publish.pipeline import ExportRequest, publish

    seconds = {}
    for kernel in ("plpgsql", "cube", "plpython"):
        name = f"{base}_{kernel}"
        store.requested_kernel = kernel
        # a generous parity budget: a bench measures scoring, and a loaded machine must not skip a kernel
        request = ExportRequest(model_path=model_path, name=name, sample_rows=5, parity_seconds=600)
        try:
            publish(store, request, prepare(request, CAPABILITIES), "postgres")
        except ExportError as error:
            print(f"{name}: skipped ({error})")
            continue
        if load is not None:
            load(name)
        seconds[f"postgres_{kernel}"] = best_seconds(partial(fetch_all, store.con, query(name)), 1)
    return seconds
