"""The gRPC server of one process: the GRPCInferenceService on `--grpc-port`, beside the HTTP server and
sharing its app (models, batchers, metrics, API keys), plus server reflection (for grpcurl and the like).

It is grpcio's asyncio server, on an event loop of its own thread: a call waiting for its message, or
a reflection stream waiting for its next request, is a coroutine that waits, never a pool thread
(serve/rpc/calls.py). With API keys, every call but the health checks, reflection included, is refused
from its metadata before its message is read. Each worker process of a multi-process server runs its
own gRPC server on the same port (`reuse_port`, SO_REUSEPORT), created after the fork.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import grpc
from flask import Flask
from grpc_reflection.v1alpha import reflection

from ..app import KEY_REFUSED, key_accepted
from ..gate import Refusal, control_refusal
from .admission import Admission
from .calls import OPEN_METHODS, STATUS_CODES, Calls, Method
from .guard import ConnectionGuard, headroom
from .messages import POOL, SERVICE, SERVICE_NAME
from .service import InferenceService

CONTROL_METHODS = {"RepositoryModelLoad", "RepositoryModelUnload"}  # need the admin key
# Calls one connection may have open at once (HTTP/2 streams; a client queues the others): once one
# call of a connection reads a large message, grpc-core takes in the messages of its other open calls
# too, so this bounds what one connection can make a worker hold.
STREAMS_PER_CONNECTION = 8


def handlers(calls: Calls) -> grpc.GenericRpcHandler:
    service = InferenceService()
    methods = {
        rpc.name: calls.handler(Method(rpc.name, rpc.input_type.name, getattr(service, rpc.name)))
        for rpc in SERVICE.methods
    }
    return grpc.method_handlers_generic_handler(SERVICE_NAME, methods)


async def refuse_key(requests: Any, context: grpc.aio.ServicerContext) -> None:
    await context.abort(grpc.StatusCode.UNAUTHENTICATED, KEY_REFUSED)


class KeyCheck(grpc.aio.ServerInterceptor):
    """With keys, every call but the health checks needs one in its metadata, as over HTTP:
    `authorization: Bearer <key>` or `x-api-key: <key>`. Reflection too: it would otherwise be a
    keyless way in."""

    # A handler that never reads: the refused call's message is left unread.
    REFUSAL = grpc.stream_unary_rpc_method_handler(refuse_key)

    def __init__(self, keys: frozenset[str], admin_keys: frozenset[str]) -> None:
        self.keys = keys
        self.admin_keys = admin_keys

    async def intercept_service(self, continuation: Any, details: grpc.HandlerCallDetails) -> Any:
        service, _, method = details.method.strip("/").partition("/")
        metadata = {key: value for key, value in details.invocation_metadata or () if isinstance(value, str)}
        if service == SERVICE_NAME and method in CONTROL_METHODS:
            refusal = control_refusal(
                self.admin_keys, metadata.get("authorization"), metadata.get("x-api-key")
            )
            return await continuation(details) if refusal is None else refusing(refusal)
        if not self.keys or (service == SERVICE_NAME and method in OPEN_METHODS):
            return await continuation(details)
        if key_accepted(metadata.get("authorization", ""), metadata.get("x-api-key", ""), self.keys):
            return await continuation(details)
        return self.REFUSAL


def refusing(refusal: Refusal) -> grpc.RpcMethodHandler:
    """A handler that ends the call with the refusal's status, its message left unread."""
    code = STATUS_CODES[refusal.status]

    async def refuse(requests: Any, context: grpc.aio.ServicerContext) -> None:
        await context.abort(code, refusal.message)

    return grpc.stream_unary_rpc_method_handler(refuse)


def address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class Loop:
    """The process's event loop for gRPC, on a daemon thread, started on first use."""

    lock = threading.Lock()
    loop: asyncio.AbstractEventLoop | None = None

    @classmethod
    def run(cls, coroutine: Any) -> Any:
        """Run `coroutine` on the loop and wait for its result."""
        with cls.lock:
            if cls.loop is None:
                cls.loop = asyncio.new_event_loop()
                threading.Thread(target=cls.loop.run_forever, name="grpc-loop", daemon=True).start()
        return asyncio.run_coroutine_threadsafe(coroutine, cls.loop).result()


