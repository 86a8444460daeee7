"""Hostile object stores: bucket keys that would write outside the staging cache (on moto's S3 server), and
endpoints that stall or trickle (a server written here, on loopback). Each ends in one line naming the
key or object, writes nothing outside the cache and leaves no process behind."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from nnsql.train.data import local_files
from nnsql.train.objectstore import DataError
from tests.s3_server import TEST_CREDENTIALS, s3_test_server, upload

BUCKET = "physics"
LONG = "a" * 300


@pytest.fixture
def s3_env(monkeypatch, tmp_path):
    for key, value in TEST_CREDENTIALS.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.delenv("TF_CONFIG", raising=False)
    return tmp_path


@pytest.fixture(scope="module")
def hostile_bucket():
    """A bucket whose keys try to leave the cache, each under a prefix of its own."""
    with s3_test_server() as url:
        s3 = upload(url, BUCKET, "good", [])
        for prefix, key in KEYS.items():
            s3.put_object(Bucket=BUCKET, Key=key, Body=b"hostile " + prefix.encode())
        yield url


KEYS = {
    "up": "up/../../../escaped.tfrecord",
    "dot": "dot/./x.tfrecord",
    "empty": "empty//x.tfrecord",
    "long": f"long/{LONG}.tfrecord",
    "abs": "/abs/escaped.tfrecord",
}


@pytest.mark.parametrize("prefix", list(KEYS))
def test_keys_that_leave_the_cache_are_refused_in_one_line(s3_env, hostile_bucket, monkeypatch, prefix):
    monkeypatch.setenv("AWS_ENDPOINT_URL", hostile_bucket)
    cache = s3_env / "deep" / "er" / "cache"
    pattern = f"s3://{BUCKET}/{'/abs/' if prefix == 'abs' else prefix + '/'}*.tfrecord"
    with pytest.raises(DataError) as error:
        local_files(pattern, cache_dir=cache, progress=False)
    text = str(error.value)
    assert "\n" not in text and text.startswith(f"s3://{BUCKET}/{KEYS[prefix]}: refused")
    written = [path for path in s3_env.rglob("*") if path.is_file()]
    assert written == [], written  # nothing at all was written, inside the cache or out of it
    assert not (s3_env / "escaped.tfrecord").exists() and not os.path.exists("/abs/escaped.tfrecord")


class Stalling(BaseHTTPRequestHandler):
    """Answers S3's listing with one object of 1,000 bytes, then sends that object one byte every 0.3 s
    (mode "trickle"), or never answers the listing at all (mode "silent")."""

    mode = "trickle"
    stop = threading.Event()

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_HEAD(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "1000")
        self.send_header("ETag", '"abc"')
        self.end_headers()

    def do_GET(self) -> None:
        if self.mode == "silent":
            self.stop.wait(60)
            return
        if "list-type=2" in self.path:
            body = (
                b'<?xml version="1.0" encoding="UTF-8"?><ListBucketResult><Name>physics</Name>'
                b"<KeyCount>1</KeyCount><IsTruncated>false</IsTruncated><Contents><Key>hep/slow.tfrecord</Key>"
                b'<Size>1000</Size><ETag>"abc"</ETag></Contents></ListBucketResult>'
            )
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        self.send_response(200)
        self.send_header("Content-Length", "1000")
        self.send_header("ETag", '"abc"')
        self.end_headers()
        for _ in range(1000):
            if self.stop.wait(0.3):
                return
            try:
                self.wfile.write(b"x")
                self.wfile.flush()
            except OSError:  # the client gave up: what the test wants
                return


@contextmanager
def stalling_server(mode: str) -> Iterator[str]:
    handler = type("Handler", (Stalling,), {"mode": mode, "stop": threading.Event()})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        handler.stop.set()
        server.shutdown()
        server.server_close()


def children() -> set[int]:
    path = f"/proc/{os.getpid()}/task/{os.getpid()}/children"
    return {int(pid) for pid in open(path).read().split()}


@pytest.mark.parametrize(
    ("mode", "deadlines", "message"),
    [
        (
            "trickle",
            {"object_deadline": 2},
            f"s3://{BUCKET}/hep/slow.tfrecord: not downloaded within 2 s (the object deadline",
        ),
        (
            "silent",
            {"staging_deadline": 3},
            f"staging s3://{BUCKET}/hep/*.tfrecord: not finished within 3 s (the staging deadline, "
            f"NNSQL_STAGING_DEADLINE); still waiting for the listing of s3://{BUCKET}/hep/*.tfrecord",
        ),
    ],
)
def test_a_stalling_endpoint_costs_the_deadline_and_one_line(s3_env, monkeypatch, mode, deadlines, message):
    before = children()
    with stalling_server(mode) as url:
        monkeypatch.setenv("AWS_ENDPOINT_URL", url)
        started = time.monotonic()
        with pytest.raises(DataError) as error:
            local_files(
                f"s3://{BUCKET}/hep/*.tfrecord", cache_dir=s3_env / "cache", progress=False, **deadlines
            )
        seconds = time.monotonic() - started
    assert str(error.value).startswith(message) and "\n" not in str(error.value)
    assert seconds < next(iter(deadlines.values())) + 10  # the deadline, plus a child's start-up
    assert children() <= before  # the staging process is gone
    assert [path for path in s3_env.rglob("*") if path.is_file()] == []  # no partial file left


def test_deadlines_come_from_the_environment_and_are_checked(s3_env, monkeypatch):
    monkeypatch.setenv("NNSQL_OBJECT_DEADLINE", "soon")
    with pytest.raises(DataError, match="NNSQL_OBJECT_DEADLINE='soon': expected a number of seconds"):
        local_files(f"s3://{BUCKET}/hep/*.tfrecord", cache_dir=s3_env, progress=False)
    monkeypatch.setenv("NNSQL_OBJECT_DEADLINE", "1.5")
    with stalling_server("trickle") as url:
        monkeypatch.setenv("AWS_ENDPOINT_URL", url)
        with pytest.raises(DataError, match=r"not downloaded within 1\.5 s"):
            local_files(f"s3://{BUCKET}/hep/*.tfrecord", cache_dir=s3_env, progress=False)
