"""A Triton model's directory holds files the server never reads (a README.md, a sync tool's state file)
rewritten more often than the settle period. Only what a version is loaded from must settle first
(config.pbtxt, the label files its outputs name, the version's own directory): a file beside them that
keeps changing must not hold a new version back for ever. Found by the hostile pass of issue 32: every
file of the model's directory had to settle, so a README.md rewritten every 0.3 s kept version 2 from
being served at all, with nothing said (through `nnsql serve`, loopback)."""

from __future__ import annotations

import threading
import time

import numpy as np
import requests

from tests.hostile.test_serve_triton_rewrite import (
    ATOL,
    POLL,
    SETTLE_SECONDS,
    SLACK,
    answer,
    scores,
    triton_model,
)
from tests.serve.conftest import ServeProcess
from tests.serve.test_triton_repository import softmax_model

REWRITE = 0.3  # seconds between two rewrites of the README: well within the settle period


def test_a_file_never_read_rewritten_constantly_holds_no_new_version_back(tmp_path):
    repo = tmp_path / "repo"
    first = scores(triton_model(repo, "iris", seed=1))
    readme, done = repo / "iris" / "README.md", threading.Event()

    def rewrite() -> None:
        n = 0
        while not done.wait(REWRITE):
            n += 1
            readme.write_text(f"notes, revision {n}\n")

    server = ServeProcess(repo, "--workers", "1", "--poll-seconds", str(POLL), "--no-access-log")
    writer = threading.Thread(target=rewrite)
    try:
        server.wait_ready()
        with requests.Session() as session:
            assert np.allclose(answer(session, server.url, "iris")[1], first, atol=ATOL), server.log()[-2000:]
            writer.start()
            softmax_model(repo / "iris" / "2" / "model.onnx", 2, 3)  # the newest version is served
            second = scores((repo / "iris" / "2" / "model.onnx").read_bytes())
            assert not np.allclose(first, second, atol=ATOL)
            written = time.monotonic()
            while not np.allclose(answer(session, server.url, "iris")[1], second, atol=ATOL):
                assert time.monotonic() < written + SETTLE_SECONDS + SLACK, (
                    f"version 2 is not served: {server.log()[-2000:]}"
                )
                time.sleep(0.1)
    finally:
        done.set()
        if writer.is_alive():
            writer.join(timeout=10)
        server.stop()
