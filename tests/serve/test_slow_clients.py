"""Slow and stalled clients cannot stop the scorer: 64 connections that send part of a request and then
nothing (headers cut short, or a body shorter than its Content-Length) while a normal client keeps getting
answers, over real HTTP against `nnsql serve`."""

from __future__ import annotations

import json
import socket
import time
from http.client import HTTPConnection

import pytest
import requests

from tests.fixtures import wait_for
from tests.sockets import holders

# A Host the server answers for: a foreign one is refused (403) as soon as the headers are complete.
HEADERS_CUT_SHORT = b"POST /v2/models/mnist/infer HTTP/1.1\r\nHost: 127.0.0.1\r\n"
BODY_CUT_SHORT = (
    b"POST /v2/models/mnist/infer HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    b'Content-Length: 100000\r\n\r\n{"inputs": ['
)
ROW = {"inputs": [{"name": "features", "shape": [1, 784], "datatype": "FP32", "data": [0.5] * 784}]}


def taken_in(server, connections: list[socket.socket]) -> bool:
    """Whether the server's processes hold every one of the connections (none left in the accept queue)."""
    held = holders(server.port, connections, [server.process.pid, *server.worker_pids()])
    return held[None] == 0


# The stalled clients come from another loopback address than the normal client, as an attacker's would:
# the scorer caps the connections of one address (`--max-client-connections`, 64), which 64 stalled
# connections from the normal client's own address would fill.
ATTACKER = "127.0.0.2"


def stall(port: int, count: int) -> list[socket.socket]:
    connections = []
    for index in range(count):
        connection = socket.create_connection(("127.0.0.1", port), timeout=5, source_address=(ATTACKER, 0))
        connection.sendall(HEADERS_CUT_SHORT if index % 2 else BODY_CUT_SHORT)
        connections.append(connection)
    return connections


def test_sixty_four_stalled_clients_do_not_stop_a_normal_one(serve_process):
    server = serve_process()
    stalled = stall(server.port, 64)
    try:
        wait_for(lambda: taken_in(server, stalled))
        for _ in range(5):  # bounded: five rounds, each answered within the client's timeout
            assert requests.get(f"{server.url}/v2/health/live", timeout=5).ok
            answer = requests.post(f"{server.url}/v2/models/mnist/infer", json=ROW, timeout=5)
            assert answer.ok and len(answer.json()["outputs"][0]["data"]) == 10
        for connection in stalled:
            connection.setblocking(False)
        assert sum(server_closed(connection) for connection in stalled) == 0  # all 64 still stalled
    finally:
        for connection in stalled:
            connection.close()


def test_eight_clients_under_load_all_get_correct_answers(serve_process):
    """A bounded load test: 8 clients × 40 requests, JSON and binary alternating, every answer checked."""
    import threading

    import numpy as np

    server = serve_process()
    rows = np.random.default_rng(3).random((8, 784), dtype=np.float32)
    reference = requests.post(
        f"{server.url}/v2/models/mnist/infer",
        json={
            "inputs": [
                {"name": "features", "shape": [8, 784], "datatype": "FP32", "data": rows.ravel().tolist()}
            ]
        },
        timeout=10,
    ).json()["outputs"][0]["data"]
    expected = np.array(reference).reshape(8, 10)
    failures: list[str] = []

    def client(index: int) -> None:
        session = requests.Session()
        body = {
            "inputs": [
                {"name": "features", "shape": [1, 784], "datatype": "FP32", "data": rows[index].tolist()}
            ]
        }
        for _ in range(40):
            answer = session.post(f"{server.url}/v2/models/mnist/infer", json=body, timeout=10)
            if answer.status_code != 200:
                failures.append(f"{answer.status_code}: {answer.text[:80]}")
                continue
            got = np.array(answer.json()["outputs"][0]["data"])
            if np.abs(got - expected[index]).max() > 1e-5:  # float32: batch composition may round differently
                failures.append(f"client {index} got other probabilities")

    threads = [threading.Thread(target=client, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []


# 1,000 connections each sending a header byte every 10 s stopped the scorer (0 of 10
# probes answered in 50 s). Here every connection sends a byte a second (the same trickle, faster, so the
# test stays short), from 20 loopback addresses, while a normal client from 127.0.0.1 must keep getting
# answers within 1 s.
TRICKLE = b"POST /v2/models/mnist/infer HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 3000\r\n\r\n"


def more_open_files(count: int) -> None:
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < count:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(count, hard), hard))


