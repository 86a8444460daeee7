import pytest

from nnsql.export.__main__ import main, markdown_table
from tests.conftest import REPO


def test_the_layer_table_is_the_generated_one():
    readme = (REPO / "docs" / "layers.md").read_text()
    start = readme.index("<!-- supported:start -->\n") + len("<!-- supported:start -->\n")
    end = readme.index("<!-- supported:end -->")
    assert readme[start:end].strip() == markdown_table().strip(), "run: make supported"


def test_supported_lists_every_target_and_core_layer(capsys):
    assert main(["--supported"]) == 0
    table = capsys.readouterr().out
    assert "| Dense | Dense+PatchDense | yes | yes | yes | yes | yes | yes |" in table
    assert "| LSTM | Scan | yes | yes | yes | yes | yes | yes |" in table
    assert table.splitlines()[0].split(" | ")[2:] == [
        "duckdb",
        "onnx",
        "oracle",
        "postgres",
        "postgres+cube",
        "postgres+plpython",
        "spark |",
    ]


def test_one_command_compiles_for_any_target(cern_mlp_path, tmp_path, capsys):
    """`nnsql export X` is the target's own command: the same options, help and result."""
    from nnsql.export.__main__ import main

    db = tmp_path / "models.duckdb"
    args = ["duckdb", "--model", str(cern_mlp_path), "--db", str(db), "--name", "mnist"]
    assert main([*args, "--quiet", "--sample-rows", "20"]) == 0
    assert "published mnist version 1" in capsys.readouterr().out
    for spelling in (["oracle", "--help"], ["--target", "oracle", "--help"]):  # the older spelling too
        with pytest.raises(SystemExit) as help_exit:
            main(spelling)
        assert help_exit.value.code == 0 and "--script-only" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["--model", "m.keras"])
    listed = "nnsql export TARGET ..., TARGET one of duckdb, onnx, oracle, postgres, spark"
    assert listed in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["mysql", "--model", "m.keras"])
    assert "no target 'mysql'" in capsys.readouterr().err
