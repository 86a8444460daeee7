"""The HTTP/1.1 front end of one worker: an asyncio event loop (uvloop) with httptools' parser (llhttp),
in front of the WSGI app that serve.app builds.

The loop reads every request whole (headers, then body, kept in memory) before a thread of the pool
runs the app, so a slow or stalled client holds a connection, never a thread. What bounds a client:
- a total deadline for one request, from its first byte to its last (`request_timeout`): trickling a
  byte at a time does not extend it, unlike an idle timeout;
- `idle_timeout` between requests on a kept-alive connection;
- `max_client_connections` per client address (an IPv6 client's /64, serve/clients.py), and
  `max_connections` in all: at the cap, the oldest connection that is idle or still sending its request
  is closed to make room for the new one, so clients that finish their requests in time always get in;
- the gate (serve.gate) runs on the headers alone: an unauthenticated, foreign or oversized request is
  answered and closed before a byte of its body is read (`Expect: 100-continue` is answered only then);
- bodies are never spooled to disk; the bytes held at once in this worker stay within `max_buffered`
  (503 beyond: at once for a declared length that cannot fit, else as bytes arrive); headers within
  `max_header_bytes`.
"""

from __future__ import annotations

import asyncio
import io
import logging
import socket
import sys
import time
from collections import Counter, deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from email.utils import formatdate
from typing import Any
from urllib.parse import unquote_to_bytes

import httptools
import orjson

from . import accesslog
from .clients import client_group
from .gate import Headers, Refusal, merged, routed_path

LOG = logging.getLogger("nnsql.serve.server")
Admit = Callable[[str, str, str, Headers], Refusal | int]
REASONS = {
    100: "Continue",
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    408: "Request Timeout",
    413: "Content Too Large",
    429: "Too Many Requests",
    431: "Request Header Fields Too Large",
    500: "Internal Server Error",
    501: "Not Implemented",
    503: "Service Unavailable",
}
MAX_PIPELINED = 16  # complete requests queued on one connection before it stops reading more
MAX_QUEUED = 256  # complete requests queued on one connection from what was read (503 beyond)


@dataclass
class Limits:
    max_connections: int = 1000
    max_client_connections: int = 64
    request_timeout: float = 30.0
    idle_timeout: float = 30.0
    max_body: int = 64 << 20
    max_buffered: int = 512 << 20
    max_header_bytes: int = 64 << 10
    threads: int = 8


@dataclass
class Incoming:
    """One request being received or waiting to run."""

    started: float
    url: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    header_bytes: int = 0
    method: str = ""
    limit: int = 0
    reserved: int = 0  # bytes of the worker's body budget this request holds
    body: list[bytes] = field(default_factory=list)
    size: int = 0
    keep_alive: bool = True
    refusal: Refusal | None = None  # answered with this, in its turn, instead of running the app
    path_info: str = ""  # WSGI's PATH_INFO (path_info), slashes merged once, for the gate and the app
    path: str = ""  # the path as the app routes it (serve.gate.routed_path), as the gate read it


class Stop(Exception):
    """Raised inside a parser callback to stop reading a request that is being refused."""


