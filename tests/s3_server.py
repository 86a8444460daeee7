"""A test S3 server on loopback: moto's standalone server (`moto[server]`), in a thread of the test
process. It speaks the S3 protocol over real HTTP, so boto3 and the training workers use it as they would
use Ceph RGW or MinIO. Test credentials only; nothing leaves 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.fixtures import free_port

TEST_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "nnsql-test-key",
    "AWS_SECRET_ACCESS_KEY": "nnsql-test-secret",
    "AWS_DEFAULT_REGION": "us-east-1",
}


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


def server_client(endpoint: str, service: str = "s3") -> Any:
    """A boto3 client of the test server (s3, or iam for its permission checks), with the test keys."""
    import boto3

    return boto3.client(
        service,
        endpoint_url=endpoint,
        region_name=TEST_CREDENTIALS["AWS_DEFAULT_REGION"],
        aws_access_key_id=TEST_CREDENTIALS["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=TEST_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
    )


def upload(endpoint: str, bucket: str, prefix: str, paths: Iterable[Path]) -> Any:
    """Create `bucket` and put each file at `prefix/<its name>`; returns the client."""
    s3 = server_client(endpoint)
    s3.create_bucket(Bucket=bucket)
    for path in paths:
        s3.upload_file(str(path), bucket, f"{prefix}/{path.name}")
    return s3