def open_from(port: int, address: str) -> socket.socket:
    connection = socket.socket()
    connection.settimeout(5)
    connection.bind((address, 0))
    connection.connect(("127.0.0.1", port))
    connection.setblocking(False)
    return connection


def trickle_round(connections: list[socket.socket], position: int) -> int:
    """One more byte on every connection still open; how many the server has closed."""
    closed = 0
    for connection in connections:
        try:
            connection.send(TRICKLE[position % len(TRICKLE) : position % len(TRICKLE) + 1])
        except OSError:
            closed += 1
    return closed


def normal_client_answers(url: str) -> None:
    """A probe and an inference, each answered within 1 s."""
    assert requests.get(f"{url}/v2/health/live", timeout=1).ok
    answer = requests.post(f"{url}/v2/models/mnist/infer", json=ROW, timeout=1)
    assert answer.ok and len(answer.json()["outputs"][0]["data"]) == 10


def server_closed(connection: socket.socket) -> bool:
    """Whether the server closed this connection, or answered the request it had not finished (and so
    will close it)."""
    try:
        data = connection.recv(4096)
    except BlockingIOError:
        return False
    except OSError:
        return True
    return data == b"" or data.startswith(b"HTTP/")


@pytest.mark.slow
def test_a_thousand_trickling_connections_do_not_stop_a_normal_client(serve_process):
    """Within its limits (request timeout 30 s, 1,000 connections and 64 per address in each worker) the
    flood is held, not dropped: every connection stays open and is held by a worker, so the normal
    client's answers are not bought by closing the slow ones."""
    more_open_files(4096)
    server = serve_process("--workers", "2")
    connections = [open_from(server.port, f"127.0.0.{10 + i % 20}") for i in range(1000)]
    try:
        for second in range(8):  # bounded: 8 rounds of one byte per connection
            started = time.monotonic()
            trickle_round(connections, second)
            normal_client_answers(server.url)
            time.sleep(max(0.0, 1.0 - (time.monotonic() - started)))
        closed = sum(server_closed(connection) for connection in connections)
        held = holders(server.port, connections, server.worker_pids())
        assert closed == 0
        assert held[None] == 0 and sum(held.values()) == 1000
    finally:
        for connection in connections:
            connection.close()


def answered_on_its_own_connection(port: int, body: str) -> tuple[HTTPConnection, list[float]]:
    """One inference on a new kept-alive connection: the connection (still open) and the probabilities."""
    connection = HTTPConnection("127.0.0.1", port, timeout=10)
    connection.request("POST", "/v2/models/mnist/infer", body, {"Content-Type": "application/json"})
    answer = connection.getresponse()
    assert answer.status == 200 and answer.getheader("Connection", "keep-alive") == "keep-alive"
    return connection, json.loads(answer.read())["outputs"][0]["data"]


