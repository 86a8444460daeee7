"""The ONNX target through the publish step every target shares: its passes before the store
(export/onnx/prepare.py), then export/publish/pipeline.py's `publish` on the repository store."""

import hashlib
import json

from nnsql.export.onnx.prepare import prepare
from nnsql.export.onnx.store import RepositoryStore
from nnsql.export.publish.pipeline import ExportRequest, publish

ROWS = 300  # more than the answers of a database target are checked on (ANSWER_ROWS)


def test_the_repository_store_publishes_through_the_shared_step(tmp_path, cern_mlp_path):
    """`publish` stages the conversion, verifies onnxruntime against Keras and switches: the version's
    directory holds the model, its check and a document that states what the shared step decided."""
    store = RepositoryStore(tmp_path, "mnist")
    request = ExportRequest(cern_mlp_path, "mnist", sample_rows=ROWS)
    prepared, store.conversion, request = prepare(request, store.active_classes("mnist"))
    record = publish(store, request, prepared, "onnx")
    version = tmp_path / "mnist" / str(store.version)
    document = json.loads((version / "metadata.json").read_text())
    assert store.version == record.version == 1 and (version / "check.json").is_file()
    assert document["classes"] == json.loads(record.classes) and document["version"] == 1
    assert document["sha256"] == hashlib.sha256((version / "model.onnx").read_bytes()).hexdigest()
    assert document["parity"]["rows"] == record.parity.rows == ROWS
    assert document["parity"]["sample_source"] == record.sample_source


def test_the_scorers_answers_are_checked_on_every_scored_row(tmp_path, cern_mlp_path):
    """onnxruntime's answers (class, label) are read from the scores it returned, so each is checked on
    every scored row, not on the subset a database's extra queries are limited to."""
    store = RepositoryStore(tmp_path, "mnist")
    request = ExportRequest(cern_mlp_path, "mnist", sample_rows=ROWS)
    prepared, store.conversion, request = prepare(request, None)
    report = publish(store, request, prepared, "onnx").parity
    assert report.answers and all(check.compared == report.rows == ROWS for check in report.answers)
