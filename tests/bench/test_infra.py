"""nnsql bench infra: the report's arithmetic, real sweeps through train.spawn with local workers, and
the Kubernetes dry run."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
import yaml

from nnsql.bench.infra import __main__ as infra
from nnsql.bench.infra import report
from nnsql.bench.infra.worker import RESULT_MARK
from tests.conftest import REPO

REQUIRED = ("model", "data", "workers", "images_per_second", "images_per_second_per_worker", "speedup")
REQUIRED += ("efficiency", "step_ms_p50", "step_ms_p95")
SMALL = ["--image-size", "32", "--batch-size", "4", "--steps", "3", "--warmup", "1"]


def worker_result(index: int, steps: list[float], examples: int = 8) -> dict:
    return {
        "worker": index,
        "workers": 2,
        "replicas": 1,
        "examples_per_step": examples,
        "step_seconds": steps,
        "pipeline": {"examples_per_second": 100.0 + index, "mb_per_second": 2.0 + index},
        "parameters": 1000,
    }


RUN = {"model": "alexnet", "data": "real", "batch_size": 8, "image_size": 32, "source": None}


def test_rows_sum_the_workers_and_scale_against_the_smallest_run():
    one = report.measured_row({**RUN, "workers": 1}, [worker_result(0, [0.1, 0.1, 0.2])])
    two = report.measured_row(
        {**RUN, "workers": 2}, [worker_result(0, [0.2] * 3), worker_result(1, [0.25] * 3)]
    )
    single, double = report.with_scaling([one, two])
    assert single["images_per_second"] == pytest.approx(8 * 3 / 0.4)
    assert double["images_per_second"] == pytest.approx(8 / 0.2 + 8 / 0.25)
    assert double["images_per_second_per_worker"] == pytest.approx(double["images_per_second"] / 2)
    assert double["speedup"] == pytest.approx(double["images_per_second"] / single["images_per_second"], 1e-3)
    assert double["efficiency"] == pytest.approx(double["speedup"] / 2, 1e-3)
    assert double["step_ms_p50"] == pytest.approx(225.0)  # pooled over both workers' six steps
    assert double["input_images_per_second"] == pytest.approx(201.0)
    assert double["input_mb_per_second"] == pytest.approx(2.5)
    assert single["speedup"] == single["efficiency"] == 1.0


def test_a_sweep_without_one_worker_scales_from_the_smallest_runs_rate_per_worker():
    two = report.measured_row({**RUN, "workers": 2}, [worker_result(0, [0.1]), worker_result(1, [0.1])])
    four = report.measured_row({**RUN, "workers": 4}, [worker_result(i, [0.2]) for i in range(4)])
    _, scaled = report.with_scaling([two, four])
    assert scaled["baseline_workers"] == 2
    assert scaled["speedup"] == pytest.approx(2.0)  # 160 img/s against 80 per worker
    assert scaled["efficiency"] == pytest.approx(0.5)


def test_comparison_puts_runs_side_by_side_with_ratios_to_the_first():
    rows = report.with_scaling([report.measured_row({**RUN, "workers": 1}, [worker_result(0, [0.1])])])
    faster = [{**rows[0], "images_per_second": rows[0]["images_per_second"] * 3}]
    text = report.comparison([{"label": "laptop", "rows": rows}, {"label": "gpu-node", "rows": faster}])
    header, line = text.splitlines()
    assert "laptop img/s" in header and "gpu-node / laptop" in header
    assert line.split()[-1] == "3.00"


def test_bad_options_are_one_line(capsys, tmp_path):
    with pytest.raises(SystemExit) as exited:
        infra.main(["--workers", "0,2"])
    assert exited.value.code == 2
    assert "--workers takes counts of 1 or more" in capsys.readouterr().err.splitlines()[-1]
    (tmp_path / "other.json").write_text("[]")
    assert infra.main(["compare", str(tmp_path / "other.json"), str(tmp_path / "other.json")]) == 2
    assert "not a bench.infra results file" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exited:
        infra.main(["--eval-examples", "0"])
    assert exited.value.code == 2
    assert "--eval-examples takes a count of 1 or more" in capsys.readouterr().err.splitlines()[-1]


def test_real_data_on_kubernetes_needs_data_the_pods_can_read(capsys):
    assert infra.main(["--model", "alexnet", "--data", "real", "--backend", "kubernetes"]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("error: real data on Kubernetes") and "\n" not in error


def test_kubernetes_dry_run_prints_every_runs_manifests(capsys):
    argv = ["--workers", "1,2", "--data", "synthetic,real", "--backend", "kubernetes", "--dry-run"]
    assert infra.main(argv) == 0
    captured = capsys.readouterr()
    assert "placeholder" in captured.err
    documents = [d for d in yaml.safe_load_all(captured.out) if d]
    jobs = [d for d in documents if d["kind"] == "Job"]
    assert sorted(job["spec"]["completions"] for job in jobs) == [1, 1, 1, 1, 2, 2, 2, 2]
    commands = json.dumps([job["spec"]["template"]["spec"] for job in jobs])
    for expected in ("resnet50", "alexnet", "synthetic", "s3://YOUR-BUCKET/images/*.tfrecord", "--steps"):
        assert expected in commands
    assert captured.out.count("# bench.infra run ") == 8


def worker_rates(run_dir: Path) -> dict[tuple, float]:
    """Each run's total recomputed from the raw worker logs, independently of bench.infra.report."""
    totals: dict[tuple, float] = {}
    for log in run_dir.glob("spawn/*/attempt-*/worker-*.log"):
        if log.parents[1].is_symlink():  # runs/latest: the newest run again, under another name
            continue
        for line in log.read_text().splitlines():
            if RESULT_MARK in line:
                result = json.loads(line.split(RESULT_MARK, 1)[1])
                argv = json.loads((log.parents[1] / "run.json").read_text())["args"]
                key = (argv[argv.index("--model") + 1], argv[argv.index("--data") + 1], result["workers"])
                rate = result["examples_per_step"] * len(result["step_seconds"]) / sum(result["step_seconds"])
                totals[key] = totals.get(key, 0.0) + rate
    return totals


