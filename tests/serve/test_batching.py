"""The batcher merges concurrent requests into one run and hands each its own rows."""

import threading
import time

import numpy as np
import pytest

from serve.batching import Batcher


def test_concurrent_requests_share_one_run_and_get_their_rows():
    sizes = []

    def run(feeds):
        sizes.append(len(feeds["x"]))
        time.sleep(0.01)
        return {"y": feeds["x"] * 2}

    batcher = Batcher(run, max_batch=64, delay_ms=200, name="t")
    results = {}

    def client(i: int) -> None:
        results[i] = batcher.submit({"x": np.full((2, 3), i, dtype=np.float32)})["y"]

    threads = [threading.Thread(target=client, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    batcher.close()
    assert max(sizes) > 2 and sum(sizes) == 16  # merged, and every row ran exactly once
    for i, values in results.items():
        np.testing.assert_array_equal(values, np.full((2, 3), 2 * i))


def test_batch_stops_at_max_rows_and_errors_reach_every_caller():
    def fail(feeds):
        raise ValueError("model broke")

    batcher = Batcher(fail, max_batch=8, delay_ms=1, name="t")
    with pytest.raises(ValueError, match="model broke"):
        batcher.submit({"x": np.zeros((1, 2), np.float32)})
    batcher.close()


def test_large_requests_bypass_the_queue():
    calls = []
    batcher = Batcher(
        lambda f: calls.append(len(f["x"])) or {"y": f["x"]}, max_batch=4, delay_ms=1000, name="t"
    )
    started = time.perf_counter()
    batcher.submit({"x": np.zeros((10, 2), np.float32)})
    assert time.perf_counter() - started < 0.5 and calls == [10]
    batcher.close()
