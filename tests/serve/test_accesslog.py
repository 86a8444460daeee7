"""The access log is written by a thread of its own: a stalled log stream never holds a request, every
line is written, in order, by the time the server has stopped, and an idle writer does not wake."""

from __future__ import annotations

import io
import json
import logging
import os
import threading
import time
from pathlib import Path

import requests

from nnsql.serve import accesslog


class StalledStream(io.StringIO):
    """A log destination whose writes wait until `flowing` is set (a full pipe, a slow disk)."""

    def __init__(self) -> None:
        super().__init__()
        self.flowing = threading.Event()

    def write(self, text: str) -> int:
        self.flowing.wait(timeout=60)
        return super().write(text)


def paths(text: str) -> list[str]:
    return [json.loads(line.split("] ", 1)[-1])["path"] for line in text.splitlines() if '"path"' in line]


def test_a_stalled_log_stream_holds_no_request(live, caplog):
    caplog.set_level(logging.INFO, logger="serve.access")
    stream = StalledStream()
    listener = accesslog.start(stream)
    try:
        asked = [f"/v2/models/mnist/versions/{n}/ready" for n in range(1, 21)]
        for path in asked:  # each answered although no line could be written yet
            assert requests.get(f"{live.url}{path}", timeout=10).status_code in (200, 404)
        assert stream.getvalue() == ""
        stream.flowing.set()
    finally:
        accesslog.stop(listener)
    assert paths(stream.getvalue()) == asked


def test_every_line_is_written_in_order_by_the_end_of_the_server(serve_process):
    server = serve_process("--workers", "1")
    asked = [f"/v2/models/mnist/versions/{n}/ready" for n in range(1, 301)]
    with requests.Session() as session:
        for path in asked:
            session.get(f"{server.url}{path}", timeout=10)
    logged = [
        p for p in paths(server.stop()) if p.startswith("/v2/models/")
    ]  # at once: lines still queued must be written before the worker ends
    assert logged == asked


class CountingStream(io.StringIO):
    """A log destination that counts the writes it receives."""

    def __init__(self) -> None:
        super().__init__()
        self.writes = 0

    def write(self, text: str) -> int:
        self.writes += 1
        return super().write(text)


def test_queued_lines_are_written_together_each_a_json_line(caplog):
    """The entries queued between two turns of the writer go out in one write, not a write per line;
    each line is the line format around the entry's JSON, in ASCII (a client's path may hold a C1
    control character, which some terminals obey)."""
    caplog.set_level(logging.INFO, logger="serve.access")
    stream = CountingStream()
    writer = accesslog.start(stream, "[worker 3] %(message)s")
    paths_sent = [f"/v2/models/m{n}/infer" for n in range(200)] + ["/v2/\x9b31m\u202e"]
    for path in paths_sent:
        accesslog.log(method="POST", path=path, status=200, ms=1.5, model="m", bytes_in=10, bytes_out=20)
    accesslog.stop(writer)
    lines = stream.getvalue().splitlines()
    assert len(lines) == len(paths_sent) and stream.writes <= 3
    assert all(line.startswith("[worker 3] {") and line.isascii() for line in lines)
    assert [json.loads(line.split("] ", 1)[1])["path"] for line in lines] == paths_sent
    assert json.loads(lines[0].split("] ", 1)[1]) == {
        "method": "POST",
        "path": "/v2/models/m0/infer",
        "status": 200,
        "ms": 1.5,
        "model": "m",
        "bytes_in": 10,
        "bytes_out": 20,
    }


def test_a_line_format_with_other_fields_is_kept(caplog):
    caplog.set_level(logging.INFO, logger="serve.access")
    stream = io.StringIO()
    writer = accesslog.start(stream, "%(levelname)s %(name)s %(message)s")
    accesslog.log(method="GET", path="/v2", status=200)
    logging.getLogger("serve.access").warning("said through the logger")
    accesslog.stop(writer)
    assert stream.getvalue().splitlines() == [
        'INFO serve.access {"method":"GET","path":"/v2","status":200}',
        "WARNING serve.access said through the logger",
    ]


def test_an_entry_orjson_refuses_is_written_and_the_writer_goes_on(caplog):
    """A model directory whose name is not UTF-8 gives the model a name with lone surrogates, which orjson
    refuses: the entry naming it used to end the writer thread, and every later line was lost."""
    caplog.set_level(logging.INFO, logger="serve.access")
    stream = io.StringIO()
    writer = accesslog.start(stream)
    accesslog.log(method="POST", path="/score", status=200, model=os.fsdecode(b"m\xff"))
    accesslog.log(method="GET", path="/v2/health/live", status=200, model=None)
    accesslog.stop(writer)
    lines = stream.getvalue().splitlines()
    assert [json.loads(line)["path"] for line in lines] == ["/score", "/v2/health/live"]
    assert all(line.isascii() for line in lines) and '"m\\udcff"' in lines[0]


def test_a_record_that_is_not_utf8_loses_no_line_of_its_turn(caplog, tmp_path):
    """A record said through the logger with a lone surrogate (a model directory whose name is not
    UTF-8) is written escaped. Encoding the writer's turn used to fail on it, and every line of that
    turn was lost."""
    caplog.set_level(logging.INFO, logger="serve.access")
    name = os.fsdecode(b"m\xff")
    with open(tmp_path / "access.log", "w") as output:
        writer = accesslog.start(output, "[worker 0] %(message)s")
        accesslog.log(method="GET", path="/v2", status=200)
        logging.getLogger("serve.access").warning("model %s not loaded", name)
        accesslog.log(method="GET", path="/v2/health/live", status=200)
        accesslog.stop(writer)
    assert (tmp_path / "access.log").read_bytes().decode("ascii").splitlines() == [
        '[worker 0] {"method":"GET","path":"/v2","status":200}',
        "[worker 0] model m\\udcff not loaded",
        '[worker 0] {"method":"GET","path":"/v2/health/live","status":200}',
    ]


