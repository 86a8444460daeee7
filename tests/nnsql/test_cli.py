"""`nnsql COMMAND ...` runs each module's own main(argv): the same options as the `python -m` forms."""

from __future__ import annotations

import contextlib
import re
import subprocess
import sys

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


def test_a_missing_extra_is_named_in_one_line(tmp_path):
    """`pip install "nnsql[export,serve]"` holds no python-dotenv: `nnsql spawn --help` ended in a
    traceback ("No module named 'dotenv'") instead of naming the extra to install. Its help now needs no
    extra; what needs dotenv (`--env-file`) names the extra in one line."""
    (tmp_path / "job.py").write_text("print('trained')\n")
    (tmp_path / "env.txt").write_text("LR=0.1\n")
    block = "import sys; sys.modules['dotenv'] = None\n"  # as if not installed: importing it fails
    run = "from nnsql import cli; sys.exit(cli.main({}))"
    for argv, code in (["spawn", "--help"], 0), (["spawn", "--no-preflight", "-e", "env.txt", "job.py"], 2):
        done = subprocess.run(
            [sys.executable, "-c", block + run.format(argv)],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == code and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.strip() == (
        "error: nnsql spawn needs dotenv, which the 'train' extra installs: "
        f'pip install "{CHECKOUT}[train]"'
    )


# The checkout under test, as the install command names it from a working directory outside it.
CHECKOUT = nnsql.source_checkout()


def test_a_missing_kubernetes_client_names_the_k8s_extra_of_the_checkout(tmp_path):
    """The Kubernetes backend reported a missing client as "cannot reach Kubernetes: No module named
    'kubernetes'"; the line now names the extra and the pip command that installs it from this checkout."""
    (tmp_path / "job.py").write_text("print('trained')\n")
    code = (
        "import sys; sys.modules['kubernetes'] = None\n"
        "from nnsql import cli; sys.exit(cli.main(['spawn', '--backend', 'kubernetes', '--no-preflight', "
        "'job.py']))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        "error: nnsql spawn needs kubernetes, which the 'k8s' extra installs: "
        f'pip install "{CHECKOUT}[k8s]"'
    )


def test_the_install_command_names_the_checkout_relative_to_the_working_directory(monkeypatch):
    monkeypatch.chdir(CHECKOUT)
    assert cli.install_command("k8s") == 'pip install ".[k8s]"'
    monkeypatch.chdir(CHECKOUT.parent)
    assert cli.install_command("k8s") == f'pip install "./{CHECKOUT.name}[k8s]"'


def test_the_extra_named_is_the_one_the_command_needs():
    assert cli.extra_for("psycopg", "export") == "postgres"
    assert (
        cli.extra_for("tensorflow", "spawn") == "train" and cli.extra_for("tensorflow", "export") == "export"
    )
    assert cli.extra_for("onnxruntime", "serve") == "serve" and cli.extra_for("grpc", "serve") == "serve"
    assert cli.extra_for("sklearn.metrics", "demo") == "train"
    assert cli.extra_for("no_such_package", "export") is None


def test_export_of_one_target_needs_no_other_targets_driver():
    """`pip install "nnsql[export,serve]"` (the ML engineer's quick start) holds no psycopg: every
    `nnsql export ...`, `onnx` included, failed on `import psycopg` while listing the targets."""
    code = (
        "import sys; sys.modules['psycopg'] = None\n"
        "from nnsql import cli; sys.exit(cli.main(['export', 'onnx', '--help']))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.startswith("usage: nnsql export onnx"), done.stderr


@pytest.mark.parametrize(
    "argv",
    [
        ["spawn"],
        ["serve"],
        ["demo"],
        ["export"],
        ["export", "duckdb"],
        ["export", "postgres"],
        ["export", "oracle"],
        ["export", "onnx"],
        ["models"],
    ],
)
def test_every_help_names_the_next_step(argv, capsys):
    """A newcomer reads `--help` and then wants to know what to run next (`nnsql serve --help` and the
    export targets' help ended on their options or one example)."""
    with contextlib.suppress(SystemExit):
        cli.main([*argv, "--help"])
    out = capsys.readouterr().out
    assert re.search(r"next step:\s+\S", out), out[-400:]
