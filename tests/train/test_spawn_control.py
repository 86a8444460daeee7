"""The job-control loop's branches, driven by a fake backend (named as such: no processes, no cluster)."""

from __future__ import annotations

from pathlib import Path

import pytest

from nnsql.train.spawn.backend import Phase, RunSpec, WorkerStatus, read_record
from nnsql.train.spawn.control import JobFailed, Settings, run_job


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


class FailingBackend(FakeBackend):
    """Worker 1 fails in every attempt, its log ending with the error of that attempt."""

    def __init__(self, errors: list[str], backup: bool | None) -> None:
        super().__init__([[[R, F]]] * len(errors))
        self.errors, self.backup = errors, backup

    def logs(self, spec: RunSpec, index: int) -> str:
        if index == 0:  # the chief reports its peer's failure, which says nothing about the cause
            peer = "tensorflow.python.framework.errors_impl.UnavailableError: Collective ops is aborted"
            return f"Epoch 1/3\n{peer}\n"
        return f"Epoch 1/3\nTraceback (most recent call last):\n  File x\n{self.errors[self.attempt]}\n"

    def has_backup(self, spec: RunSpec) -> bool | None:
        return self.backup


def test_a_failure_that_repeats_identically_is_not_restarted_again(tmp_path):
    missing = "FileNotFoundError: [Errno 2] No such file or directory: '/out/model.keras'"
    backend = FailingBackend([missing, missing, missing], backup=False)
    settings = Settings(start_timeout=0.05, poll_seconds=0.001, max_restarts=2)
    lines: list[str] = []
    with pytest.raises(JobFailed, match="with the same error as in the attempt before") as error:
        run_job(backend, spec(tmp_path), settings, lines.append)
    assert backend.attempt == 1 and missing in str(error.value)  # 2 attempts, not 3
    assert any("starting over: there is no backup in NNSQL_BACKUP_DIR" in line for line in lines)
    assert not any("resuming from the last backup" in line for line in lines)


@pytest.mark.parametrize(
    ("backup", "said"),
    [
        (True, "resuming from the last backup"),
        (False, "starting over: there is no backup"),
        (None, "resuming from NNSQL_BACKUP_DIR if the script wrote a backup there"),
    ],
)
def test_different_failures_restart_and_say_what_they_resume_from(tmp_path, backup, said):
    errors = ["OSError: disk quota exceeded", "MemoryError: out of memory", "KeyError: 'x'"]
    settings = Settings(start_timeout=0.05, poll_seconds=0.001, max_restarts=2)
    lines: list[str] = []
    with pytest.raises(JobFailed, match=r"2 restart\(s\) are used up"):
        run_job(FailingBackend(errors, backup), spec(tmp_path), settings, lines.append)
    restarts = [line for line in lines if "restarting the whole group" in line]
    assert len(restarts) == 2 and all(said in line for line in restarts)


def test_a_stop_request_ends_the_job(tmp_path):
    """What the Python API's interrupt does: the job stops, its workers are stopped, the record says so."""
    from nnsql.train.spawn.control import Stopped

    settings = Settings(start_timeout=5, poll_seconds=0.01, max_restarts=0)
    settings.stop.set()
    backend = FakeBackend([[[R, R]]])
    with pytest.raises(Stopped):
        run_job(backend, spec(tmp_path), settings, lambda line: None)
    assert backend.stops >= 1 and read_record(tmp_path / "run-1")["state"] == "stopped"
