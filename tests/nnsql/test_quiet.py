"""TensorFlow's start-up lines hidden from every command unless --verbose (nnsql/quiet.py), with anything
else written to stderr meanwhile kept."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import warnings

import pytest

from nnsql import quiet
from tests.conftest import REPO

NOISE_LINES = [
    "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
    "I0000 00:00:1795471840.438119   18286 port.cc:153] oneDNN custom operations are on. You may see ...",
    "I0000 00:00:1795471840.438433   18286 cudart_stub.cc:31] Could not find cuda drivers on your machine.",
    "E0000 00:00:1795471853.068525   18286 cuda_platform.cc:52] failed call to cuInit: INTERNAL: CUDA error",
    "To enable the following instructions: AVX2 FMA, in other operations, rebuild TensorFlow with the "
    "appropriate compiler flags.",
]
KEPT_LINES = [
    "E0000 00:00:1795471853.068525   18286 op_kernel.cc:1830] OP_REQUIRES failed: a real error",
    "Traceback (most recent call last):",
    "UserWarning: a warning of the user's own",
]


def test_the_filter_drops_tensorflow_lines_and_keeps_the_rest():
    """In a process of its own, as a command runs: C++ writes straight to file descriptor 2, Python's
    through sys.stderr. (Under pytest's capfd, Python's writes and the forwarder's raced for the capture
    file and lines came back cut.)"""
    lines = [*NOISE_LINES, *KEPT_LINES]
    code = (
        "import os, sys\n"
        "from nnsql import quiet\n"
        "with quiet.filtered_stderr():\n"
        f"    for line in {lines!r}:\n"
        "        os.write(2, (line + '\\n').encode())\n"
        "    print('written by Python', file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stderr.splitlines() == [*KEPT_LINES, "written by Python"]


def test_verbose_is_the_commands_own_option_not_the_scripts():
    argv = ["-w", "2", "--verbose", "job.py", "--", "--verbose"]
    assert quiet.verbose_requested(argv)
    assert quiet.without_verbose(argv) == ["-w", "2", "job.py", "--", "--verbose"]
    assert not quiet.verbose_requested(["job.py", "--", "--verbose"])


def import_tensorflow(env: dict[str, str]) -> str:
    code = "from nnsql import quiet; quiet.install(); import tensorflow as tf; print(tf.constant(2.0) * 2)"
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0 and "4.0" in result.stdout, result.stderr
    return result.stderr


@pytest.mark.slow
def test_importing_tensorflow_in_a_command_prints_nothing_unless_verbose():
    """The same import with NNSQL_VERBOSE=1 shows the lines (this machine has no GPU: cuInit fails)."""
    env = {k: v for k, v in os.environ.items() if k not in ("TF_CPP_MIN_LOG_LEVEL", quiet.VERBOSE_ENV)}
    assert import_tensorflow(env) == ""
    verbose = import_tensorflow({**env, quiet.VERBOSE_ENV: "1"})
    assert "oneDNN custom operations" in verbose or "cuda" in verbose


def test_tensorflows_python_warnings_are_hidden_and_its_errors_kept(caplog):
    """A SavedModel exported by `nnsql export` printed two dozen 'WARNING:tensorflow:Value in checkpoint
    could not be found in the restored object: (root).optimizer...' lines after 'published'."""
    loggers = [logging.getLogger(name) for name in ("absl", "tensorflow")]
    levels = [logger.level for logger in loggers]
    try:
        quiet.quiet_python_loggers()
        with caplog.at_level(logging.NOTSET):  # the root's level: only the loggers' own levels filter
            for logger in loggers:
                logger.warning("Value in checkpoint could not be found in the restored object")
                logger.error("a real error")
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)
    assert [record.getMessage() for record in caplog.records] == ["a real error", "a real error"]


def test_a_librarys_warning_about_its_own_code_is_hidden_unless_verbose(monkeypatch):
    """Every `nnsql export onnx` printed Keras's 'FutureWarning: In the future `np.object` will be
    defined ...' with a line of Keras's source, under numpy 2 (the lock's)."""
    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))  # install()'s import hook stays here
    monkeypatch.setattr(quiet, "VERBOSE", quiet.VERBOSE)
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", os.environ.get("TF_CPP_MIN_LOG_LEVEL", "0"))
    message = "In the future `np.object` will be defined as the corresponding NumPy scalar."
    for argv, shown in (([], 0), (["--verbose"], 1)):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            quiet.install(argv)
            warnings.warn_explicit(message, FutureWarning, "tf2onnx_lib.py", 21, module="keras")
            warnings.warn("a warning of the user's own", UserWarning, stacklevel=1)
        assert [str(w.message) for w in caught] == [message] * shown + ["a warning of the user's own"]


def test_spawn_echoes_worker_logs_without_tensorflows_start_up_lines(monkeypatch):
    """`nnsql spawn` printed every worker's 'E0000 ... failed call to cuInit: UNKNOWN ERROR' line (and the
    oneDNN notes) in the middle of the physicist's training output."""
    from nnsql.train.spawn.control import LogFollower

    log = "\n".join([*NOISE_LINES, "Epoch 1/3", *KEPT_LINES]) + "\n"
    for verbose, expected in ((False, ["Epoch 1/3", *KEPT_LINES]), (True, log.splitlines())):
        monkeypatch.setattr(quiet, "VERBOSE", verbose)
        said: list[str] = []
        LogFollower(said.append).follow(log)
        assert said == [f"[worker 0] {line}" for line in expected]
