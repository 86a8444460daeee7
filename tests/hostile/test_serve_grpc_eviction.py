"""Clients without a key, from many addresses, open connections without end at the gRPC port's total
cap, so that at every look of the guard a connection must go, the oldest idle first. A client with a
key holds one channel and calls between the waves: its idle connection is closed again and again, and
each of its calls must still be answered (grpcio reconnects a channel whose idle connection was closed,
before sending the call).

Found by the hostile pass of issue 32: 36 of 40 keyed calls ended UNAVAILABLE. At the total cap the
guard closed the oldest idle connection, the keyed client's (it connected first); its channel reconnected
as a newcomer, and the flood had filled grpcio's own cap again before the next look. Now idle
connections that never carried a call needing a key (health checks, open to all, do not count) are
closed first: a keyless client cannot earn that."""

from __future__ import annotations

import threading
import time

import grpc
import pytest

from tests.hostile.test_serve_grpc_connections import CONNECTIONS, KEY, METADATA, PER_CLIENT, bare, server
from tests.serve.conftest import onnx_repo  # noqa: F401  (the fixture, used below)

pytestmark = pytest.mark.slow
CALLS = 40  # the keyed client's calls, one every PAUSE seconds: several looks of the guard apart
PAUSE = 0.3


def test_keyless_waves_at_the_total_cap_fail_no_call_of_a_keyed_client(onnx_repo, tmp_path):  # noqa: F811
    args = ("--max-connections", str(CONNECTIONS), "--max-client-connections", str(PER_CLIENT))
    with server(onnx_repo, tmp_path, *args) as (process, port, held):
        hosts = [f"127.0.1.{n}" for n in range(2, 60)]
        done = threading.Event()

        def flood() -> None:
            n = 0
            while not done.is_set():
                held.append(bare(port, hosts[n % len(hosts)]))
                n += 1
                if len(held) > 3 * CONNECTIONS:  # those the guard closed: let them go
                    held.pop(0).close()
                time.sleep(0.002)

        options = [("grpc.use_local_subchannel_pool", 1)]
        with grpc.insecure_channel(f"127.0.0.1:{port}", options=options) as channel:
            stub = channel.unary_unary(METADATA, request_serializer=bytes, response_deserializer=bytes)
            stub(b"", timeout=10, metadata=(("x-api-key", KEY),))
            attacker = threading.Thread(target=flood)
            attacker.start()
            failed = []
            try:
                for _ in range(CALLS):
                    time.sleep(PAUSE)
                    try:
                        stub(b"", timeout=10, metadata=(("x-api-key", KEY),))
                    except grpc.RpcError as error:
                        failed.append(error.code().name)
            finally:
                done.set()
                attacker.join(timeout=30)
        assert failed == [], (
            f"{len(failed)} of {CALLS} keyed calls failed: {failed[:5]}\n{process.log()[-1500:]}"
        )
