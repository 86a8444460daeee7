"""A model repository written by a hostile hand, loaded by the scorer in this process (real files, real
onnxruntime): labels that would make every answer huge or carry control characters, a tensor declared
twice, a directory of more entries than a scan should read, a FIFO where a file should be, and a version
policy that leaves nothing to serve. Each is refused or bounded in one line, and said for what it is."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
import time
from pathlib import Path

import pytest

from nnsql.serve.repofiles import read_regular
from nnsql.serve.repository import ModelRepository
from nnsql.serve.validation import InvalidVersion
from tests.serve.test_triton_repository import IRIS_CONFIG, softmax_model

# The bounds docs/security.md states (serve/validation.py, serve/repofiles.py)
MAX_LABEL_CHARS = 256
MAX_LABELS = 100_000
MAX_ENTRIES = 10_000
SPECS = {
    "inputs": [{"name": "x", "datatype": "FP32", "shape": [-1, 4]}],
    "outputs": [{"name": "probs", "datatype": "FP32", "shape": [-1, 3]}],
}
X = '{ name: "x"  data_type: TYPE_FP32  dims: [ 4 ] }'
TWICE_CONFIG = IRIS_CONFIG.replace(f"input [ {X} ]", f"input [ {X}, {X} ]")


def triton_model(repo: Path, name: str, labels: str = "a\nb\nc\n", config: str = IRIS_CONFIG) -> Path:
    model_dir = repo / name
    model_dir.mkdir(parents=True)
    (model_dir / "config.pbtxt").write_text(config.replace('"iris"', f'"{name}"'))
    (model_dir / "labels.txt").write_text(labels)
    softmax_model(model_dir / "1" / "model.onnx", 1, 3)
    return model_dir


def plain_model(repo: Path, name: str, **metadata: object) -> Path:
    """A version as `nnsql export onnx` writes it: model.onnx and metadata.json with its sha256."""
    version = repo / name / "1"
    softmax_model(version / "model.onnx", 2, 3)
    digest = hashlib.sha256((version / "model.onnx").read_bytes()).hexdigest()
    (version / "metadata.json").write_text(json.dumps(SPECS | {"sha256": digest} | metadata))
    return version.parent


def states(repo: Path) -> dict[str, str]:
    """Each model's first index entry: READY, or the reason it is not."""
    repository = ModelRepository(repo, poll_seconds=0).start()
    try:
        entries = {}
        for entry in repository.index():
            entries.setdefault(entry["name"], entry["reason"] or entry["state"])
        return entries
    finally:
        repository.close()


def test_the_reference_models_load(tmp_path):
    triton_model(tmp_path, "iris")
    plain_model(tmp_path, "plain", classes=["a", "b", "c"])
    assert states(tmp_path) == {"iris": "READY", "plain": "READY"}


@pytest.mark.parametrize(
    ("labels", "said"),
    [
        ("a\n" + "x" * (1 << 20) + "\nc\n", f"label 1 is longer than {MAX_LABEL_CHARS} characters"),
        ("a\n" * (MAX_LABELS + 1), f"more than {MAX_LABELS}"),
        ("a\nb\0c\nc\n", "label 1 holds a control character"),
        ("a\n\x1b[31mred\nc\n", "label 1 holds a control character"),
        ("a\nb\u202ec\nc\n", "label 1 holds a control character"),  # a right-to-left override
    ],
)
def test_hostile_label_files_refuse_the_version_in_one_line(tmp_path, labels, said):
    triton_model(tmp_path, "m", labels=labels)
    reason = states(tmp_path)["m"]
    assert said in reason and "labels of output 'probs'" in reason and "\n" not in reason


@pytest.mark.parametrize(
    ("classes", "said"),
    [
        (["a", "b" * 5000, "c"], "label 1 is longer than"),
        (["a", "b\0", "c"], "label 1 holds a control character"),
        (["a", "b\nc", "c"], "label 1 holds a control character"),
    ],
)
def test_hostile_metadata_classes_refuse_the_version(tmp_path, classes, said):
    plain_model(tmp_path, "m", classes=classes)
    reason = states(tmp_path)["m"]
    assert said in reason and "metadata 'classes'" in reason