class Server:
    def __init__(self, app: Any, admit: Admit, limits: Limits, host: str = "", port: int = 0) -> None:
        self.app = app
        self.admit = admit
        self.limits = limits
        self.host, self.port = host, port
        self.connections: dict[Connection, None] = {}  # in order of arrival
        self.per_client: Counter[str] = Counter()
        self.buffered = 0
        self.executor = (
            ThreadPoolExecutor(limits.threads, thread_name_prefix="request") if limits.threads > 0 else None
        )
        self.date = formatdate(usegmt=True).encode()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.listener: asyncio.base_events.Server | None = None

    async def start(self, sock: socket.socket) -> None:
        self.loop = asyncio.get_running_loop()
        self.listener = await self.loop.create_server(lambda: Connection(self), sock=sock, backlog=2048)
        self.loop.call_later(0.5, self.sweep)

    def sweep(self) -> None:
        """Close connections past their deadline; runs twice a second."""
        now = time.monotonic()
        self.date = formatdate(usegmt=True).encode()
        for connection in list(self.connections):
            connection.check(now)
        assert self.loop is not None
        self.loop.call_later(0.5, self.sweep)

    def register(self, connection: Connection) -> bool:
        """Admit a new connection, making room at the total cap; False when it must be refused."""
        client = connection.group
        if self.per_client[client] >= self.limits.max_client_connections:
            return False
        if len(self.connections) >= self.limits.max_connections and not self.evict_one():
            return False
        self.connections[connection] = None
        self.per_client[client] += 1
        return True

    def evict_one(self) -> bool:
        """Close the connection that has waited longest while idle or sending its request."""
        candidates = [c for c in self.connections if not c.busy]
        if not candidates:
            return False
        oldest = min(candidates, key=lambda c: c.since)
        LOG.info("closing a connection from %s to make room (%d open)", oldest.client, len(self.connections))
        oldest.close()
        return True

    def forget(self, connection: Connection) -> None:
        if connection in self.connections:
            del self.connections[connection]
            self.per_client[connection.group] -= 1
            if self.per_client[connection.group] <= 0:
                del self.per_client[connection.group]

    def reserve(self, size: int) -> bool:
        if self.buffered + size > self.limits.max_buffered:
            return False
        self.buffered += size
        return True

    def release(self, size: int) -> None:
        self.buffered -= size

    async def close(self, grace: float = 10.0) -> None:
        """Stop accepting, let running requests finish (up to `grace` seconds), close everything."""
        if self.listener is not None:
            self.listener.close()
        deadline = time.monotonic() + grace
        while any(c.busy for c in self.connections) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        for connection in list(self.connections):
            connection.close()
        if self.executor is not None:
            self.executor.shutdown(wait=False, cancel_futures=True)


