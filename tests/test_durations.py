"""The longest test files start first: the record of a run's --durations report, and the order of the
collection."""

from __future__ import annotations

import pytest

from tests import conftest, durations


def test_the_record_reads_pytests_own_durations_report(pytester: pytest.Pytester):
    pytester.makepyfile(test_one="def test_a():\n    pass\n", test_two="def test_b():\n    pass\n")
    report = pytester.runpytest("--durations=0", "--durations-min=0", "-p", "no:cacheprovider")
    report.assert_outcomes(passed=2)
    seconds = durations.per_file(report.outlines)
    assert sorted(seconds) == ["test_one.py", "test_two.py"] and all(value >= 0 for value in seconds.values())


def test_the_record_is_written_longest_first_and_read_back(tmp_path):
    record = tmp_path / "durations.txt"
    durations.write({"tests/a.py": 1.25, "tests/b.py": 30.0}, record)
    assert record.read_text().splitlines()[0].endswith("tests/b.py")
    assert durations.read(record) == {"tests/a.py": 1.2, "tests/b.py": 30.0}
    assert durations.read(tmp_path / "missing.txt") == {}


def test_the_collection_puts_the_longest_recorded_file_first_keeping_each_files_order(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
):
    """Collected by name, the short file comes before the long one: the hook of tests/conftest.py puts
    the file without a record first (its time is unknown: started last, a long one would be the run's
    tail), then the long one, and keeps a file's tests in their order."""
    record = pytester.path / "durations.txt"
    durations.write({"tests/test_b_long.py": 50.0, "tests/test_a_short.py": 1.0}, record)
    monkeypatch.setattr(durations, "RECORD", record)
    tests = "def test_first():\n    pass\n\ndef test_second():\n    pass\n"
    for name in ("test_a_short", "test_b_long", "test_c_unrecorded"):
        pytester.makepyfile(**{f"tests/{name}": tests})
    items, _ = pytester.inline_genitems("-p", "no:cacheprovider", "--import-mode=importlib", "tests")
    assert [item.nodeid.split("::")[0] for item in items][::2] == [
        "tests/test_a_short.py",
        "tests/test_b_long.py",
        "tests/test_c_unrecorded.py",
    ]
    conftest.pytest_collection_modifyitems(items)
    assert [item.nodeid for item in items] == [
        f"tests/{path}.py::{name}"
        for path in ("test_c_unrecorded", "test_b_long", "test_a_short")
        for name in ("test_first", "test_second")
    ]


def test_make_test_keeps_the_order_of_the_collection():
    """pytest-xdist reorders files by their number of tests unless told not to, which would undo the sort."""
    makefile = (conftest.REPO / "Makefile").read_text()
    (line,) = [line for line in makefile.splitlines() if line.startswith("PYTEST :=")]
    assert "--dist loadfile" in line and "--no-loadscope-reorder" in line
