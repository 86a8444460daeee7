"""Benchmark: `nnsql serve` side by side with Triton and MLServer, same ONNX model, same wrk load.

Exports the MNIST MLP (784 → 100 → 10) with the project's exporter and serves it these ways at once:
- nnsql: `nnsql serve` with its defaults (workers = cores, the access log on);
- nnsql-nolog: the same with `--no-access-log`, which is what the peers do by default: the pair gives
  the access log's cost;
- Triton: PyTriton 0.7.0 (Triton's C++ HTTP front end and dynamic batcher, onnxruntime in the bound
  Python function), in VENVS/triton, made with Debian's python3.11 (PyTriton's Python backend stub
  links Debian's libpython3.11);
- MLServer 1.7.1 with an onnxruntime runtime (bench/peers/mlserver_onnx.py), in VENVS/mlserver
  (uvloop 0.21: MLServer 1.7.1's inference pool fails on 0.23).
A peer runs when its virtual environment is installed (`--install-peers` makes them, never in the
project's environment); VENVS is `--venvs` (default build/bench-venvs).
wrk (Debian's package) drives one server at a time, the servers taking turns, for `--rounds` rounds:
the machine is shared, so figures are printed as ranges over rounds and ratios are of medians.
Loads: one row per request in V2 JSON at 1, 16 and 64 connections; 256 rows per request in V2 JSON and
in the binary tensor extension (MLServer has none) at 8 connections. Raw onnxruntime in this process
gives the ceiling for batches of 256. Prints the goals (nnsql's p99 ≤ Triton's and req/s ≥ Triton's at
1, 16 and 64 connections; the access log costing ≤ 5 % of the CPU per request, judged on the median
of pairs where nnsql ran with and without it back to back: one from each round, then `--log-pairs`
shorter pairs per one-row load, each server first in half of them) as met or missed, and writes
bench/results/serve_http.json.

    nnsql bench serve_http [--seconds 5] [--rounds 3] [--only nnsql,nnsql-nolog,triton,mlserver]
                           [--log-pairs 6] [--pair-seconds 3] [--venvs DIR] [--install-peers]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import requests

from nnsql import quiet
from nnsql.files import import_root
from nnsql.train.spawn.local import free_ports

RESULTS = Path(__file__).parent / "results"
REPO_ROOT = import_root()
VENVS = REPO_ROOT / "build" / "bench-venvs"
ONE_ROW_CONNECTIONS = (1, 16, 64)
ACCESS_LOG_GOAL = 0.05  # the default access log may cost at most this share of req/s
PEERS = Path(__file__).parent / "peers"
BATCH_ROWS = 256
PEER_PACKAGES = {
    "triton": ("/usr/bin/python3.11", ["nvidia-pytriton==0.7.0", "onnxruntime==1.30.0"]),
    "mlserver": (sys.executable, ["mlserver==1.7.1", "uvloop==0.21.0", "onnxruntime==1.30.0"]),
}
LUA = """wrk.method = "POST"
local file = io.open("{body}", "rb")
wrk.body = file:read("*a")
file:close()
wrk.headers["Content-Type"] = "{content_type}"
{extra}
"""


@dataclass
class Load:
    name: str
    body: Path
    content_type: str
    connections: int
    rows: int
    extra: str = ""  # Lua: extra headers


@dataclass
class Contender:
    name: str
    command: list[str]
    port: int
    binary: bool  # takes the binary tensor extension
    cwd: Path = REPO_ROOT
    process: subprocess.Popen | None = None
    figures: dict[str, list[dict]] = field(default_factory=dict)
    pairs: dict[str, list[dict]] = field(default_factory=dict)  # the access log's extra pairs, by load

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v2/models/mnist/infer"


def free_port() -> int:
    """A loopback port outside the range outgoing connections take, as nnsql spawn picks its workers'."""
    return free_ports(1)[0]


