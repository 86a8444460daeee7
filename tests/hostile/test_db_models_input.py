"""`nnsql models --repo` and the next export in a repository another writer shares: a FIFO where a file
should be is looked at, never opened (opening it wakes the writer waiting on it), a model directory of
more entries than a listing should read is read up to the bound with one warning, and class names stored
with control characters are not carried into the next version."""

from __future__ import annotations

import json
import os
import threading

import pytest

from nnsql.export.errors import ExportError
from nnsql.export.registry.carry import carried_classes
from nnsql.export.registry.repository import listing, regular_text
from tests.hostile.test_serve_repository_input import waiting

MAX_ENTRIES = 10_000  # docs/security.md


def test_a_fifo_is_looked_at_not_opened(tmp_path):
    fifo = tmp_path / "active"
    os.mkfifo(fifo)
    opened = threading.Event()

    def writer() -> None:
        os.close(os.open(fifo, os.O_WRONLY))  # blocks until a reader opens the FIFO
        opened.set()

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    waiting(thread)
    try:
        with pytest.raises(OSError, match="not a regular file"):
            regular_text(fifo)
        assert not opened.wait(1.0), "the command opened the FIFO"
    finally:
        os.close(os.open(fifo, os.O_RDONLY | os.O_NONBLOCK))
        thread.join(10)


def test_a_directory_of_many_entries_is_listed_up_to_the_bound(tmp_path, capsys):
    version = tmp_path / "m" / "1"
    version.mkdir(parents=True)
    (version / "metadata.json").write_text(json.dumps({"classes": ["a", "b"]}))
    for number in range(MAX_ENTRIES + 500):
        (tmp_path / "m" / f".junk-{number}").touch()
    rows = listing(tmp_path, "m")
    said = capsys.readouterr().err.splitlines()
    assert len(said) == 1 and f"holds more than {MAX_ENTRIES} entries" in said[0]
    assert len(rows) <= 1


@pytest.mark.parametrize("label", ["\x1b[2Jb", "b\0", "b\u202e"])
def test_stored_names_with_control_characters_are_not_carried(label):
    with pytest.raises(ExportError, match=r"cannot be kept.*pass --classes"):
        carried_classes("probabilities", 2, (), (3, ["a", label]))
