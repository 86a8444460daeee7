"""Benchmark: the HTTP scorer under load, next to a raw in-process onnxruntime loop (the ceiling).

Starts `python -m serve` (waitress, one process) on a free port and drives it with wrk (Debian's
package) from a separate process: single-row MNIST requests over KServe V2, JSON and binary payloads,
at 1, 8 and 32 concurrent connections, and requests of 256 rows. In the same run, measures onnxruntime
alone: single-row session.run calls per second and rows per second in batches of 256. Prints requests/s
and p50/p99 latency with ratios to the ceiling and writes bench/results/serve_http.json. Goal (2 cores):
≥ 1,500 req/s and p99 ≤ 10 ms at 8 clients; batched throughput within 2× of the raw ceiling.

    python -m bench.serve_http [--seconds 5] [--threads 8]
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import requests

RESULTS = Path(__file__).parent / "results"
REPO_ROOT = Path(__file__).resolve().parents[1]
CLIENTS = (1, 8, 32)
BATCH_ROWS = 256  # rows per request in the batched-throughput measurement
LUA = """wrk.method = "POST"
local file = io.open("{body}", "rb")
wrk.body = file:read("*a")
file:close()
wrk.headers["Content-Type"] = "{content_type}"
{extra}
"""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def build_repository(directory: Path) -> Path:
    import keras

    from export.onnx.__main__ import export
    from train.mnist import build_model

    keras.utils.set_random_seed(0)
    model_path = directory / "model.keras"
    build_model(784, 10, 1e-3).save(model_path)
    export(model_path, directory / "repo", "mnist", 50, 1e-5)
    return directory / "repo"


def binary_body(path: Path, rows: np.ndarray) -> str:
    """Write a V2 binary request; returns the Lua line that sets its header length."""
    raw = rows.astype("<f4").tobytes()
    tensor = {"name": "features", "shape": list(rows.shape), "datatype": "FP32"}
    header = json.dumps(
        {
            "inputs": [{**tensor, "parameters": {"binary_data_size": len(raw)}}],
            "outputs": [{"name": "probabilities", "parameters": {"binary_data": True}}],
        }
    ).encode()
    path.write_bytes(header + raw)
    return f'wrk.headers["Inference-Header-Content-Length"] = "{len(header)}"'


def payloads(directory: Path) -> dict[str, tuple[Path, str, str]]:
    """name → (body file, content type, extra Lua): one MNIST row as JSON and as binary."""
    row = np.random.default_rng(0).random((1, 784), dtype=np.float32)
    tensor = {"name": "features", "shape": [1, 784], "datatype": "FP32", "data": row.ravel().tolist()}
    (directory / "json.body").write_text(json.dumps({"inputs": [tensor]}))
    length = binary_body(directory / "binary.body", row)
    return {
        "json": (directory / "json.body", "application/json", ""),
        "binary": (directory / "binary.body", "application/octet-stream", length),
    }


def found(pattern: str, text: str) -> str:
    """The first group of `pattern` in wrk's output; a clear error when wrk printed something else."""
    match = re.search(pattern, text, re.MULTILINE)
    if match is None:
        raise RuntimeError(f"wrk's output has no {pattern!r}: {text[:200]!r}")
    return match[1]


def parse_wrk(output: str) -> dict:
    def millis(text: str) -> float:
        value, unit = found(r"^([\d.]+)(?:us|ms|s)$", text), found(r"^[\d.]+(us|ms|s)$", text)
        return float(value) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]

    rate = float(found(r"Requests/sec:\s+([\d.]+)", output))
    p50 = millis(found(r"^\s+50%\s+(\S+)", output))
    p99 = millis(found(r"^\s+99%\s+(\S+)", output))
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", output)
    return {
        "requests_per_second": round(rate, 1),
        "p50_ms": p50,
        "p99_ms": p99,
        "errors": int(errors[1]) if errors else 0,
    }


def run_wrk(url: str, script: Path, clients: int, seconds: int) -> dict:
    threads = min(clients, 2)
    command = ["wrk", f"-t{threads}", f"-c{clients}", f"-d{seconds}s", "--latency", "-s", str(script), url]
    return parse_wrk(subprocess.run(command, capture_output=True, text=True, check=True).stdout)


def raw_ceiling(repo: Path, seconds: float) -> dict:
    import onnxruntime

    session = onnxruntime.InferenceSession(
        str(repo / "mnist" / "1" / "model.onnx"), providers=["CPUExecutionProvider"]
    )
    row = np.random.default_rng(0).random((1, 784), dtype=np.float32)
    batch = np.random.default_rng(0).random((BATCH_ROWS, 784), dtype=np.float32)

    def rate(feed: np.ndarray) -> float:
        calls, started = 0, time.perf_counter()
        while time.perf_counter() - started < seconds:
            session.run(None, {"features": feed})
            calls += 1
        return calls / (time.perf_counter() - started)

    return {
        "single_row_calls_per_second": round(rate(row), 1),
        "batched_rows_per_second": round(BATCH_ROWS * rate(batch), 1),
    }


