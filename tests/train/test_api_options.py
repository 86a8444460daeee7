"""`train.spawn.run` from a notebook: options it cannot take are one-line Refused errors, never the
SystemExit argparse raises for the command line (which a notebook shows as 'SystemExit: 2' after a
usage dump)."""

from __future__ import annotations

import pytest

from nnsql.train.spawn import run
from nnsql.train.spawn.api import Refused


@pytest.mark.parametrize(
    ("options", "said"),
    [
        ({"epochs": 5}, "unrecognized arguments: --epochs (keywords are train.spawn's options"),
        ({"workers": "two"}, "argument -w/--workers: invalid int value: 'two'"),
        ({"backend": "slurm"}, "argument --backend: invalid choice: 'slurm'"),
    ],
)
def test_options_the_command_line_refuses_are_one_line_errors(tmp_path, capsys, options, said):
    script = tmp_path / "train.py"
    script.write_text("print('never runs')\n")
    with pytest.raises(Refused) as refused:
        run(script, runs=tmp_path / "runs", **options)
    assert str(refused.value).startswith(said)
    assert "usage:" not in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()