def records(pattern: Path) -> int:
    """How many records the TFRecord files matching `pattern` hold, read from their framing."""
    count = 0
    for path in pattern.parent.glob(pattern.name):
        data, offset = path.read_bytes(), 0
        while offset < len(data):  # a record: its length (8 bytes), a CRC (4), the data, a CRC (4)
            offset += 16 + int.from_bytes(data[offset : offset + 8], "little")
            count += 1
    return count


def read_outputs(runs: Path) -> tuple[Path, list[dict], dict]:
    (run_dir,) = runs.iterdir()
    out = run_dir / "bench"
    with (out / "results.csv").open() as table:
        rows = list(csv.DictReader(table))
    return run_dir, rows, json.loads((out / "results.json").read_text())


def check_consistent(run_dir: Path, rows: list[dict], document: dict) -> None:
    assert set(REQUIRED) <= set(rows[0])
    assert [r["workers"] for r in rows] == [str(r["workers"]) for r in document["rows"]]
    recomputed = worker_rates(run_dir)
    for row in rows:
        key = (row["model"], row["data"], int(row["workers"]))
        assert float(row["images_per_second"]) == pytest.approx(recomputed[key], abs=0.01)
        assert float(row["efficiency"]) == pytest.approx(
            float(row["speedup"]) / int(row["workers"]), abs=2e-3
        )
        assert 0 < float(row["step_ms_p50"]) <= float(row["step_ms_p95"])
    png = (run_dir / "bench" / "throughput.png").read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) > 10_000


@pytest.mark.slow
def test_one_command_sweeps_workers_and_data_and_writes_every_output(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(REPO)
    argv = ["--model", "alexnet", "--workers", "1,2", "--data", "synthetic,real", *SMALL]
    # the target's held-out set: each check scores it all, a model call per batch of 4, on every worker
    target = ["--target-accuracy", "0.05", "--eval-every", "2", "--max-train-steps", "6"]
    target += ["--eval-examples", "64"]
    assert infra.main([*argv, *target, "--real-examples", "256", "--runs", str(tmp_path)]) == 0
    run_dir, rows, document = read_outputs(tmp_path)
    fashion = run_dir / "data" / "fashion"
    assert records(fashion / "train" / "*.tfrecord") == 256 and records(fashion / "test" / "*.tfrecord") == 64
    assert [(r["data"], r["workers"]) for r in rows] == [
        ("synthetic", "1"),
        ("synthetic", "2"),
        ("real", "1"),
        ("real", "2"),
    ]
    check_consistent(run_dir, rows, document)
    real = [r for r in rows if r["data"] == "real"]
    assert all(float(r["input_mb_per_second"]) > 0 and float(r["input_images_per_second"]) > 0 for r in real)
    assert all(float(r["seconds_to_target"]) > 0 and r["target_accuracy"] == "0.05" for r in real)
    printed = capsys.readouterr().out
    assert "img/s total" in printed and "results.csv" in printed
    earlier = run_dir / "bench" / "results.json"
    assert infra.main(["compare", str(earlier), str(earlier)]) == 0
    assert capsys.readouterr().out.splitlines()[1].split()[-1] == "1.00"


@pytest.mark.slow
def test_the_inclusive_classifier_on_hep_tfrecords_and_synthetic_events(tmp_path, monkeypatch):
    monkeypatch.chdir(REPO)
    argv = ["--model", "inclusive", "--workers", "1", "--data", "synthetic,real", "--batch-size", "2"]
    argv += ["--steps", "2", "--warmup", "1", "--hep-events", "32", "--runs", str(tmp_path)]
    assert infra.main(argv) == 0
    run_dir, rows, document = read_outputs(tmp_path)
    assert [(r["model"], r["data"]) for r in rows] == [("inclusive", "synthetic"), ("inclusive", "real")]
    check_consistent(run_dir, rows, document)
    assert rows[0]["image_size"] == ""  # events, not images