def test_both_workers_of_the_shared_port_answer(serve_process, cern_mlp_path):
    """Connections to the one port are answered by each of the two worker processes (the one holding the
    connection's server end, read from /proc), each with Keras's probabilities."""
    import keras
    import numpy as np

    server = serve_process("--workers", "2")
    server.wait_for_workers(2)
    workers = server.worker_pids()
    assert len(workers) == 2
    expected = keras.saving.load_model(cern_mlp_path).predict(
        np.array(ROW["inputs"][0]["data"], ndmin=2), verbose=0
    )[0]
    body = json.dumps(ROW)
    answered: dict[int, int] = {}
    connections: list[HTTPConnection] = []
    try:
        for _ in range(400):  # bounded; each connection goes to whichever worker accepts it first
            connection, probabilities = answered_on_its_own_connection(server.port, body)
            connections.append(connection)
            assert np.abs(np.array(probabilities) - expected).max() <= 1e-5  # float32 parity
            (worker,) = holders(server.port, [connection.sock], workers)
            answered[worker] = answered.get(worker, 0) + 1
            if len(answered) == 2:
                break
        assert sorted(answered) == sorted(workers)
    finally:
        for connection in connections:
            connection.close()


def test_one_address_holds_at_most_its_share_of_connections(serve_process):
    more_open_files(4096)
    server = serve_process("--workers", "1", "--max-client-connections", "50")
    connections = [open_from(server.port, "127.0.0.2") for _ in range(300)]
    closed: set[int] = set()  # refused() reads what the server said: each connection is read until it says

    def most_closed() -> bool:
        closed.update(i for i, c in enumerate(connections) if i not in closed and refused(c))
        return len(closed) >= 250  # at most 50 of one address stay open

    try:
        wait_for(most_closed, seconds=30, what="250 of one address's 300 connections closed")
        normal_client_answers(server.url)
    finally:
        for connection in connections:
            connection.close()


def refused(connection: socket.socket) -> bool:
    try:
        data = connection.recv(4096)
    except BlockingIOError:
        return False
    except OSError:
        return True
    return data == b"" or data.startswith(b"HTTP/1.1 429")


def test_at_the_connection_cap_the_oldest_slow_connection_makes_room(serve_process):
    more_open_files(4096)
    server = serve_process("--workers", "1", "--max-connections", "100")
    connections = [open_from(server.port, f"127.0.0.{10 + i % 5}") for i in range(100)]
    try:
        trickle_round(connections, 0)
        wait_for(lambda: taken_in(server, connections))
        for _ in range(3):
            normal_client_answers(server.url)
        assert refused(connections[0])  # the oldest trickling connection was closed for the newcomer
    finally:
        for connection in connections:
            connection.close()


@pytest.mark.slow
def test_a_request_must_arrive_whole_within_the_request_timeout(serve_process):
    """An idle timeout never fires on a client that sends a byte every half second; the total does."""
    server = serve_process("--request-timeout", "2")
    connection = open_from(server.port, "127.0.0.3")
    started = time.monotonic()
    answer = b""
    for position in range(20):  # at most 10 s
        if trickle_round([connection], position):
            break
        time.sleep(0.5)
        try:
            answer += connection.recv(4096)
        except BlockingIOError:
            continue
        if answer:
            break
    connection.close()
    assert answer.startswith(b"HTTP/1.1 408") and time.monotonic() - started < 5


# Bodies were once spooled to disk before the API key and the model's size limit were
# checked (5 stalled unauthenticated uploads held 300 MiB of temporary files).
def headers_only(port: int, length: int, key: str | None = None) -> socket.socket:
    connection = socket.create_connection(("127.0.0.1", port), timeout=5)
    auth = f"Authorization: Bearer {key}\r\n" if key else ""
    connection.sendall(
        f"POST /v2/models/mnist/infer HTTP/1.1\r\nHost: 127.0.0.1\r\n{auth}"
        f"Content-Type: application/json\r\nContent-Length: {length}\r\n\r\n".encode()
    )
    return connection


def answer_of(connection: socket.socket) -> bytes:
    connection.settimeout(3)
    try:
        return connection.recv(4096)
    except TimeoutError:
        return b""


def spooled(directory) -> int:
    return sum(path.stat().st_size for path in directory.rglob("*") if path.is_file())


