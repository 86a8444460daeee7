"""`from nnsql.train.spawn import run`: the run the command line starts, from Python or a notebook.

    job = run("train.py", "--epochs", "5", workers=2)   # returns at once; the workers train meanwhile
    model = job.wait()                                  # a progress bar (tqdm.auto), then the model's path
    job.status, job.logs(1), job.model_path, job.run_id
    job.tensorboard()                                   # TensorBoard on the run's event files: its URL
    job.stop()                                          # every worker, and TensorBoard, stopped

Keyword options are the command line's (`env_file="s3.env"`, `backend="kubernetes"`, `pvc="shared"`,
`gpus=1`, `no_preflight=True`, ...), parsed and checked by the same code. Interrupting the kernel while
`wait()` runs stops the run's workers before the KeyboardInterrupt reaches the notebook; a run still going
when Python exits is stopped too.
"""

from __future__ import annotations

import atexit
import contextlib
import io
import os
import re
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from . import __main__ as cli_main
from .backend import Backend, RunSpec, read_record
from .control import Result, Settings, run_job
from .local import PROJECT_ROOT

EPOCH = re.compile(r"\b[Ee]poch (\d+)/(\d+)")


class Refused(ValueError):
    """The run could not start; the message says why (the notes above it say more)."""


def argv_of(script: str | Path, script_args: tuple[str, ...], options: dict[str, Any]) -> list[str]:
    """Keyword options as the command line's flags: True is a flag, a list repeats, None and False omit."""
    argv: list[str] = []
    for name, value in options.items():
        flag = "--" + name.replace("_", "-")
        if value is None or value is False:
            continue
        if value is True:
            argv.append(flag)
        elif isinstance(value, list | tuple):
            for item in value:
                argv += [flag, str(item)]
        else:
            argv += [flag, str(value)]
    return [*argv, str(script), "--", *map(str, script_args)]


class Run:
    """A run going on in a thread of this process; see the module's help."""

    def __init__(self, backend: Backend, spec: RunSpec, settings: Settings) -> None:
        self.backend, self.spec, self.settings = backend, spec, settings
        self.output: list[str] = []  # what the command line would print: progress and the chief's log
        self.result: Result | None = None
        self.error: BaseException | None = None
        self.epoch: tuple[int, int] | None = None
        self._tensorboard: tuple[subprocess.Popen, str] | None = None
        self._thread = threading.Thread(target=self._run, name=spec.run_id, daemon=True)
        atexit.register(self.stop)
        self._thread.start()

    def _run(self) -> None:
        try:
            self.result = run_job(self.backend, self.spec, self.settings, say=self._say)
        except BaseException as error:  # JobFailed, Stopped: kept for wait() to raise
            self.error = error

    def _say(self, line: str) -> None:
        self.output.append(line)
        for done, total in EPOCH.findall(line):
            self.epoch = (int(done), int(total))

    @property
    def run_id(self) -> str:
        return self.spec.run_id

    @property
    def run_dir(self) -> Path:
        return self.spec.run_dir

    @property
    def status(self) -> str:
        """starting, running, succeeded, failed or stopped (runs/<run-id>/run.json's state)."""
        return str(read_record(self.spec.run_dir).get("state", "starting"))

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    @property
    def model_path(self) -> Path | None:
        if self.result is not None:
            return self.result.model
        model = read_record(self.spec.run_dir).get("model")
        return Path(model) if model else None

    def logs(self, worker: int = 0) -> str:
        """Everything worker `worker` printed in the latest attempt (so far, while the run goes on)."""
        if self.running:
            return self.backend.logs(self.spec, worker)
        attempt = max(0, int(read_record(self.spec.run_dir).get("attempt", 1)) - 1)
        log = self.spec.run_dir / f"attempt-{attempt}" / f"worker-{worker}.log"
        return log.read_text(errors="replace") if log.exists() else ""

    def wait(self, timeout: float | None = None, progress: bool = True) -> Path | None:
        """Until the run ends (or `timeout` seconds); the model's path. Raises JobFailed when the run
        failed; an interrupt (Ctrl-C, the notebook's stop button) stops the workers first."""
        from tqdm.auto import tqdm

        deadline = None if timeout is None else time.monotonic() + timeout
        bar = tqdm(desc=self.run_id, unit="epoch", total=None, disable=not progress)
        try:
            while self._thread.is_alive() and (deadline is None or time.monotonic() < deadline):
                self._thread.join(0.5)
                self._show(bar)
        except KeyboardInterrupt:
            self.stop()
            raise
        finally:
            self._show(bar)
            bar.close()
        if self.error is not None:
            raise self.error
        return self.model_path

    def _show(self, bar: Any) -> None:
        if self.epoch:
            done, total = self.epoch
            bar.total = total
            bar.n = total if self.result is not None else max(0, done - 1)
        bar.set_postfix_str(self.status, refresh=False)
        bar.refresh()

    def stop(self) -> None:
        """Stop every worker (the run is recorded as stopped) and TensorBoard, if it was started."""
        self.settings.stop.set()
        self._thread.join()
        if self._tensorboard:
            from .tensorboard import end_group

            process, _ = self._tensorboard
            end_group(process.pid)
            process.wait()
            self._tensorboard = None

    def tensorboard(self, port: int | None = None, host: str = "127.0.0.1") -> str:
        """Start TensorBoard on the run's event files (once); returns its URL."""
        if self._tensorboard:
            return self._tensorboard[1]
        if port is None:
            with socket.socket() as probe:
                probe.bind((host, 0))
                port = probe.getsockname()[1]
        runs = self.spec.run_dir.parent
        command = [sys.executable, "-m", "nnsql.train.spawn", "tensorboard", self.run_id, "--port", str(port)]
        env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT)}
        process = subprocess.Popen(
            [*command, "--host", host], cwd=runs.parent, env=env, start_new_session=True
        )
        url = f"http://{host}:{port}/"
        for _ in range(240):  # TensorBoard takes a few seconds to listen
            if process.poll() is not None:
                raise Refused(
                    f"TensorBoard did not start for {self.run_id} (exit status {process.returncode})"
                )
            try:
                with socket.create_connection((host, port), timeout=1):
                    break
            except OSError:
                time.sleep(0.5)
        self._tensorboard = (process, url)
        return url

    def __repr__(self) -> str:
        return f"<train.spawn run {self.run_id}: {self.status}>"


def parse(argv: list[str]) -> Any:
    """The command line's parse, raising Refused (one line) where argparse would exit the kernel."""
    printed = io.StringIO()
    try:
        with contextlib.redirect_stderr(printed):
            return cli_main.parse(argv)
    except SystemExit:
        lines = printed.getvalue().strip().splitlines() or ["invalid options"]
        message = lines[-1].split(": error: ", 1)[-1]
        if "unrecognized arguments" in message:
            message += (
                " (keywords are train.spawn's options; the script's own arguments follow the script:"
                " run('train.py', '--epochs', '5', workers=2))"
            )
        raise Refused(message) from None


def run(script: str | Path, *script_args: str, runs: str | Path = "runs", **options: Any) -> Run:
    """Start `script` with the command line's options (as keywords); returns at once with a `Run`."""
    args = parse(argv_of(script, script_args, options))
    if args.dry_run or args.delete:
        raise Refused("dry_run and delete are the command line's: nnsql spawn --help")
    try:
        backend, spec, settings = cli_main.prepare(args, Path(runs))
    except cli_main.Refused as refused:
        raise Refused(
            str(refused).removeprefix("error: ") or "refused by the pre-flight check (above)"
        ) from None
    return Run(backend, spec, settings)
