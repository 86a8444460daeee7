"""Dynamic batching: concurrent requests for one model version are merged into one `session.run`.

A worker thread takes the first waiting request, then keeps collecting until the batch holds
`max_batch` rows or `delay_ms` has passed since that first request, runs the model once on the
concatenated rows and hands each request its slice of the outputs.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

Feeds = dict[str, np.ndarray]
Runner = Callable[[Feeds], Feeds]


@dataclass
class Pending:
    feeds: Feeds
    rows: int
    done: threading.Event = field(default_factory=threading.Event)
    result: Feeds | None = None
    error: BaseException | None = None


class Batcher:
    def __init__(
        self,
        run: Runner,
        max_batch: int,
        delay_ms: float,
        *,
        name: str = "model",
        on_batch: Callable[[int], None] | None = None,
        on_queue: Callable[[int], None] | None = None,
    ) -> None:
        self.run = run
        self.max_batch = max(1, max_batch)
        self.delay = max(0.0, delay_ms) / 1000.0
        self.on_batch = on_batch or (lambda rows: None)
        self.on_queue = on_queue or (lambda change: None)  # requests joined (+) or left (-) the queue
        self.queue: queue.Queue[Pending] = queue.Queue()
        self.closed = threading.Event()
        self.carried: Pending | None = None  # taken from the queue but left for the next batch
        self.thread = threading.Thread(target=self._loop, name=f"batcher-{name}", daemon=True)
        self.thread.start()

    def depth(self) -> int:
        return self.queue.qsize()

    def submit(self, feeds: Feeds, timeout: float = 30.0) -> Feeds:
        rows = len(next(iter(feeds.values())))
        if self.max_batch == 1 or rows >= self.max_batch or self.closed.is_set():
            # closed: the version was removed while this request held it; finish on its loaded session
            self.on_batch(rows)
            return self.run(feeds)
        pending = Pending(feeds, rows)
        self.on_queue(1)
        self.queue.put(pending)
        deadline = time.monotonic() + timeout
        while not pending.done.wait(0.1):
            if not self.thread.is_alive():  # closed and drained just before this request was queued
                return self.run(feeds)
            if time.monotonic() > deadline:
                raise TimeoutError("the model did not answer in time")
        if pending.error is not None:
            raise pending.error
        assert pending.result is not None
        return pending.result

    def close(self) -> None:
        """Stop batching. Requests already queued still run (the loop drains the queue before it ends);
        later ones run directly on the session."""
        self.closed.set()

    def _collect(self) -> list[Pending] | None:
        first, self.carried = self.carried, None
        if first is None:
            try:
                first = self.queue.get(timeout=0.2)
            except queue.Empty:
                return None
        batch, rows = [first], first.rows
        deadline = time.monotonic() + self.delay
        while rows < self.max_batch:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            try:
                item = self.queue.get(timeout=remaining)
            except queue.Empty:
                break
            if rows + item.rows > self.max_batch:
                self.carried = item  # it would overflow this batch: it starts the next one
                break
            batch.append(item)
            rows += item.rows
        return batch

    def _loop(self) -> None:
        while not self.closed.is_set() or self.carried is not None or not self.queue.empty():
            batch = self._collect()
            if batch:
                self._run(batch)

    def _run(self, batch: list[Pending]) -> None:
        self.on_queue(-len(batch))
        try:
            names = list(batch[0].feeds)
            merged = {name: np.concatenate([p.feeds[name] for p in batch]) for name in names}
            outputs = self.run(merged)
            self.on_batch(sum(p.rows for p in batch))
            start = 0
            for pending in batch:
                pending.result = {k: v[start : start + pending.rows] for k, v in outputs.items()}
                start += pending.rows
        except BaseException as error:  # every waiting request gets the failure
            for pending in batch:
                pending.error = error
        for pending in batch:
            pending.done.set()