def test_an_input_declared_twice_is_refused_not_the_last_one_kept(tmp_path):
    triton_model(tmp_path, "triton", config=TWICE_CONFIG)
    plain = plain_model(tmp_path, "plain")
    metadata = json.loads((plain / "1" / "metadata.json").read_text())
    metadata["inputs"].append({"name": "x", "datatype": "FP64", "shape": [-1, 4]})
    (plain / "1" / "metadata.json").write_text(json.dumps(metadata))
    said = states(tmp_path)
    assert "input 'x' is declared twice" in said["triton"]
    assert "input 'x' is declared twice" in said["plain"]


def test_a_specific_policy_that_excludes_every_version_says_so(tmp_path):
    policy = IRIS_CONFIG + "version_policy: { specific: { versions: [ 3 ] } }\n"
    model_dir = triton_model(tmp_path, "m", config=policy)
    softmax_model(model_dir / "2" / "model.onnx", 2, 3)
    reason = states(tmp_path)["m"]
    assert "version_policy (specific: versions [3]) excludes every version present (1, 2)" in reason
    assert "metadata.json" not in reason


def test_a_triton_model_without_versions_names_its_model_file(tmp_path):
    model_dir = triton_model(tmp_path, "m", config=IRIS_CONFIG + 'default_model_filename: "net.onnx"\n')
    assert states(tmp_path)["m"] == "no version directory holds net.onnx"
    assert model_dir.is_dir()


def test_a_scan_reads_a_bounded_number_of_entries_of_one_directory(tmp_path, caplog):
    model_dir = plain_model(tmp_path, "m")
    for number in range(MAX_ENTRIES + 500):
        (model_dir / f"junk-{number}").touch()
    with caplog.at_level(logging.WARNING, logger="nnsql.serve.repository"):
        states(tmp_path)
    ignored = [r for r in caplog.records if "not a version number" in r.getMessage()]
    capped = [r for r in caplog.records if f"holds more than {MAX_ENTRIES} entries" in r.getMessage()]
    assert len(ignored) <= MAX_ENTRIES and len(capped) == 1


def waiting(thread: threading.Thread) -> None:
    """Until the thread waits in the FIFO's open for a reader (its kernel wait channel says so)."""
    wchan = Path(f"/proc/self/task/{thread.native_id}/wchan")
    deadline = time.monotonic() + 10
    while wchan.read_text() != "wait_for_partner" and time.monotonic() < deadline:
        time.sleep(0.01)


def test_a_fifo_is_looked_at_not_opened(tmp_path):
    """Opening a FIFO, even without blocking, wakes a writer waiting for a reader: the look must come
    before any open (a device's open can act the same way)."""
    fifo = tmp_path / "labels.txt"
    os.mkfifo(fifo)
    opened = threading.Event()

    def writer() -> None:
        descriptor = os.open(fifo, os.O_WRONLY)  # blocks until a reader opens the FIFO
        opened.set()
        os.close(descriptor)

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    waiting(thread)
    try:
        with pytest.raises(InvalidVersion, match=r"labels\.txt: not a regular file"):
            read_regular(fifo, 1024, within=tmp_path)
        assert not opened.wait(1.0), "the reader opened the FIFO"
    finally:
        os.close(os.open(fifo, os.O_RDONLY | os.O_NONBLOCK))  # let the writer go
        thread.join(10)


def test_an_active_file_that_is_a_link_is_not_followed(tmp_path):
    model_dir = plain_model(tmp_path, "m")
    softmax_model(model_dir / "2" / "model.onnx", 2, 3)
    (model_dir / "2" / "metadata.json").write_text((model_dir / "1" / "metadata.json").read_text())
    (tmp_path / "elsewhere").write_text("1\n")
    (model_dir / "active").symlink_to(tmp_path / "elsewhere")
    repository = ModelRepository(tmp_path, poll_seconds=0).start()
    try:
        assert sorted(repository.models["m"]) == [1, 2]  # the link read as no choice: both served
        (model_dir / "active").unlink()
        (model_dir / "active").write_text("1\n")  # as `nnsql models activate` writes it
        repository.scan()
        assert sorted(repository.models["m"]) == [1]
    finally:
        repository.close()
