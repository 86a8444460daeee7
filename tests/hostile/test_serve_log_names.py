"""Names a writer of the model repository chooses reach the operator's log: a version directory that is
not a number is named in a warning. A name holding a line break or a terminal escape must not forge a
second log line or drive the operator's terminal: every line the scan logs is one printable line."""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

import pytest

from nnsql.serve.coordination import Scanner
from tests.serve.conftest import ServeProcess, onnx_repo  # noqa: F401  (the fixture, used below)

FORGED = "1\nERROR nnsql.serve: the admin key is \x1b[8mhidden"
FORGED_MODEL = "mnist\nERROR nnsql.serve: forged \x1b[2J"


def test_a_directory_name_is_logged_on_one_printable_line(tmp_path: Path, caplog):
    (tmp_path / "plain" / FORGED).mkdir(parents=True)
    with caplog.at_level(logging.INFO, logger="nnsql.serve.repository"):
        Scanner(tmp_path).present()
    messages = [record.getMessage() for record in caplog.records]
    assert any("not a version number" in message for message in messages), messages
    for message in messages:
        assert message.isprintable(), repr(message)


def test_a_model_directory_name_that_is_not_utf8_is_ignored_in_one_printable_line(tmp_path: Path, caplog):
    """No client can name such a model (its name holds lone surrogates) and no JSON answer can carry it."""
    (tmp_path / os.fsdecode(b"m\xff\n") / "1").mkdir(parents=True)
    (tmp_path / "plain" / "1").mkdir(parents=True)
    with caplog.at_level(logging.INFO, logger="nnsql.serve.repository"):
        found = Scanner(tmp_path).present()
    assert list(found) == ["plain"]
    messages = [record.getMessage() for record in caplog.records]
    assert any("its name is not UTF-8" in message for message in messages), messages
    assert all(message.isprintable() for message in messages), messages


@pytest.mark.slow
def test_a_model_directory_name_is_logged_on_one_printable_line(tmp_path: Path, onnx_repo):  # noqa: F811
    """A worker says which model it loaded: a model directory named with a line break used to start a
    line of its choosing in the server's output, and an escape sequence to drive the terminal."""
    shutil.copytree(onnx_repo / "mnist" / "1", tmp_path / FORGED_MODEL / "1")
    server = ServeProcess(tmp_path, "--workers", "1", "--no-access-log")
    try:
        server.wait_ready()
        server.wait_for_workers(1)
    finally:
        output = server.stop()
    assert "[worker 0] loaded mnist\\nERROR" in output, output[-1500:]
    assert not any(line.startswith("ERROR") for line in output.splitlines()), output[-1500:]
    assert "\x1b" not in output