class Connection(asyncio.Protocol):
    def __init__(self, server: Server) -> None:
        self.server = server
        self.limits = server.limits
        self.transport: asyncio.Transport | None = None
        self.client = ""
        self.group = ""
        self.peer: tuple = ("", 0)
        self.parser = httptools.HttpRequestParser(self)
        self.current: Incoming | None = None  # being received
        self.waiting: deque[Incoming] = deque()  # received, not yet run
        self.busy = False  # the app is running one of this connection's requests
        self.since = time.monotonic()  # when it last became idle, or began receiving a request
        self.closed = False
        self.write_paused = False
        self.reading_paused = False  # MAX_PIPELINED requests wait: the client's further data waits too
        self.read_all = False  # the client half-closed, or nothing more can be parsed: close once answered

    # asyncio callbacks
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's TCPTransport
        self.peer = transport.get_extra_info("peername") or ("", 0)
        self.client = str(self.peer[0])
        self.group = client_group(self.client)  # what --max-client-connections counts: an IPv6 /64
        if not self.server.register(self):
            log_refusal(None, Refusal(429, ""))
            self.closed = True
            self.send_error(429, "too many connections from your address: reuse connections")
            transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.server.forget(self)
        self.drop_requests()

    def data_received(self, data: bytes) -> None:
        if self.closed or self.read_all:
            return
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            # the request asking for the upgrade is answered as plain HTTP (a server may ignore Upgrade);
            # what follows it is not HTTP
            self.stop_reading()
            if not self.busy and not self.waiting:  # answered already (--threads 0)
                self.close()
        except httptools.HttpParserCallbackError as error:
            if not isinstance(error.__context__, Stop):
                LOG.error("request handling failed", exc_info=error.__context__)
                self.refuse(Refusal(500, "internal error"))
        except httptools.HttpParserError as error:
            self.refuse(Refusal(400, f"malformed HTTP request: {str(error)[:100]}"))

    def eof_received(self) -> bool:
        """The client sent all it will (a half-close: `shutdown(SHUT_WR)`, `nc -N`): the requests it
        sent whole are still answered, then the connection closes. True keeps it open for that."""
        self.stop_reading()
        self.drop_current()
        if not self.busy and not self.waiting:
            self.close()
            return False
        return True

    def stop_reading(self) -> None:
        self.read_all = True
        if self.transport is not None and not self.transport.is_closing() and not self.reading_paused:
            self.transport.pause_reading()
            self.reading_paused = True

    def pause_writing(self) -> None:
        self.write_paused = True

    def resume_writing(self) -> None:
        self.write_paused = False
        self.since = time.monotonic()

    # parser callbacks
    def on_message_begin(self) -> None:
        self.current = Incoming(started=time.monotonic())
        if not self.busy and not self.waiting:
            self.since = self.current.started

    def on_url(self, url: bytes) -> None:
        self.count_header_bytes(len(url))
        assert self.current is not None
        self.current.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        self.count_header_bytes(len(name) + len(value))
        assert self.current is not None
        key = name.decode("latin-1").lower()
        text = value.decode("latin-1")
        headers = self.current.headers
        headers[key] = f"{headers[key]}, {text}" if key in headers else text

    def count_header_bytes(self, size: int) -> None:
        assert self.current is not None
        self.current.header_bytes += size
        if self.current.header_bytes > self.limits.max_header_bytes:
            self.refuse(Refusal(431, f"request headers exceed {self.limits.max_header_bytes} bytes"))
            raise Stop

    def on_headers_complete(self) -> None:
        incoming = self.current
        assert incoming is not None
        incoming.method = self.parser.get_method().decode("latin-1")
        incoming.keep_alive = self.parser.should_keep_alive()
        try:
            url = httptools.parse_url(incoming.url)
        except httptools.HttpParserInvalidURLError:
            self.refuse(Refusal(400, "the request target is not a path (CONNECT is not supported)"))
            raise Stop from None
        coding = incoming.headers.get("transfer-encoding")
        if coding is not None and coding.strip().lower() != "chunked":
            # the parser reads the chunks of `gzip, chunked` and would hand on gzip's bytes as the body
            self.refuse(Refusal(501, "only the chunked transfer coding is supported: send the body plain"))
            raise Stop
        incoming.path_info = path_info(url)
        incoming.path = routed_path(incoming.path_info)  # as the app will route it
        query = (url.query or b"").decode("latin-1")
        verdict = self.server.admit(incoming.method, incoming.path, query, incoming.headers)
        if isinstance(verdict, Refusal):
            self.refuse(verdict)
            raise Stop
        incoming.limit = min(verdict, self.limits.max_body) if verdict else self.limits.max_body
        length = incoming.headers.get("content-length", "")
        if length.isdigit() and not self.fits(incoming, int(length)):
            raise Stop
        if incoming.headers.get("expect", "").lower() == "100-continue":
            self.write(b"HTTP/1.1 100 Continue\r\n\r\n")

    def fits(self, incoming: Incoming, size: int) -> bool:
        """A declared body within the request's limit (413) and what is left of the worker's budget now
        (503). Nothing is reserved before the bytes arrive: a declared length costs the client nothing,
        so idle connections that declare large bodies must not hold the budget."""
        if size > incoming.limit:
            self.refuse(Refusal(413, f"request body exceeds the limit of {incoming.limit} bytes"))
            return False
        if self.server.buffered + size > self.limits.max_buffered:
            self.refuse(Refusal(503, "the server holds too many request bodies: retry shortly"))
            return False
        return True

    def hold(self, incoming: Incoming, size: int) -> bool:
        """Reserve the worker's body budget for the `size` bytes of this request's body received."""
        more = size - incoming.reserved
        if more <= 0:
            return True
        if size > incoming.limit:
            self.refuse(Refusal(413, f"request body exceeds the limit of {incoming.limit} bytes"))
            return False
        if not self.server.reserve(more):
            self.refuse(Refusal(503, "the server holds too many request bodies: retry shortly"))
            return False
        incoming.reserved = size
        return True

    def on_body(self, body: bytes) -> None:
        incoming = self.current
        assert incoming is not None
        incoming.size += len(body)
        if incoming.size > incoming.reserved and not self.hold(incoming, incoming.size):
            raise Stop  # reserved as it comes
        incoming.body.append(body)

    def on_message_complete(self) -> None:
        incoming, self.current = self.current, None
        assert incoming is not None
        if len(self.waiting) >= MAX_QUEUED:
            self.release(incoming)
            self.refuse(Refusal(503, "too many pipelined requests"))
            raise Stop
        self.waiting.append(incoming)
        if len(self.waiting) >= MAX_PIPELINED and not self.reading_paused and self.transport is not None:
            self.transport.pause_reading()  # the client's further requests wait in its socket
            self.reading_paused = True
        if not self.busy:
            self.run_next()

    # running requests
    def run_next(self) -> None:
        if self.closed:
            return
        if not self.waiting:
            if self.read_all:
                self.close()
            return
        incoming = self.waiting.popleft()
        if self.reading_paused and not self.read_all and len(self.waiting) < MAX_PIPELINED:
            assert self.transport is not None
            self.transport.resume_reading()
            self.reading_paused = False
            if self.current is not None:  # its deadline did not run while this server was not reading
                self.current.started = time.monotonic()
        if incoming.refusal is not None:  # refused after the requests before it were received
            self.send_error(incoming.refusal.status, incoming.refusal.message, incoming.refusal.headers)
            self.close()
            return
        self.busy = True
        if self.server.executor is None:  # threads=0: the app runs on the event loop itself
            done: Future = Future()
            try:
                done.set_result(self.call_app(incoming))
            except Exception as error:
                done.set_exception(error)
            self.finish(incoming, done)
            return
        future = self.server.executor.submit(self.call_app, incoming)
        loop = self.server.loop
        assert loop is not None
        future.add_done_callback(lambda done: loop.call_soon_threadsafe(self.finish, incoming, done))

    def environ(self, incoming: Incoming) -> dict[str, Any]:
        url = httptools.parse_url(incoming.url)
        body = b"".join(incoming.body)
        environ: dict[str, Any] = {
            "REQUEST_METHOD": incoming.method,
            "SCRIPT_NAME": "",
            "PATH_INFO": incoming.path_info,
            "QUERY_STRING": (url.query or b"").decode("latin-1"),
            "SERVER_NAME": self.server.host,
            "SERVER_PORT": str(self.server.port),
            "SERVER_PROTOCOL": "HTTP/1.1",
            "REMOTE_ADDR": self.client,
            "REMOTE_PORT": str(self.peer[1]) if len(self.peer) > 1 else "",
            "CONTENT_LENGTH": str(len(body)),
            "wsgi.version": (1, 0),
            "wsgi.url_scheme": "http",
            "wsgi.input": io.BytesIO(body),
            "wsgi.input_terminated": True,
            "wsgi.errors": sys.stderr,
            "wsgi.multithread": True,
            "wsgi.multiprocess": True,
            "wsgi.run_once": False,
            "nnsql.admitted": True,
            "nnsql.path": incoming.path,  # the path the gate admitted, for the fast path
        }
        for key, value in incoming.headers.items():
            if "_" in key:  # X_API_KEY and X-API-Key would read the same
                continue
            if key == "content-type":
                environ["CONTENT_TYPE"] = value
            elif key != "content-length":
                environ["HTTP_" + key.upper().replace("-", "_")] = value
        return environ

    def call_app(self, incoming: Incoming) -> tuple[bytes, list[tuple[str, str]], bytes]:
        """Run the WSGI app in a pool thread; the status line, headers and body it answered."""
        answer: list[Any] = []

        def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            answer[:] = [status, headers]
            return lambda data: None

        result = self.server.app(self.environ(incoming), start_response)
        try:
            body = b"".join(result)
        finally:
            if hasattr(result, "close"):
                result.close()
        return answer[0].encode("latin-1"), answer[1], body

    def finish(self, incoming: Incoming, done: Future) -> None:
        self.release(incoming)
        self.busy = False
        if self.closed:
            return
        try:
            status, headers, body = done.result()
        except Exception:
            LOG.exception("the app failed")
            self.send_error(500, "internal error")
            self.close()
            return
        if incoming.method == "HEAD":
            body = b""
        last = self.read_all and not self.waiting  # the client sends nothing more
        keep_alive = incoming.keep_alive and not self.write_paused and not last
        lines = [b"HTTP/1.1 " + status]
        lines += [f"{name}: {value}".encode("latin-1") for name, value in headers]
        if not any(name.lower() == "content-length" for name, _ in headers):
            lines.append(b"Content-Length: %d" % len(body))
        lines += [b"Date: " + self.server.date, b"Server: nnsql"]
        lines.append(b"Connection: keep-alive" if keep_alive else b"Connection: close")
        self.write(b"\r\n".join(lines) + b"\r\n\r\n" + body)
        if not keep_alive:
            self.close()
            return
        self.since = time.monotonic()
        self.run_next()

    # answers and closing
    def write(self, data: bytes) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(data)

    def send_error(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        body = orjson.dumps({"error": message})
        lines = [f"HTTP/1.1 {status} {REASONS.get(status, 'Error')}", "Content-Type: application/json"]
        lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
        lines += [f"Content-Length: {len(body)}", "Connection: close"]
        self.write("\r\n".join(lines).encode("latin-1") + b"\r\n\r\n" + body)

    def refuse(self, refusal: Refusal) -> None:
        """Answer with the refusal and close: the rest of the request is never read. Requests received
        whole before it (pipelined) are answered first, in order."""
        if self.closed:
            return
        log_refusal(self.current, refusal)
        self.drop_current()
        if self.busy or self.waiting:
            self.stop_reading()
            self.waiting.append(Incoming(started=time.monotonic(), refusal=refusal))
            return
        self.send_error(refusal.status, refusal.message, refusal.headers)
        self.close()

    def close(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()
        self.closed = True
        self.drop_requests()

    def release(self, incoming: Incoming) -> None:
        """Give back the body budget the request holds."""
        if incoming.reserved:
            self.server.release(incoming.reserved)
            incoming.reserved = 0

    def drop_current(self) -> None:
        """Forget the request being received (never to be answered)."""
        if self.current is not None:
            self.release(self.current)
            self.current = None

    def drop_requests(self) -> None:
        self.drop_current()
        for incoming in self.waiting:
            self.release(incoming)
        self.waiting.clear()

    def check(self, now: float) -> None:
        """Close the connection if it is past its deadline: a request not received in time, an idle
        keep-alive, or a client that does not read its answer."""
        if self.closed:
            return
        if self.current is not None and now - self.current.started > self.limits.request_timeout:
            self.refuse(
                Refusal(408, f"the request was not received within {self.limits.request_timeout:g} s")
            )
        elif (
            self.current is None
            and not self.busy
            and not self.waiting
            and now - self.since > self.limits.idle_timeout
        ) or (self.write_paused and now - self.since > self.limits.idle_timeout):
            self.close()


def path_info(url: Any) -> str:
    """WSGI's PATH_INFO of a parsed request target: its percent-decoded bytes read as Latin-1, with runs of
    slashes merged (serve.gate.merged). The gate and the app are handed that one path: the fast path
    serves `//v2/models/m/infer` as the routes would, under the limit the gate gave it."""
    return merged(unquote_to_bytes(url.path).decode("latin-1"))


def log_refusal(incoming: Incoming | None, refusal: Refusal) -> None:
    """The access log entry of a request refused here, on its headers or as it arrived (a wrong key, a
    foreign Host, a body past its limit, a timeout), as the app logs the requests it answers: a client
    guessing keys or probing paths is seen in the log. Method and path as far as they were received."""
    path = ""
    if incoming is not None and incoming.url:
        try:
            raw = unquote_to_bytes(httptools.parse_url(incoming.url).path)
        except httptools.HttpParserInvalidURLError:
            raw = incoming.url
        path = raw.decode("utf-8", "replace")
    accesslog.log(
        method=incoming.method if incoming is not None else "",
        path=path,
        status=refusal.status,
        ms=round(1e6 * (time.monotonic() - incoming.started)) / 1000 if incoming is not None else 0.0,
        model=None,
        bytes_in=incoming.size if incoming is not None else 0,
        bytes_out=len(orjson.dumps({"error": refusal.message})),
    )
