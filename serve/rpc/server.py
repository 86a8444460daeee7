"""The gRPC server of one process: the GRPCInferenceService on `--grpc-port`, beside the HTTP server and
sharing its app (models, batchers, metrics, API keys), plus server reflection (for grpcurl and the like).

grpc-core reads requests on its own threads and hands a thread of the pool only a whole message; a call
without a valid API key is refused from its metadata, before its message is read. Each worker process
of a multi-process server runs its own gRPC server on the same port (`reuse_port`, SO_REUSEPORT), created
after the fork: gRPC must not have started in the parent.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import grpc
from flask import Flask, g
from grpc_reflection.v1alpha import reflection

from nnsql.serve.app import ACCESS_LOG, KEY_REFUSED, key_accepted
from nnsql.serve.errors import ScoringError
from nnsql.serve.rpc.messages import POOL, SERVICE, SERVICE_NAME, message
from nnsql.serve.rpc.service import InferenceService

LOG = logging.getLogger("nnsql.serve.rpc")
OPEN_METHODS = {"ServerLive", "ServerReady"}  # as /v2/health/* over HTTP
STATUS_CODES = {
    400: grpc.StatusCode.INVALID_ARGUMENT,
    401: grpc.StatusCode.UNAUTHENTICATED,
    403: grpc.StatusCode.PERMISSION_DENIED,
    404: grpc.StatusCode.NOT_FOUND,
    413: grpc.StatusCode.RESOURCE_EXHAUSTED,
    415: grpc.StatusCode.INVALID_ARGUMENT,
    429: grpc.StatusCode.RESOURCE_EXHAUSTED,
    503: grpc.StatusCode.UNAVAILABLE,
}


def log_call(method: str, code: grpc.StatusCode, started: float, size_in: int, size_out: int) -> None:
    """The access log line of a call, in the HTTP server's fields."""
    entry = {
        "method": "gRPC",
        "path": method,
        "status": code.name,
        "ms": round(1000 * (time.perf_counter() - started), 3),
        "model": g.get("model_name"),
        "bytes_in": size_in,
        "bytes_out": size_out,
    }
    ACCESS_LOG.info(json.dumps(entry))


def behaviour(app: Flask, name: str, method: Callable[[Any], Any]) -> Callable[[Any, Any], Any]:
    """The method run in the app's context, its ScoringError turned into the matching gRPC status with
    the same one-line message as over HTTP, any other error into INTERNAL without details."""

    def call(request: Any, context: grpc.ServicerContext) -> Any:
        started = time.perf_counter()
        with app.app_context():
            try:
                response = method(request)
                log_call(name, grpc.StatusCode.OK, started, request.ByteSize(), response.ByteSize())
                return response
            except ScoringError as error:
                code, details = STATUS_CODES.get(error.status, grpc.StatusCode.INTERNAL), error.message
            except Exception as error:
                LOG.exception("unexpected error in %s", name)
                code, details = grpc.StatusCode.INTERNAL, f"internal error ({type(error).__name__})"
            log_call(name, code, started, request.ByteSize(), 0)
        context.abort(code, details)

    return call


def handlers(app: Flask) -> grpc.GenericRpcHandler:
    service = InferenceService()
    methods = {
        rpc.name: grpc.unary_unary_rpc_method_handler(
            behaviour(app, rpc.name, getattr(service, rpc.name)),
            request_deserializer=message(rpc.input_type.name).FromString,
            response_serializer=lambda response: response.SerializeToString(),
        )
        for rpc in SERVICE.methods
    }
    return grpc.method_handlers_generic_handler(SERVICE_NAME, methods)


def refuse_key(requests: Any, context: grpc.ServicerContext) -> None:
    context.abort(grpc.StatusCode.UNAUTHENTICATED, KEY_REFUSED)


class KeyCheck(grpc.ServerInterceptor):
    """Every call but the health checks (and reflection) needs an API key in its metadata, as over HTTP:
    `authorization: Bearer <key>` or `x-api-key: <key>`."""

    # A streaming handler that never reads: the refused call's message is left unread.
    REFUSAL = grpc.stream_unary_rpc_method_handler(refuse_key)

    def __init__(self, keys: frozenset[str]) -> None:
        self.keys = keys

    def intercept_service(self, continuation: Any, details: grpc.HandlerCallDetails) -> Any:
        service, _, method = details.method.strip("/").partition("/")
        if not self.keys or service != SERVICE_NAME or method in OPEN_METHODS:
            return continuation(details)
        metadata = {key: value for key, value in details.invocation_metadata if isinstance(value, str)}
        if key_accepted(metadata.get("authorization", ""), metadata.get("x-api-key", ""), self.keys):
            return continuation(details)
        return self.REFUSAL


def address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def create_grpc_server(
    app: Flask,
    host: str,
    port: int,
    *,
    threads: int = 8,
    max_message_bytes: int = 64 * 1024 * 1024,
    max_concurrent_calls: int = 1000,
    max_connections: int = 1000,
    idle_seconds: float = 30.0,
    max_age_seconds: float | None = None,
    reuse_port: bool = False,
) -> tuple[grpc.Server, int]:
    """The server (not started) and the port it is bound to (port 0: a free one); OSError in one line
    when the port cannot be bound. Connections are capped and closed when idle, as over HTTP: the
    worker's file descriptors are shared with its HTTP server, which idle gRPC connections exhausted.
    With `max_age_seconds`, a connection is told to go away (GOAWAY: clients reconnect) after that
    long, and closed when its calls have not finished that long after: grpcio has no deadline for a
    call's message, and a call waiting for one holds a pool thread (there are 2) and its connection."""
    age = []
    if max_age_seconds is not None:
        age = [
            ("grpc.max_connection_age_ms", int(max_age_seconds * 1000)),
            ("grpc.max_connection_age_grace_ms", int(max_age_seconds * 1000)),
        ]
    server = grpc.server(
        ThreadPoolExecutor(max_workers=threads, thread_name_prefix="grpc"),
        handlers=[handlers(app)],
        interceptors=[KeyCheck(app.extensions["api_keys"])],
        options=[
            ("grpc.max_receive_message_length", max_message_bytes),
            ("grpc.so_reuseport", int(reuse_port)),
            # no flow-control window growth: a call waiting for a pool thread holds 64 KiB of its
            # message, not all of it (80 calls of 18 MB held 1.4 GB otherwise)
            ("grpc.http2.bdp_probe", 0),
            ("grpc.max_allowed_incoming_connections", max_connections),
            ("grpc.max_connection_idle_ms", int(idle_seconds * 1000)),
            ("grpc.server_handshake_timeout_ms", int(idle_seconds * 1000)),
            *age,
        ],
        maximum_concurrent_rpcs=max_concurrent_calls,
    )
    reflection.enable_server_reflection([SERVICE_NAME, reflection.SERVICE_NAME], server, pool=POOL)
    try:
        bound = server.add_insecure_port(address(host, port))
    except RuntimeError:  # grpcio raises where older versions returned 0
        bound = 0
    if not bound:
        raise OSError(f"cannot listen for gRPC on {address(host, port)}: the port is in use or not allowed")
    return server, bound


def grpc_service(host: str, port: int, **options: Any) -> Callable[[Flask], Callable[[], None]]:
    """A starter for a process's app: it creates and starts the gRPC server, and returns its stop. In
    the shape of the worker's extra servers (a callable per server in app.extensions["servers"])."""

    def start(app: Flask) -> Callable[[], None]:
        server, _ = create_grpc_server(app, host, port, **options)
        server.start()
        return lambda: server.stop(grace=5).wait()

    return start