def start_server(repo: Path, port: int, args: argparse.Namespace) -> subprocess.Popen:
    command = [sys.executable, "-m", "serve", "--repo", str(repo), "--port", str(port)]
    command += ["--threads", str(args.threads)]
    command += ["--max-batch-delay-ms", str(args.max_batch_delay_ms)]
    process = subprocess.Popen(command, cwd=REPO_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if requests.get(f"http://127.0.0.1:{port}/v2/health/ready", timeout=1).ok:
                return process
        except requests.ConnectionError:
            time.sleep(0.2)
    process.kill()
    raise RuntimeError("the server did not start")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.serve_http", description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=5, help="per measurement")
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--max-batch-delay-ms", type=float, default=0.0)
    args = parser.parse_args(argv)
    if not shutil.which("wrk"):
        print("error: wrk is not installed (apt-get install wrk)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as scratch:
        directory = Path(scratch)
        repo = build_repository(directory)
        ceiling = raw_ceiling(repo, args.seconds)
        port = free_port()
        server = start_server(repo, port, args)
        url = f"http://127.0.0.1:{port}/v2/models/mnist/infer"
        results: dict[str, dict] = {}
        try:
            for name, (body, content_type, extra) in payloads(directory).items():
                script = directory / f"{name}.lua"
                script.write_text(LUA.format(body=body, content_type=content_type, extra=extra))
                for clients in CLIENTS:
                    results[f"{name}_{clients}_clients"] = run_wrk(url, script, clients, args.seconds)
            rows = np.random.default_rng(1).random((BATCH_ROWS, 784), dtype=np.float32)
            extra = binary_body(directory / "batch.body", rows)
            script = directory / "batch.lua"
            body = directory / "batch.body"
            script.write_text(LUA.format(body=body, content_type="application/octet-stream", extra=extra))
            batched = run_wrk(url, script, 8, args.seconds)
            batched["rows_per_second"] = round(batched["requests_per_second"] * BATCH_ROWS, 1)
            results[f"binary_{BATCH_ROWS}_rows_8_clients"] = batched
        finally:
            server.terminate()
            server.wait(timeout=30)
    report(results, ceiling, args)
    return 0


def report(results: dict, ceiling: dict, args: argparse.Namespace) -> None:
    single = ceiling["single_row_calls_per_second"]
    print(
        f"raw onnxruntime: {single:,.0f} single-row calls/s, "
        f"{ceiling['batched_rows_per_second']:,.0f} rows/s in batches of {BATCH_ROWS}"
    )
    print(f"server: waitress, one process × {args.threads} threads; load: wrk, {args.seconds}s each")
    print(
        f"{'payload/clients':<22}{'req/s':>10}{'p50 ms':>9}{'p99 ms':>9}{'ceiling/server':>16}{'errors':>8}"
    )
    for name, figures in results.items():
        # single-row payloads against raw single-row calls; batched ones against raw batched rows
        if "rows_per_second" in figures:
            ratio = ceiling["batched_rows_per_second"] / figures["rows_per_second"]
        else:
            ratio = ceiling["single_row_calls_per_second"] / figures["requests_per_second"]
        print(
            f"{name:<22}{figures['requests_per_second']:>10,.0f}{figures['p50_ms']:>9.2f}{figures['p99_ms']:>9.2f}"
            f"{ratio:>16.1f}{figures['errors']:>8}"
        )
    at8 = results["json_8_clients"]
    print(
        f"goal at 8 clients (JSON): ≥1,500 req/s → {at8['requests_per_second']:,.0f}; "
        f"p99 ≤10 ms → {at8['p99_ms']:.2f} ms"
    )
    batched = results[f"binary_{BATCH_ROWS}_rows_8_clients"]
    print(
        f"batched: {batched['rows_per_second']:,.0f} rows/s served vs "
        f"{ceiling['batched_rows_per_second']:,.0f} raw "
        f"(goal: within 2×, i.e. ratio ≤ 2)"
    )
    RESULTS.mkdir(exist_ok=True)
    document = {"ceiling": ceiling, "results": results, "settings": vars(args)}
    (RESULTS / "serve_http.json").write_text(json.dumps(document, indent=2) + "\n")
    print(f"wrote {RESULTS / 'serve_http.json'}")


if __name__ == "__main__":
    sys.exit(main())
