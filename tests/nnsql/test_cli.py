"""`nnsql COMMAND ...` runs each module's own main(argv): the same options as the `python -m` forms."""

from __future__ import annotations

import pytest

import nnsql
from nnsql import cli


def test_help_names_every_command_and_the_next_step(capsys):
    assert cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    assert all(f"\n  {name} " in out for name in cli.COMMANDS)
    assert "nnsql export duckdb --model model.keras" in out and "--verbose" in out


def test_version_and_unknown_commands(capsys):
    assert cli.main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"nnsql {nnsql.__version__}"
    assert cli.main(["train"]) == 2
    assert "no command 'train' (one of spawn, export, serve, bench, demo" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["spawn", "export", "serve", "demo"])
def test_each_command_is_the_modules_own_parser(command, capsys):
    """The module's parser answers --help under its `nnsql` name."""
    with pytest.raises(SystemExit) as done:
        cli.main([command, "--help"]) if command != "export" else cli.main([command, "duckdb", "--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    expected = {"export": "nnsql export duckdb", "spawn": "nnsql spawn"}.get(command, f"nnsql {command}")
    assert out.startswith(f"usage: {expected}")


def test_bench_lists_the_benchmarks_of_a_checkout(capsys):
    assert cli.main(["bench"]) == 0
    assert "scoring" in capsys.readouterr().out
    assert cli.main(["bench", "nothing"]) == 2
