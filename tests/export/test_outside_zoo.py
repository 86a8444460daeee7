"""The outside-style zoo (tests/outside_zoo.py) × every target. Each model is built, saved, loaded and
compiled once (the pipeline's `prepare`: IR, TensorFlow's scores of the gate's sample rows), then
published to each database target by the product's own `publish`, whose gate checks parity on those rows;
ONNX converts the loaded model with its target's converter (tf2onnx). Then 60 rows of the zoo's own (sequences
padded with the model's mask value, token indices with padding) are scored in one query per target and
compared with Keras: max |Δp| ≤ 1e-5 (float32 parity) and the same classes. The PostgreSQL targets share
one database, each model under a name of its own per kernel."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import duckdb
import numpy as np
import psycopg
import pytest

from nnsql.export.compile import to_ir
from nnsql.export.frontend.float64 import predictor
from nnsql.export.frontend.model import load_model, read_metadata
from nnsql.export.publish.gate import gate_for
from nnsql.export.publish.pipeline import ExportRequest, Prepared, joined, publish
from nnsql.export.publish.samples import sample_inputs
from nnsql.export.target import TARGETS
from tests import models, outside_zoo
from tests.export.executors import OracleScriptExecutor

GATE_ROWS = 50  # the gate's sample rows per export (the product's default is 1,000)
TARGET_PARAMS = [
    pytest.param("duckdb", marks=pytest.mark.duckdb),
    pytest.param("postgres", marks=pytest.mark.postgres),
    pytest.param("postgres+plpython", marks=pytest.mark.postgres),
    pytest.param("postgres+cube", marks=pytest.mark.postgres),
    pytest.param("oracle", marks=pytest.mark.oracle),
    "onnx",
]
PREFIXES = {"duckdb": "z", "postgres": "p", "postgres+plpython": "py", "postgres+cube": "pc", "oracle": "z"}
KERNELS = {"postgres": "plpgsql", "postgres+plpython": "plpython", "postgres+cube": "cube"}


class Compiled:
    """One zoo model, saved, loaded back as the exporters load it, and compiled once for every target: the
    steps of the pipeline's `prepare` (IR, the gate's sample rows, TensorFlow's scores of them) on the one
    loaded model, whose traced predict function the zoo's rows and ONNX's conversion reuse."""

    def __init__(self, name: str, directory: Path) -> None:
        self.path = models.save(outside_zoo.build(name), directory)
        self.model = load_model(self.path)
        self.rows = outside_zoo.rows(name, self.model)
        self.expected = predicted(self.model, self.rows)
        metadata = read_metadata(self.path)
        graph = to_ir(self.model, target="duckdb", classes=tuple(metadata["classes"]))
        samples = sample_inputs(graph, metadata, GATE_ROWS)
        gate_scores = predicted(self.model, [samples.inputs[spec.name] for spec in graph.inputs])
        self.request = ExportRequest(self.path, name, sample_rows=GATE_ROWS)
        self.float64 = predictor(self.model)
        self.prepared = Prepared(
            graph=graph,
            metadata=metadata,
            samples=samples,
            gate=gate_for(graph, samples, gate_scores, 1e-5, False, self.float64),
        )
        self.gate_scores = gate_scores

    def prepared_for(self, target: str) -> Prepared:
        """What the pipeline's `prepare` gives the target: its rows compared with Keras, in float64 where
        the target computes in float64 and on rows at scale (export/publish/pipeline.py's Gate)."""
        float32 = TARGETS[target].capabilities.float32
        gate = gate_for(
            self.prepared.graph, self.prepared.samples, self.gate_scores, 1e-5, float32, self.float64
        )
        return replace(self.prepared, gate=gate)


def predicted(model, inputs: list[np.ndarray]) -> np.ndarray:
    return joined(model.predict(inputs if len(inputs) > 1 else inputs[0], verbose=0))


@pytest.fixture(scope="session")
def compiled(tmp_path_factory):
    built: dict[str, Compiled] = {}

    def get(name: str) -> Compiled:
        if name not in built:
            built[name] = Compiled(name, tmp_path_factory.mktemp(name))
        return built[name]

    return get


@pytest.fixture(scope="module")
def shared_database(postgres_server):
    """One database for every PostgreSQL export of this module."""
    with psycopg.connect(postgres_server.dsn(), autocommit=True) as admin:
        admin.execute("DROP DATABASE IF EXISTS outside_zoo")
        admin.execute("CREATE DATABASE outside_zoo")
    return postgres_server.dsn("outside_zoo")


def published(target: str, zoo: Compiled, name: str, where: Path | str) -> None:
    """The compiled model checked against the target's capabilities and published, gate included."""
    from nnsql.export.duckdb.store import DuckDBStore
    from nnsql.export.postgres.store import PostgresStore

    TARGETS[target].capabilities.check(zoo.prepared.graph)
    request = replace(zoo.request, name=name)
    if target == "duckdb":
        store = DuckDBStore(Path(where) / "models.duckdb", progress=False)
    else:
        store = PostgresStore(str(where), progress=False, kernel=KERNELS[target])
    try:
        publish(store, request, zoo.prepared_for(target), target)
    finally:
        store.close()


def scored_in_database(target: str, name: str, where: Path | str, inputs: list[np.ndarray]) -> np.ndarray:
    """Every row's probabilities from one query."""
    flat = [x.reshape(len(x), -1).astype(np.float64).tolist() for x in inputs]
    marks = range(len(inputs))
    if target == "duckdb":
        columns = ", ".join(f"unnest(?::DOUBLE[][]) AS x{k}" for k in marks)
        sql = (
            f"SELECT {name}.predict_proba({', '.join(f'x{k}' for k in marks)}) FROM "
            f"(SELECT {columns}, generate_subscripts(?::DOUBLE[][], 1) AS i) ORDER BY i"
        )
        with duckdb.connect(str(Path(where) / "models.duckdb"), read_only=True) as con:
            return np.array([row[0] for row in con.execute(sql, [*flat, flat[0]]).fetchall()])
    arguments = ", ".join(f"ARRAY(SELECT e::float8 FROM jsonb_array_elements_text(j->{k}) e)" for k in marks)
    sql = (
        f"SELECT {name}.predict_proba({arguments}) FROM jsonb_array_elements(%s::jsonb) "
        "WITH ORDINALITY AS t(j, i) ORDER BY i"
    )
    rows = [list(row) for row in zip(*flat, strict=True)]
    with psycopg.connect(str(where)) as con:
        return np.array([row[0] for row in con.execute(sql, [json.dumps(rows)]).fetchall()])


def scored_by_oracle_scripts(zoo: Compiled, name: str, directory: Path) -> np.ndarray:
    """The --script-only scripts written from the compiled model, parsed as PL/SQL and run as text by the
    PL/SQL test interpreter (install.sql, the verify-and-switch gate included)."""
    import parseora

    from nnsql.export.oracle.generator import check_weights_finite
    from nnsql.export.oracle.script import write_scripts

    TARGETS["oracle"].capabilities.check(zoo.prepared.graph)
    check_weights_finite(zoo.prepared.graph)
    write_scripts(directory, replace(zoo.request, name=name), zoo.prepared_for("oracle"), 1)
    package = (directory / "03_package_v1.sql").read_text()
    assert all(not unit["errors"] for unit in parseora.parse(package, version="19c"))
    scorer = OracleScriptExecutor(directory.parent)
    scorer.directory = directory
    return scorer.predict_inputs(name, zoo.rows)


def scored_by_onnx(zoo: Compiled, directory: Path) -> np.ndarray:
    """The loaded model converted by the ONNX target's converter and run by onnxruntime."""
    import onnxruntime

    from nnsql.export.onnx.emit import convert
    from nnsql.export.onnx.runtime import numpy_type

    convert(zoo.model, directory / "model.onnx")
    session = onnxruntime.InferenceSession(str(directory / "model.onnx"), providers=["CPUExecutionProvider"])
    feeds = {
        i.name: x.astype(numpy_type(i.type)) for i, x in zip(session.get_inputs(), zoo.rows, strict=True)
    }
    return joined(session.run(None, feeds))


@pytest.mark.parametrize("name", list(outside_zoo.ZOO))
@pytest.mark.parametrize("target", TARGET_PARAMS)
def test_outside_zoo_scores_like_keras(target, name, compiled, request, tmp_path):
    zoo = compiled(name)
    model_name = f"{PREFIXES.get(target, 'z')}_{name}"[:25]
    if target == "oracle":
        actual = scored_by_oracle_scripts(zoo, model_name, tmp_path / "scripts")
    elif target == "onnx":
        actual = scored_by_onnx(zoo, tmp_path)
    else:
        where = request.getfixturevalue("shared_database") if target in KERNELS else tmp_path
        published(target, zoo, model_name, where)
        actual = scored_in_database(target, model_name, where, zoo.rows)
    assert np.abs(actual - zoo.expected).max() <= 1e-5
    assert (actual.argmax(1) == zoo.expected.argmax(1)).all()
