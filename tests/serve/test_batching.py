"""The batcher merges concurrent requests into one run and hands each its own rows."""

import threading
import time

import numpy as np

from nnsql.serve.batching import Batcher


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


def concurrently(count: int, call) -> list:
    """Run `call(i)` from `count` threads at once; returns each one's result or exception, in order."""
    outcomes: list = [None] * count

    def client(i: int) -> None:
        try:
            outcomes[i] = call(i)
        except Exception as error:
            outcomes[i] = error

    threads = [threading.Thread(target=client, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return outcomes


def test_batch_stops_at_max_rows():
    sizes = []

    def run(feeds):
        sizes.append(len(feeds["x"]))
        return {"y": feeds["x"] + 1}

    batcher = Batcher(run, max_batch=4, delay_ms=300, name="t")
    rows = [1, 3, 1, 3, 2, 1, 1, 3, 1, 2]  # requests of several sizes, none alone over the cap

    def call(i: int):
        return batcher.submit({"x": np.full((rows[i], 2), i, np.float32)})["y"]

    outcomes = concurrently(len(rows), call)
    batcher.close()
    assert max(sizes) == 4 and sum(sizes) == sum(rows)  # merged up to the cap, never past it, each row once
    for i, values in enumerate(outcomes):
        np.testing.assert_array_equal(values, np.full((rows[i], 2), i + 1))


def test_an_error_reaches_every_caller_of_the_batch():
    batches = []

    def fail(feeds):
        batches.append(len(feeds["x"]))
        raise ValueError("model broke")

    batcher = Batcher(fail, max_batch=64, delay_ms=300, name="t")
    outcomes = concurrently(6, lambda i: batcher.submit({"x": np.zeros((1, 2), np.float32)}))
    batcher.close()
    assert max(batches) > 1  # callers shared a failing run
    assert all(isinstance(outcome, ValueError) and "model broke" in str(outcome) for outcome in outcomes)


def test_large_requests_bypass_the_queue():
    calls = []
    batcher = Batcher(
        lambda f: calls.append(len(f["x"])) or {"y": f["x"]}, max_batch=4, delay_ms=1000, name="t"
    )
    started = time.perf_counter()
    batcher.submit({"x": np.zeros((10, 2), np.float32)})
    assert time.perf_counter() - started < 0.5 and calls == [10]
    batcher.close()


def test_a_request_after_close_runs_at_once_on_the_session():
    """A request that took a version just before the version was removed is answered, not left to time out."""
    batcher = Batcher(lambda f: {"y": f["x"] * 3}, max_batch=8, delay_ms=50, name="t")
    batcher.close()
    time.sleep(0.5)  # the batching thread has ended
    started = time.perf_counter()
    result = batcher.submit({"x": np.ones((1, 2), np.float32)}, timeout=2)["y"]
    np.testing.assert_array_equal(result, np.full((1, 2), 3.0))
    assert time.perf_counter() - started < 1