def wakeups(thread: threading.Thread) -> int:
    """The times a thread of this process was switched out so far (Linux /proc)."""
    status = Path(f"/proc/self/task/{thread.native_id}/status").read_text()
    return sum(int(line.split()[1]) for line in status.splitlines() if "ctxt_switches:" in line)


def written(stream: io.StringIO, count: int) -> bool:
    """Wait until `count` lines are in the stream (at most a minute: a loaded machine)."""
    deadline = time.monotonic() + 60
    while stream.getvalue().count("\n") < count and time.monotonic() < deadline:
        time.sleep(0.05)
    return stream.getvalue().count("\n") >= count


def test_an_idle_writer_sleeps_until_an_entry_comes(caplog):
    """Once its lines are written, the writer sleeps until the next entry: it used to wake every 50 ms,
    each time taking Python's lock from the request threads of a busy worker."""
    caplog.set_level(logging.INFO, logger="serve.access")
    stream = io.StringIO()
    writer = accesslog.start(stream)
    try:
        accesslog.log(method="GET", path="/v2", status=200)
        assert written(stream, 1)
        seen = []
        for _ in range(10):  # a second: the writer is asleep by the second half, whatever the load
            seen.append(wakeups(writer.thread))
            time.sleep(0.1)
        accesslog.log(method="GET", path="/v2/health/live", status=200)
        assert written(stream, 2)  # and the next entry wakes it
    finally:
        accesslog.stop(writer)
    assert seen[-1] == seen[-6], seen
    assert paths(stream.getvalue()) == ["/v2", "/v2/health/live"]


def test_a_full_turn_of_entries_is_written_before_the_turn_ends(caplog, monkeypatch):
    """The writer's turn is long (few turns: each takes Python's lock from the requests); entries that
    fill a turn wake it early, so a burst is written rather than dropped past MAX_PENDING."""
    caplog.set_level(logging.INFO, logger="serve.access")
    monkeypatch.setattr(accesslog, "POLL_SECONDS", 3600.0)
    stream = io.StringIO()
    writer = accesslog.start(stream)
    try:
        asked = [f"/v2/models/m{n}/ready" for n in range(accesslog.FULL_TURN)]
        for path in asked:
            accesslog.log(method="GET", path=path, status=200)
        assert written(stream, len(asked))  # within the hour's turn
    finally:
        accesslog.stop(writer)
    assert paths(stream.getvalue()) == asked


def test_an_output_that_takes_nothing_does_not_hold_the_shutdown(monkeypatch):
    """A pipe nobody reads: stopping the log gives up on the waiting lines after STOP_SECONDS instead
    of waiting for ever (a worker's shutdown waits on it)."""
    monkeypatch.setattr(accesslog, "STOP_SECONDS", 0.5, raising=False)
    reader, writing_end = os.pipe()
    stream = os.fdopen(writing_end, "w")
    previous = accesslog.ACCESS_LOG.level
    accesslog.ACCESS_LOG.setLevel(logging.INFO)
    writer = accesslog.start(stream)
    stopping = threading.Thread(target=accesslog.stop, args=(writer,), daemon=True)
    try:
        for number in range(5_000):  # far more than a pipe holds: the writer blocks in its write
            accesslog.log(method="GET", path=f"/{number:0>200}", status=404)
        stopping.start()
        stopping.join(60)  # a bound on the test, not a timing: the code before never returned
        assert not stopping.is_alive(), "stopping the access log waited on an output that takes nothing"
        assert accesslog.waiting() == 0
    finally:
        draining = threading.Thread(target=read_to_the_end, args=(reader,), daemon=True)
        draining.start()  # unblocks the writer's thread, which then ends
        writer.thread.join(10)
        accesslog.ACCESS_LOG.setLevel(previous)
        stream.close()
        draining.join(10)
        os.close(reader)


def read_to_the_end(descriptor: int) -> None:
    while os.read(descriptor, 1 << 16):
        pass


def test_a_left_over_wake_up_does_not_end_the_writers_turn(monkeypatch):
    """Requests that saw the writer asleep as it woke leave wake-ups behind; each one ended the turn, so
    at one connection the writer wrote a line or two at a time (a write and a GIL hand-over a request)."""
    monkeypatch.setattr(accesslog, "POLL_SECONDS", 2.0)
    previous = accesslog.ACCESS_LOG.level
    accesslog.ACCESS_LOG.setLevel(logging.INFO)
    stream = CountingStream()
    writer = accesslog.start(stream)
    try:
        accesslog.log(method="GET", path="/0", status=200)  # wakes the writer: its turn begins
        for number in range(1, 6):
            time.sleep(0.05)
            writer.wake.put(None)  # what a request that read `asleep` late leaves behind
            accesslog.log(method="GET", path=f"/{number}", status=200)
        written_during_the_turn = stream.writes
    finally:
        accesslog.stop(writer)
        accesslog.ACCESS_LOG.setLevel(previous)
    assert written_during_the_turn == 0, "the turn ended on a left-over wake-up"
    assert paths(stream.getvalue()) == [f"/{n}" for n in range(6)]
