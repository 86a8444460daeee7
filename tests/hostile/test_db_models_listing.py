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