class GrpcServer:
    """An asyncio gRPC server, started and stopped from any thread, with the guard of its connections."""

    def __init__(self, server: grpc.aio.Server, pool: ThreadPoolExecutor, guard: ConnectionGuard) -> None:
        self.server = server
        self.pool = pool
        self.guard = guard

    def start(self) -> None:
        Loop.run(self.server.start())
        self.guard.start()

    def stop(self, grace: float | None = None) -> None:
        """Stop accepting calls, give running ones `grace` seconds, and wait until it is done."""
        self.guard.stop()
        Loop.run(self.server.stop(grace))
        self.pool.shutdown(wait=False, cancel_futures=True)


def server_options(
    max_message_bytes: int, reuse_port: bool, max_connections: int, idle_seconds: float, age: float | None
) -> list[tuple[str, int]]:
    """Connections are capped and closed when idle, as over HTTP (the worker's file descriptors are
    shared with its HTTP server); `max_connections` is grpcio's own cap, above the guard's
    (serve/rpc/guard.py). With `age`, a connection is told to go away (GOAWAY: clients
    reconnect) after that long, and closed when its calls have not finished that long after."""
    options = [
        ("grpc.max_receive_message_length", max_message_bytes),
        ("grpc.so_reuseport", int(reuse_port)),
        # no flow-control window growth: a call whose message is not asked for yet holds 64 KiB of it
        ("grpc.http2.bdp_probe", 0),
        ("grpc.max_concurrent_streams", STREAMS_PER_CONNECTION),
        ("grpc.max_allowed_incoming_connections", max_connections),
        ("grpc.max_connection_idle_ms", int(idle_seconds * 1000)),
        ("grpc.server_handshake_timeout_ms", int(idle_seconds * 1000)),
    ]
    if age is not None:
        options += [("grpc.max_connection_age_ms", int(age * 1000))]
        options += [("grpc.max_connection_age_grace_ms", int(age * 1000))]
    return options


def create_grpc_server(
    app: Flask,
    host: str,
    port: int,
    *,
    threads: int = 8,
    max_message_bytes: int = 64 * 1024 * 1024,
    max_calls_in_memory: int = 8,
    max_connections: int = 1000,
    max_client_connections: int = 64,
    idle_seconds: float = 30.0,
    max_age_seconds: float | None = None,
    read_seconds: float = 30.0,
    reuse_port: bool = False,
) -> tuple[GrpcServer, int]:
    """The server (not started) and the port it is bound to (port 0: a free one); OSError in one line
    when the port cannot be bound. `max_calls_in_memory` calls hold their message at once (each up to
    `max_message_bytes`); a call's message must arrive within `read_seconds` of its turn. Connections
    are capped at `max_client_connections` per client address and `max_connections` in all, as over HTTP.
    """
    pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="grpc")
    admission = Admission(max_calls_in_memory)
    calls = Calls(app, pool, admission, read_seconds)
    cap = max_connections + headroom(max_connections, max_client_connections)
    options = server_options(max_message_bytes, reuse_port, cap, idle_seconds, max_age_seconds)

    async def build() -> tuple[grpc.aio.Server, int]:
        server = grpc.aio.server(
            handlers=[handlers(calls)],
            interceptors=[KeyCheck(app.extensions["api_keys"], app.extensions["admin_keys"])],
            options=options,
        )
        reflection.enable_server_reflection([SERVICE_NAME, reflection.SERVICE_NAME], server, pool=POOL)
        try:
            bound = server.add_insecure_port(address(host, port))
        except RuntimeError:  # grpcio raises where older versions returned 0
            bound = 0
        return server, bound

    server, bound = Loop.run(build())
    if not bound:
        pool.shutdown(wait=False)
        raise OSError(f"cannot listen for gRPC on {address(host, port)}: the port is in use or not allowed")
    guard = ConnectionGuard(
        bound,
        max_client_connections,
        max_connections,
        admission.busy_peers,
        admission.keyed_peers,
        admission.activity,
        max_message_bytes,
    )
    return GrpcServer(server, pool, guard), bound


def grpc_service(host: str, port: int, **options: Any) -> Callable[[Flask], Callable[[], None]]:
    """A starter for a process's app: it creates and starts the gRPC server, and returns its stop. In
    the shape of the worker's extra servers (a callable per server in app.extensions["servers"])."""

    def start(app: Flask) -> Callable[[], None]:
        server, _ = create_grpc_server(app, host, port, **options)
        server.start()
        return lambda: server.stop(grace=5)

    return start
