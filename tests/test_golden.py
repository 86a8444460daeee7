"""Golden files are written by `python -m tests.golden.update`, never by the test that checks them."""

from __future__ import annotations

import pytest

from tests.golden import graphs, update


@pytest.fixture
def golden(tmp_path, monkeypatch):
    folder = tmp_path / "golden"
    folder.mkdir()
    monkeypatch.setattr(graphs, "GOLDEN_DIR", folder)
    monkeypatch.setattr(update, "GOLDEN_DIR", folder)
    return folder


def test_a_missing_golden_file_fails_and_is_not_written_whatever_the_environment(golden, monkeypatch):
    monkeypatch.setenv("UPDATE_GOLDEN", "1")
    with pytest.raises(AssertionError, match="is missing"):
        graphs.check_golden("SELECT 1;\n", "tiny.sql")
    assert not (golden / "tiny.sql").exists()


def test_a_changed_text_fails_and_is_left_for_the_update_command(golden, tmp_path, monkeypatch):
    staging = tmp_path / "staging"
    staging.mkdir()
    monkeypatch.setenv(graphs.STAGING, str(staging))
    (golden / "tiny.sql").write_text("SELECT 1;\n")
    with pytest.raises(AssertionError, match="differs"):
        graphs.check_golden("SELECT 2;\n", "tiny.sql")
    assert (golden / "tiny.sql").read_text() == "SELECT 1;\n"
    (staging / "same.sql").write_text("SELECT 3;\n")
    (golden / "same.sql").write_text("SELECT 3;\n")
    assert update.copy(staging) == ["tiny.sql"]
    assert (golden / "tiny.sql").read_text() == "SELECT 2;\n"


def test_the_update_command_runs_every_test_file_that_checks_a_golden_text():
    files = {path.name for path in update.golden_test_files()}
    assert {"test_duckdb_generator.py", "test_postgres_generator.py", "test_lowering.py"} <= files
    assert "test_golden.py" not in files
