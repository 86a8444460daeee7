"""The job-control loop's branches, driven by a fake backend (named as such: no processes, no cluster)."""

from __future__ import annotations

from pathlib import Path

import pytest

from train.spawn.backend import Phase, RunSpec, WorkerStatus, read_record
from train.spawn.control import JobFailed, Settings, run_job


class FakeBackend:
    """Plays a scripted sequence of worker states per attempt; records what the loop asked."""

    name = "fake"

    def __init__(self, script: list[list[list[Phase]]]) -> None:
        self.script = script  # per attempt: a list of polls, each a list of phases per worker
        self.attempt = -1
        self.poll = 0
        self.stops = 0

    def start(self, spec: RunSpec, attempt: int) -> None:
        self.attempt, self.poll = attempt, 0

    def status(self, spec: RunSpec) -> list[WorkerStatus]:
        polls = self.script[self.attempt]
        phases = polls[min(self.poll, len(polls) - 1)]
        self.poll += 1
        return [
            WorkerStatus(i, p, "exit status 1" if p == Phase.FAILED else "") for i, p in enumerate(phases)
        ]

    def logs(self, spec: RunSpec, index: int) -> str:
        return f"attempt {self.attempt} poll {self.poll}\n"

    def stop(self, spec: RunSpec) -> None:
        self.stops += 1

    def collect(self, spec: RunSpec) -> Path | None:
        return spec.run_dir / "model" / "model.keras"

    def events(self, spec: RunSpec) -> str:
        return "0/3 nodes are available: insufficient cpu"

    def has_backup(self, spec: RunSpec) -> bool | None:
        return None


R, P, S, F = Phase.RUNNING, Phase.PENDING, Phase.SUCCEEDED, Phase.FAILED
FAST = Settings(start_timeout=0.05, poll_seconds=0.001, max_restarts=1)


def spec(tmp_path: Path) -> RunSpec:
    return RunSpec("run-1", Path("train.py"), (), 2, tmp_path / "run-1", str(tmp_path / "shared"))


def test_success_collects_and_records(tmp_path):
    lines: list[str] = []
    result = run_job(FakeBackend([[[P, P], [R, R], [S, R], [S, S]]]), spec(tmp_path), FAST, lines.append)
    assert result.attempts == 1 and result.model is not None
    record = read_record(tmp_path / "run-1")
    assert record["state"] == "succeeded" and record["backend"] == "fake"
    assert any(line.startswith("[worker 0] attempt 0") for line in lines)


def test_a_failed_worker_restarts_the_whole_group(tmp_path):
    backend = FakeBackend([[[R, R], [R, F]], [[R, R], [S, S]]])
    lines: list[str] = []
    result = run_job(backend, spec(tmp_path), FAST, lines.append)
    assert result.attempts == 2 and backend.stops >= 1
    assert any("worker 1 failed (exit status 1); restarting the whole group" in line for line in lines)


def test_restarts_are_bounded(tmp_path):
    backend = FakeBackend([[[R, F]], [[F, R]]])
    with pytest.raises(JobFailed, match=r"worker 0 failed \(exit status 1\) and 1 restart\(s\) are used up"):
        run_job(backend, spec(tmp_path), FAST, lambda line: None)
    assert read_record(tmp_path / "run-1")["state"] == "failed"


def test_workers_that_never_run_time_out_with_the_events(tmp_path):
    with pytest.raises(JobFailed, match="not running after 0s; events: 0/3 nodes are available"):
        run_job(FakeBackend([[[P, P]]]), spec(tmp_path), FAST, lambda line: None)
