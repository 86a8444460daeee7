"""Slow and stalled clients cannot stop the scorer: 64 connections that send part of a request and then
nothing (headers cut short, or a body shorter than its Content-Length) while a normal client keeps getting
answers, over real HTTP against `python -m serve`."""

from __future__ import annotations

import socket
import time

import requests

HEADERS_CUT_SHORT = b"POST /v2/models/mnist/infer HTTP/1.1\r\nHost: x\r\n"
BODY_CUT_SHORT = (
    b"POST /v2/models/mnist/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    b'Content-Length: 100000\r\n\r\n{"inputs": ['
)
ROW = {"inputs": [{"name": "features", "shape": [1, 784], "datatype": "FP32", "data": [0.5] * 784}]}


def stall(port: int, count: int) -> list[socket.socket]:
    connections = []
    for index in range(count):
        connection = socket.create_connection(("127.0.0.1", port), timeout=5)
        connection.sendall(HEADERS_CUT_SHORT if index % 2 else BODY_CUT_SHORT)
        connections.append(connection)
    return connections


def test_sixty_four_stalled_clients_do_not_stop_a_normal_one(serve_process):
    server = serve_process()
    stalled = stall(server.port, 64)
    try:
        time.sleep(1.0)  # let the server take them all in
        for _ in range(5):  # bounded: five rounds, each answered within the client's timeout
            assert requests.get(f"{server.url}/v2/health/live", timeout=5).ok
            answer = requests.post(f"{server.url}/v2/models/mnist/infer", json=ROW, timeout=5)
            assert answer.ok and len(answer.json()["outputs"][0]["data"]) == 10
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