@pytest.fixture
def keyed_server(serve_process, tmp_path):
    keys = tmp_path / "keys"
    keys.write_text("s3cret\n")
    spool = tmp_path / "tmp"
    spool.mkdir()
    server = serve_process(
        "--api-key-file", str(keys), "--workers", "1", "--max-buffered-mb", "8", env={"TMPDIR": str(spool)}
    )
    return server, spool


def test_an_unauthenticated_upload_is_refused_before_its_body(keyed_server):
    server, spool = keyed_server
    connections = [headers_only(server.port, 50_000_000) for _ in range(5)]
    try:
        for connection in connections:
            assert answer_of(connection).startswith(b"HTTP/1.1 401")
        assert spooled(spool) < 100_000  # no body on disk (libraries leave small logs there)
    finally:
        for connection in connections:
            connection.close()


def test_an_upload_beyond_the_model_limit_is_refused_from_its_headers(keyed_server):
    server, _ = keyed_server
    connection = headers_only(server.port, 30_000_000, key="s3cret")  # mnist takes 19.3 MB of JSON
    try:
        answer = answer_of(connection)
        assert answer.startswith(b"HTTP/1.1 413") and b"mnist" in answer
    finally:
        connection.close()


def test_bodies_held_at_once_stay_within_the_budget(keyed_server):
    server, spool = keyed_server
    first = headers_only(server.port, 6_000_000, key="s3cret")
    first.sendall(b"{" + b" " * 5_000_000)  # then stalls
    time.sleep(0.5)  # until the server has taken those bytes in
    try:
        second = headers_only(server.port, 5_000_000, key="s3cret")  # 10 MB > the 8 MiB budget
        assert answer_of(second).startswith(b"HTTP/1.1 503")
        second.close()
        assert spooled(spool) < 100_000  # no body on disk (libraries leave small logs there)
        normal = requests.post(
            f"{server.url}/v2/models/mnist/infer",
            json=ROW,
            headers={"Authorization": "Bearer s3cret"},
            timeout=5,
        )
        assert normal.ok
    finally:
        first.close()


def test_requests_that_need_no_key_cannot_hold_the_body_budget(keyed_server):
    """A preflight, a health check or the page needs no key and no body. Their declared bodies used to
    reserve the worker's budget (up to --max-body-mb for a preflight) until the request timeout: a few
    connections without a key then got every inference a 503."""
    server, _ = keyed_server
    declared = [
        ("OPTIONS", "/v2/models/mnist/infer", 8_000_000),  # the whole 8 MiB budget in one
        *[("GET", "/v2/health/ready", 1_000_000)] * 8,  # or in eight
        ("POST", "/", 500_000),
    ]
    connections = []
    try:
        for method, path, length in declared:
            connection = socket.create_connection(("127.0.0.1", server.port), timeout=5)
            connection.sendall(
                f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {length}\r\n\r\n".encode()
            )
            connections.append(connection)
            assert answer_of(connection).startswith(b"HTTP/1.1 413"), (method, path)
        normal = requests.post(
            f"{server.url}/v2/models/mnist/infer",
            json=ROW,
            headers={"Authorization": "Bearer s3cret"},
            timeout=5,
        )
        assert normal.status_code == 200
    finally:
        for connection in connections:
            connection.close()


def test_connections_that_declare_bodies_and_send_nothing_hold_no_budget(keyed_server):
    """A declared Content-Length costs a client nothing. Reserved from the headers, two idle connections
    declaring 4 MiB each held the whole 8 MiB budget until the request timeout, and every other upload
    got 503 (without an API key on the server: 14 such connections per worker at the defaults)."""
    server, _ = keyed_server
    idle = [headers_only(server.port, 4_194_000, key="s3cret") for _ in range(2)]  # the 8 MiB less 608 bytes
    try:
        time.sleep(0.5)
        normal = requests.post(
            f"{server.url}/v2/models/mnist/infer",
            json=ROW,
            headers={"Authorization": "Bearer s3cret"},
            timeout=5,
        )
        assert normal.status_code == 200
    finally:
        for connection in idle:
            connection.close()
