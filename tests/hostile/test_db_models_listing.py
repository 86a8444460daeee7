"""`nnsql models list` prints what a repository's metadata.json or a database's registry holds: text
whoever exported (or prepared the file) chose. A line break or terminal escape in a class name or the
source used to reach the user's terminal as it was: it forged rows of the listing and drove the
terminal (`ESC ]0;` retitles it, `ESC [2J` clears it)."""

from __future__ import annotations

import json
import shutil

from nnsql import cli as nnsql_cli
from tests.serve.conftest import onnx_repo  # noqa: F401  (the fixture, used below)

SOURCE = "/models/m.keras\x1b]0;owned\x07\nmnist  9        probabilities  forged"


def test_the_listing_shows_each_version_on_one_printable_line(tmp_path, capsys, onnx_repo):  # noqa: F811
    version = tmp_path / "mnist" / "1"
    shutil.copytree(onnx_repo / "mnist" / "1", version)
    metadata = json.loads((version / "metadata.json").read_text())
    metadata |= {"source": SOURCE, "classes": ["zero\x1b[2J", *map(str, range(1, 10))]}
    (version / "metadata.json").write_text(json.dumps(metadata))
    assert nnsql_cli.main(["models", "list", "--repo", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2, lines  # the header and the one version
    assert "\x1b" not in lines[1] and lines[1].isprintable()
    assert lines[1].endswith("/models/m.keras\\x1b]0;owned\\x07\\nmnist  9        probabilities  forged")


# Fields of another type than an export writes, as a writer of the repository may put them: each used to
# end the listing in a traceback (`'str' object has no attribute 'get'`, `'int' object is not
# subscriptable`, json's `Expecting value`), so that no version of any model could be listed.
ODD_FIELDS = [
    {"parity": "x"},
    {"parity": {"rows": 5, "max_abs_diff": "tiny"}},
    {"output_kinds": 5},
    {"output_kinds": {"a": 1}},
    {"classes": "abc"},
    {"classes": 7},
    {"classes": {"a": 1}, "source": 7},
]


def test_fields_of_another_type_are_listed_as_they_are(tmp_path, capsys, onnx_repo):  # noqa: F811
    for i, fields in enumerate(ODD_FIELDS, start=1):
        version = tmp_path / "mnist" / str(i)
        shutil.copytree(onnx_repo / "mnist" / "1", version)
        metadata = json.loads((version / "metadata.json").read_text())
        (version / "metadata.json").write_text(json.dumps(metadata | fields))
    capsys.readouterr()
    assert nnsql_cli.main(["models", "list", "--repo", str(tmp_path)]) == 0
    shown = capsys.readouterr()
    lines = shown.out.splitlines()
    assert len(lines) == 1 + len(ODD_FIELDS), shown
    assert "Traceback" not in shown.err
    assert "  abc  " in lines[5] and "  7  " in lines[6], lines  # as the file holds them
    assert "?" in lines[1].split() and "?" in lines[2].split(), lines  # no number to show


def test_activating_a_version_whose_outputs_are_not_described_is_refused_in_one_line(
    tmp_path,
    capsys,
    onnx_repo,  # noqa: F811
):
    """The model and its sha256 are sound; metadata.json names no outputs: one line, nothing activated."""
    version = tmp_path / "mnist" / "1"
    shutil.copytree(onnx_repo / "mnist" / "1", version)
    metadata = json.loads((version / "metadata.json").read_text())
    del metadata["outputs"]
    (version / "metadata.json").write_text(json.dumps(metadata))
    capsys.readouterr()
    code = nnsql_cli.main(
        ["models", "activate", "--repo", str(tmp_path), "--name", "mnist", "--version", "1"]
    )
    err = capsys.readouterr().err
    assert code != 0 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert "outputs" in err, err
