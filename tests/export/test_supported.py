from export.__main__ import main, markdown_table
from tests.conftest import REPO


def test_readme_table_is_the_generated_one():
    readme = (REPO / "README.md").read_text()
    start = readme.index("<!-- supported:start -->\n") + len("<!-- supported:start -->\n")
    end = readme.index("<!-- supported:end -->")
    assert readme[start:end].strip() == markdown_table().strip(), "run: python -m export --supported"


def test_supported_lists_every_target_and_core_layer(capsys):
    assert main(["--supported"]) == 0
    table = capsys.readouterr().out
    assert "| Dense | Dense | yes |" in table
    assert "duckdb" in table.splitlines()[0]
