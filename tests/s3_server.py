"""A test S3 server on loopback: moto's standalone server (`moto[server]`), in a thread of the test
process. It speaks the S3 protocol over real HTTP, so boto3 and the training workers use it as they would
use Ceph RGW or MinIO. Test credentials only; nothing leaves 127.0.0.1."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager

TEST_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "nnsql-test-key",
    "AWS_SECRET_ACCESS_KEY": "nnsql-test-secret",
    "AWS_DEFAULT_REGION": "us-east-1",
}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def s3_test_server() -> Iterator[str]:
    """Start the server; yields its endpoint URL and stops it afterwards."""
    from moto.server import ThreadedMotoServer

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()
