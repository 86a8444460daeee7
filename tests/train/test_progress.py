"""Progress bars streamed from a worker: Keras redraws its bar with backspaces and a carriage return, into
a file too; each epoch must stay one line in what spawn prints and in `logs RUN`, not one line per step."""

from __future__ import annotations

import pytest

from nnsql.train.spawn import __main__ as spawn
from nnsql.train.spawn.control import LogFollower

# Writes its bar the way Keras' Progbar does when its output is not a terminal but `posix` is loaded.
SCRIPT = """
import sys
STEPS = 300
for epoch in (1, 2, 3):
    print(f"Epoch {epoch}/3", flush=True)
    width = 0
    for step in range(1, STEPS + 1):
        bar = f"{step}/{STEPS} [{'=' * (30 * step // STEPS):<30}] - loss: {1 / (epoch * step):.4f}"
        sys.stdout.write("\\b" * width + "\\r" + bar)
        width = len(bar)
        sys.stdout.flush()
    sys.stdout.write("\\n")
print("done", flush=True)
"""


@pytest.fixture
def runs(tmp_path, monkeypatch):
    monkeypatch.setattr(spawn, "RUNS", tmp_path / "runs")
    return tmp_path / "runs"


def worker_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("[worker 0]")]


def test_a_progress_bar_is_one_line_per_epoch(runs, tmp_path, capsys):
    script = tmp_path / "fit.py"
    script.write_text(SCRIPT)
    assert spawn.main(["-w", "1", "--no-preflight", str(script)]) == 0
    printed = worker_lines(capsys.readouterr().out)
    bars = [line for line in printed if "loss:" in line]
    assert len(bars) == 3 and all(line.startswith("[worker 0] 300/300 [=") for line in bars)
    assert "[worker 0] done" in printed
    assert spawn.main(["logs", "latest"]) == 0
    shown = capsys.readouterr().out.splitlines()
    assert [line for line in shown if "loss:" in line] == [line.removeprefix("[worker 0] ") for line in bars]
    assert not any("\r" in line or "\b" in line for line in shown)


def test_on_a_terminal_the_bar_is_redrawn_in_place_and_gives_way_to_finished_lines():
    said: list[str] = []
    drawn: list[str] = []
    follower = LogFollower(said.append, live=drawn.append)
    follower.follow("Epoch 1/1\n\r1/2 [=    ]")
    follower.follow("Epoch 1/1\n\r1/2 [=    ]\b\b\b\r2/2 [=====]")
    follower.follow("Epoch 1/1\n\r1/2 [=    ]\b\b\b\r2/2 [=====]\n")
    assert said == ["[worker 0] Epoch 1/1", "[worker 0] 2/2 [=====]"]
    assert drawn == ["[worker 0] 1/2 [=    ]", "[worker 0] 2/2 [=====]", ""]
