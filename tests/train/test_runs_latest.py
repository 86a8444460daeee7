"""runs/latest: every local run points it at itself, so quick starts name runs/latest/model/model.keras;
the run commands follow it, and deleting a run never leaves it dangling or deletes a run twice."""

from __future__ import annotations

import json
import os

import pytest

from nnsql.train.spawn import __main__ as spawn

SCRIPT = """
import os
print("worker", os.environ["WORKER_NUMBER"], "of", os.environ["TOT_WORKERS"])
"""


@pytest.fixture
def runs(tmp_path, monkeypatch):
    monkeypatch.setattr(spawn, "RUNS", tmp_path / "runs")
    return tmp_path / "runs"


def test_each_run_points_runs_latest_at_itself(runs, tmp_path, capsys):
    script = tmp_path / "job.py"
    script.write_text(SCRIPT)
    for tag in ("first", "second"):
        assert spawn.main(["-w", "1", "--no-preflight", "-t", tag, str(script)]) == 0
        link = runs / "latest"
        assert link.is_symlink() and not os.path.isabs(os.readlink(link))
        assert link.resolve().name.startswith(f"{tag}-")
        assert "worker 0 of 1" in (link / "attempt-0" / "worker-0.log").read_text()
    assert len([p for p in runs.iterdir() if not p.is_symlink()]) == 2  # no staged link left behind
    capsys.readouterr()
    assert spawn.main(["status", "latest"]) == 0 and "state:" in capsys.readouterr().out


def recorded(runs, name: str, tag: str) -> None:
    (runs / name).mkdir(parents=True)
    (runs / name / "run.json").write_text(json.dumps({"backend": "local", "tag": tag}))


def test_deleting_the_latest_run_removes_the_link_too(runs, capsys):
    recorded(runs, "a-1", "a")
    recorded(runs, "b-1", "b")
    (runs / "latest").symlink_to("b-1")
    assert spawn.main(["delete", "latest"]) == 0
    assert capsys.readouterr().out.strip() == "deleted b-1"
    assert sorted(path.name for path in runs.iterdir()) == ["a-1"]


def test_delete_by_tag_deletes_a_run_once_when_latest_names_it(runs, capsys):
    recorded(runs, "a-1", "a")
    recorded(runs, "a-2", "a")
    recorded(runs, "other-1", "other")
    (runs / "latest").symlink_to("a-2")
    assert spawn.main(["-d", "-t", "a"]) == 0
    assert capsys.readouterr().out.split() == ["deleted", "a-1", "deleted", "a-2"]
    assert sorted(path.name for path in runs.iterdir()) == ["other-1"]