def peer_venv(name: str, venvs: Path, install: bool) -> Path | None:
    """The peer's virtual environment's bin directory under `venvs`, None when not installed (made and
    filled here with `install`)."""
    python, packages = PEER_PACKAGES[name]
    venv = venvs / name
    stamp = venv / ".installed"
    if stamp.exists() and stamp.read_text().split() == packages:
        return venv / "bin"
    if not install:
        print(f"{name}: not installed in {venv} (--install-peers installs {' '.join(packages)})", flush=True)
        return None
    if not Path(python).exists():
        raise SystemExit(f"error: the {name} venv needs {python} (Debian: apt-get install python3.11-venv)")
    print(f"installing {', '.join(packages)} into {venv} (once)", flush=True)
    shutil.rmtree(venv, ignore_errors=True)
    subprocess.run([python, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    subprocess.run([*pip, *packages], check=True)
    stamp.write_text(" ".join(packages))
    return venv / "bin"


def build_repository(directory: Path) -> Path:
    import keras

    from nnsql.export.onnx.compile import export
    from nnsql.train.mnist import build_model

    keras.utils.set_random_seed(0)
    model_path = directory / "model.keras"
    build_model(784, 10, 1e-3).save(model_path)
    export(model_path, directory / "repo", "mnist", 50, 1e-5)
    return directory / "repo"


def contenders(names: list[str], repo: Path, scratch: Path, args: argparse.Namespace) -> list[Contender]:
    model = repo / "mnist" / "1" / "model.onnx"
    made = []
    for name in names:
        port = free_port()
        if name in ("nnsql", "nnsql-nolog"):
            command = [sys.executable, "-m", "nnsql.serve", "--repo", str(repo), "--port", str(port)]
            command += args.serve_args.split() + (["--no-access-log"] if name == "nnsql-nolog" else [])
            made.append(Contender(name, command, port, binary=True))
            continue
        bin_dir = peer_venv(name, Path(args.venvs), args.install_peers)
        if bin_dir is None:
            continue
        if name == "triton":
            ports = [str(port), str(free_port()), str(free_port())]
            command = [str(bin_dir / "python"), str(PEERS / "pytriton_mnist.py"), str(model), *ports]
            made.append(Contender(name, command, port, True))
        elif name == "mlserver":
            made.append(mlserver(bin_dir, model, port, scratch / "mlserver"))
    return made


def mlserver(bin_dir: Path, model: Path, port: int, directory: Path) -> Contender:
    (directory / "mnist").mkdir(parents=True)
    shutil.copy(PEERS / "mlserver_onnx.py", directory / "mnist")
    settings = {"http_port": port, "grpc_port": free_port(), "metrics_port": free_port()}
    (directory / "settings.json").write_text(json.dumps(settings))
    model_settings = {
        "name": "mnist",
        "implementation": "mlserver_onnx.OnnxRuntime",
        "parameters": {"uri": str(model)},
    }
    (directory / "mnist" / "model-settings.json").write_text(json.dumps(model_settings))
    return Contender(
        "mlserver", [str(bin_dir / "mlserver"), "start", str(directory)], port, False, cwd=directory
    )


def start(contender: Contender, log: Path) -> None:
    with log.open("wb") as output:
        contender.process = subprocess.Popen(
            contender.command, cwd=contender.cwd, stdout=output, stderr=subprocess.STDOUT
        )
    deadline = time.monotonic() + 180
    ready = contender.url.replace("/infer", "/ready")
    while time.monotonic() < deadline:
        try:
            if requests.get(ready, timeout=1).ok:
                return
        except requests.RequestException:
            pass
        if contender.process.poll() is not None:
            break
        time.sleep(0.5)
    raise RuntimeError(f"{contender.name} did not start: see {log}")


def stop(contender: Contender) -> None:
    if contender.process is not None and contender.process.poll() is None:
        contender.process.terminate()
        try:
            contender.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            contender.process.kill()
            contender.process.wait()


def json_body(path: Path, rows: np.ndarray) -> None:
    tensor = {
        "name": "features",
        "shape": list(rows.shape),
        "datatype": "FP32",
        "data": rows.ravel().tolist(),
    }
    path.write_text(json.dumps({"inputs": [tensor]}))


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


def loads(directory: Path) -> list[Load]:
    rng = np.random.default_rng(0)
    row, batch = rng.random((1, 784), dtype=np.float32), rng.random((BATCH_ROWS, 784), dtype=np.float32)
    json_body(directory / "row.json", row)
    json_body(directory / "batch.json", batch)
    length = binary_body(directory / "batch.bin", batch)
    one_row = [
        Load(f"1 row, JSON, {n} conn.", directory / "row.json", "application/json", n, 1)
        for n in ONE_ROW_CONNECTIONS
    ]
    return [
        *one_row,
        Load(
            f"{BATCH_ROWS} rows, JSON, 8 conn.", directory / "batch.json", "application/json", 8, BATCH_ROWS
        ),
        Load(
            f"{BATCH_ROWS} rows, binary, 8 conn.",
            directory / "batch.bin",
            "application/octet-stream",
            8,
            BATCH_ROWS,
            length,
        ),
    ]


def check_answer(contender: Contender, body: Path, expected: np.ndarray) -> None:
    """Each server's probabilities for the one-row body agree with raw onnxruntime (float32: 1e-5)."""
    answer = requests.post(
        contender.url, data=body.read_bytes(), headers={"Content-Type": "application/json"}
    )
    answer.raise_for_status()
    got = np.array(answer.json()["outputs"][0]["data"], dtype=np.float32).reshape(expected.shape)
    if np.abs(got - expected).max() > 1e-5:
        raise RuntimeError(f"{contender.name} answers other probabilities than onnxruntime")


def found(pattern: str, text: str) -> str:
    match = re.search(pattern, text, re.MULTILINE)
    if match is None:
        raise RuntimeError(f"wrk's output has no {pattern!r}: {text[:200]!r}")
    return match[1]


def millis(text: str) -> float:
    value, unit = float(found(r"^([\d.]+)", text)), found(r"(us|ms|s)$", text)
    return value * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]


def process_tree(pid: int) -> list[int]:
    """The process and all its descendants (Linux /proc)."""
    found, pending = [], [pid]
    while pending:
        current = pending.pop()
        found.append(current)
        for task in Path(f"/proc/{current}/task").glob("*/children"):
            with contextlib.suppress(OSError):  # ended meanwhile
                pending.extend(int(child) for child in task.read_text().split())
    return found


def cpu_seconds(pid: int) -> float:
    """CPU time (user and system) used so far by the server's processes: on a shared machine the CPU a
    request costs is steadier than the requests per second, which depend on what else runs."""
    total = 0
    for member in process_tree(pid):
        try:
            fields = Path(f"/proc/{member}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / os.sysconf("SC_CLK_TCK")


def run_wrk(url: str, script: Path, connections: int, seconds: int) -> dict:
    threads = min(2, connections)  # wrk needs a connection per thread
    command = [
        "wrk",
        f"-t{threads}",
        f"-c{connections}",
        f"-d{seconds}s",
        "--latency",
        "-s",
        str(script),
        url,
    ]
    output = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", output)
    return {
        "requests": int(found(r"(\d+) requests in", output)),
        "requests_per_second": float(found(r"Requests/sec:\s+([\d.]+)", output)),
        "p50_ms": millis(found(r"^\s+50%\s+(\S+)", output)),
        "p99_ms": millis(found(r"^\s+99%\s+(\S+)", output)),
        "errors": int(errors[1]) if errors else 0,
    }


def raw_ceiling(model: Path, seconds: float) -> float:
    """Raw onnxruntime rows per second in batches of 256 (default session options: every core)."""
    import onnxruntime

    session = onnxruntime.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    batch = np.random.default_rng(0).random((BATCH_ROWS, 784), dtype=np.float32)
    calls, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        session.run(None, {"features": batch})
        calls += 1
    return BATCH_ROWS * calls / (time.perf_counter() - started)


def measure(
    servers: list[Contender], work: list[Load], directory: Path, args: argparse.Namespace, model: Path
) -> list[float]:
    """Every load on every server, the servers taking turns (their order rotates each round); raw
    onnxruntime takes a turn too in each round of the binary batches. Returns raw rows/s per round."""
    raw: list[float] = []
    for load in work:
        script = directory / f"{abs(hash(load.name))}.lua"
        script.write_text(LUA.format(body=load.body, content_type=load.content_type, extra=load.extra))
        for round_index in range(args.rounds):
            for server in turn_order(servers, round_index):
                if load.content_type == "application/octet-stream" and not server.binary:
                    continue
                figures = timed_run(server, script, load, args.seconds)
                server.figures.setdefault(load.name, []).append(figures)
            if load.content_type == "application/octet-stream":
                raw.append(raw_ceiling(model, args.seconds))
                print(f"  {load.name:<26} {'raw ORT':<9} {raw[-1]:>9,.0f} rows/s", flush=True)
    return raw


def timed_run(server: Contender, script: Path, load: Load, seconds: int) -> dict:
    """One run of wrk on the server, with the CPU its processes used per request wrk counted, and the
    machine's load average as it ended; printed as a line."""
    assert server.process is not None
    used = cpu_seconds(server.process.pid)
    figures = run_wrk(server.url, script, load.connections, seconds)
    used = cpu_seconds(server.process.pid) - used
    figures["rows_per_second"] = figures["requests_per_second"] * load.rows
    figures["cpu_ms_per_request"] = 1000 * used / figures["requests"] if figures["requests"] else 0.0
    figures["load_average"] = os.getloadavg()[0]
    print(
        f"  {load.name:<26} {server.name:<11} {figures['requests_per_second']:>9,.0f} req/s "
        f"p50 {figures['p50_ms']:>6.1f} ms  p99 {figures['p99_ms']:>7.1f} ms  "
        f"CPU {figures['cpu_ms_per_request']:.3f} ms/req  errors {figures['errors']}  "
        f"load {figures['load_average']:.1f}",
        flush=True,
    )
    return figures


def log_pairs(servers: list[Contender], work: list[Load], directory: Path, args: argparse.Namespace) -> None:
    """`--log-pairs` more pairs of runs of `--pair-seconds` per one-row load, nnsql and nnsql-nolog back
    to back, each first in every other pair: on a machine shared with other work, one pair moves by
    ±10 % or more, far more than the log's own cost, and the median of a few more pairs is steadier."""
    by_name = {server.name: server for server in servers}
    ours, quiet = by_name.get("nnsql"), by_name.get("nnsql-nolog")
    if ours is None or quiet is None:
        return
    for load in (load for load in work if load.rows == 1):
        script = directory / f"{abs(hash(load.name))}.lua"
        for index in range(args.log_pairs):
            for server in (ours, quiet) if index % 2 == 0 else (quiet, ours):
                server.pairs.setdefault(load.name, []).append(
                    timed_run(server, script, load, args.pair_seconds)
                )


def turn_order(servers: list[Contender], round_index: int) -> list[Contender]:
    """The servers' order in a round: rotated by one each round, with nnsql-nolog right after nnsql in
    even rounds and right before it in odd ones, so that each round gives a pair run back to back, under
    the same load of the machine, in turn first and second."""
    shift = round_index % len(servers)
    turn = servers[shift:] + servers[:shift]
    names = [server.name for server in turn]
    if "nnsql" not in names or "nnsql-nolog" not in names:
        return turn
    quiet = turn.pop(names.index("nnsql-nolog"))
    ours = [server.name for server in turn].index("nnsql")
    turn.insert(ours + 1 if round_index % 2 == 0 else ours, quiet)
    return turn


def paired(ours: list[dict], quiet: list[dict], key: str) -> list[float]:
    """Round by round, `key` with the access log over `key` without it (the pair ran back to back)."""
    return [a[key] / b[key] for a, b in zip(ours, quiet, strict=False) if a[key] and b[key]]


def log_line_cost(count: int = 20_000) -> float:
    """µs of CPU per access log line, measured apart from any server: the request's part (the entry
    queued) and the writer thread's (the line made and written), to /dev/null."""
    import logging
    import resource

    from nnsql.serve import accesslog

    def cpu() -> float:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime + usage.ru_stime

    logger = logging.getLogger("serve.access")
    level, logger.level = logger.level, logging.INFO
    with open(os.devnull, "w") as sink:
        writer = accesslog.start(sink, "[worker 0] %(message)s")
        started = cpu()
        for index in range(count):
            accesslog.log(
                method="POST",
                path="/v2/models/mnist/infer",
                status=200,
                ms=1.234,
                model="mnist",
                bytes_in=15_949,
                bytes_out=322,
            )
            if index % 1000 == 999:  # the entries waiting are bounded: let the writer take them
                while accesslog.waiting():  # not a fixed sleep: the process's other threads run meanwhile
                    time.sleep(0.001)
        accesslog.stop(writer)
        used = cpu() - started
    logger.level = level
    return 1e6 * used / count


def median(server: Contender, load: str, key: str) -> float | None:
    runs = server.figures.get(load)
    return statistics.median(run[key] for run in runs) if runs else None


def spread(server: Contender, load: str, key: str) -> str:
    runs = server.figures.get(load)
    if not runs:
        return "–"
    low, high = min(run[key] for run in runs), max(run[key] for run in runs)
    form = "{:,.0f}" if not key.endswith("_ms") else "{:.1f}"
    return form.format(low) if round(low) == round(high) else f"{form.format(low)}–{form.format(high)}"


def print_ratios(ours: Contender, by_name: dict[str, Contender], work: list[Load], ceiling: float) -> None:
    """Ratios of medians: nnsql to each peer (throughput, and p99 side by side), and to raw onnxruntime."""
    for load in work:
        mine = median(ours, load.name, "requests_per_second") or 0.0
        for peer in ("triton", "mlserver"):
            theirs = by_name.get(peer)
            other = median(theirs, load.name, "requests_per_second") if theirs else None
            if mine and other and theirs:
                p99 = (median(ours, load.name, "p99_ms") or 0.0, median(theirs, load.name, "p99_ms") or 0.0)
                print(
                    f"{load.name}: nnsql / {peer} = {mine / other:.2f}; p99 {p99[0]:.1f} vs {p99[1]:.1f} ms"
                )
        if load.rows > 1 and load.content_type == "application/octet-stream":
            print(
                f"{load.name}: nnsql rows/s / raw onnxruntime = {mine * load.rows / ceiling:.2f} (goal ≥ 0.5)"
            )


def verdict(met: bool) -> str:
    return "met" if met else "MISSED"


def print_goals(by_name: dict[str, Contender], work: list[Load]) -> None:
    """The goals on one-row requests, from medians: nnsql (defaults) against Triton, and the access
    log's cost (nnsql against nnsql-nolog)."""
    ours, triton, quiet = by_name.get("nnsql"), by_name.get("triton"), by_name.get("nnsql-nolog")
    for load in (load for load in work if load.rows == 1):
        if ours is None:
            return
        rate, p99 = median(ours, load.name, "requests_per_second"), median(ours, load.name, "p99_ms")
        if triton is not None and rate and p99:
            their_rate = median(triton, load.name, "requests_per_second") or 0.0
            their_p99 = median(triton, load.name, "p99_ms") or 0.0
            print(
                f"goal, {load.name}: nnsql p99 {p99:.1f} ms vs Triton {their_p99:.1f} ms, {rate:,.0f} vs "
                f"{their_rate:,.0f} req/s: {verdict(p99 <= their_p99 and rate >= their_rate)}"
            )
        if quiet is not None:
            print_log_cost(ours, quiet, load)


def print_log_cost(ours: Contender, quiet: Contender, load: Load) -> None:
    """The access log's cost from the pairs of runs (nnsql, then nnsql-nolog or the other way round,
    back to back in each round): in CPU per request (steadier on a shared machine; the goal is judged
    on its median) and in req/s (what the goal names, but it moves with the machine's other load), each
    as the median of the rounds' ratios and their range."""
    rounds = paired(ours.figures.get(load.name, []), quiet.figures.get(load.name, []), "cpu_ms_per_request")
    mine = ours.figures.get(load.name, []) + ours.pairs.get(load.name, [])
    theirs = quiet.figures.get(load.name, []) + quiet.pairs.get(load.name, [])
    cpu = [ratio - 1 for ratio in paired(mine, theirs, "cpu_ms_per_request")]
    rate = [1 - ratio for ratio in paired(mine, theirs, "requests_per_second")]
    if not (cpu and rate):
        return
    extra = statistics.median(cpu)
    machine = [run["load_average"] for run in mine + theirs if "load_average" in run]
    loads = f", load average {min(machine):.1f}–{max(machine):.1f}" if machine else ""
    print(
        f"goal, {load.name}: the access log costs {extra:+.1%} CPU per request ({min(cpu):+.1%} to "
        f"{max(cpu):+.1%} over {len(cpu)} pairs: {len(rounds)} from the rounds, median "
        f"{statistics.median(rounds) - 1 if rounds else float('nan'):+.1%}, {len(cpu) - len(rounds)} more"
        f"{loads}) and {statistics.median(rate):.1%} of req/s ({min(rate):+.1%} to {max(rate):+.1%}); "
        f"goal ≤ {ACCESS_LOG_GOAL:.0%} CPU: {verdict(extra <= ACCESS_LOG_GOAL)}"
    )


def print_line_cost(line: float, quiet: Contender | None, work: list[Load]) -> None:
    """One access log line's CPU, measured apart, as a share of a one-row request's CPU without the log."""
    cpu = median(quiet, work[0].name, "cpu_ms_per_request") if quiet is not None else None
    text = f"access log, measured apart: {line:.1f} µs of CPU per line"
    if cpu:
        text += (
            f" = {line / (1000 * cpu):.1%} of a request's CPU without the log ({cpu:.3f} ms, {work[0].name})"
        )
    print(text)


def report(servers: list[Contender], work: list[Load], raw: list[float], args: argparse.Namespace) -> None:
    ceiling = statistics.median(raw) if raw else float("nan")
    by_name = {server.name: server for server in servers}
    print(f"\nrounds: {args.rounds} × {args.seconds} s per load and server; ranges over rounds")
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the end")
    print("| load | " + " | ".join(f"{s.name} req/s (p50 / p99 ms)" for s in servers) + " |")
    print("|---|" + "---|" * len(servers))
    for load in work:
        cells = [
            f"{spread(s, load.name, 'requests_per_second')} "
            f"({spread(s, load.name, 'p50_ms')} / {spread(s, load.name, 'p99_ms')})"
            for s in servers
        ]
        print(f"| {load.name} | " + " | ".join(cells) + " |")
    if raw:
        print(f"raw onnxruntime, batches of {BATCH_ROWS}: {min(raw):,.0f}–{max(raw):,.0f} rows/s")
    ours = by_name.get("nnsql")
    if ours is not None:
        print_ratios(ours, by_name, work, ceiling)
    print_goals(by_name, work)
    print_line_cost(args.log_line_us, by_name.get("nnsql-nolog"), work)
    RESULTS.mkdir(exist_ok=True)
    document = {
        "settings": vars(args),
        "raw_onnxruntime_rows_per_second": raw,
        "figures": {server.name: server.figures for server in servers},
        "access_log_pairs": {server.name: server.pairs for server in servers if server.pairs},
    }
    (RESULTS / "serve_http.json").write_text(json.dumps(document, indent=2) + "\n")
    print(f"wrote {RESULTS / 'serve_http.json'}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="nnsql bench serve_http", description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=5, help="per run of wrk")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--only", default="nnsql,nnsql-nolog,triton,mlserver", help="servers to run, comma-separated"
    )
    parser.add_argument(
        "--log-pairs", type=int, default=6, help="more pairs for the access log's cost, per one-row load"
    )
    parser.add_argument("--pair-seconds", type=int, default=3, help="per run of wrk in those pairs")
    parser.add_argument("--venvs", default=str(VENVS), help="where the peers' virtual environments are")
    parser.add_argument(
        "--install-peers", action="store_true", help="install missing peers into --venvs (once)"
    )
    parser.add_argument(
        "--serve-args", default="", help="extra arguments for nnsql serve, e.g. '--threads 8'"
    )
    args = parser.parse_args(argv)
    if not shutil.which("wrk"):
        print("error: wrk is not installed (apt-get install wrk)", file=sys.stderr)
        return 2
    names = [name.strip() for name in args.only.split(",") if name.strip()]
    args.log_line_us = log_line_cost()  # before TensorFlow is loaded: its idle threads cost CPU too
    with tempfile.TemporaryDirectory() as scratch:
        directory = Path(scratch)
        repo = build_repository(directory)
        work = loads(directory)
        model = repo / "mnist" / "1" / "model.onnx"
        servers = contenders(names, repo, directory, args)
        import onnxruntime

        session = onnxruntime.InferenceSession(str(model))
        row = np.array(json.loads((directory / "row.json").read_text())["inputs"][0]["data"], np.float32)
        expected = session.run(None, {"features": row.reshape(1, 784)})[0]
        try:
            for server in servers:
                start(server, directory / f"{server.name}.log")
                check_answer(server, directory / "row.json", expected)
            raw = measure(servers, work, directory, args, model)
            log_pairs(servers, work, directory, args)
        finally:
            for server in servers:
                stop(server)
    report(servers, work, raw, args)
    return 0


if __name__ == "__main__":
    quiet.install()  # TensorFlow's start-up lines only with --verbose
    sys.exit(main())
