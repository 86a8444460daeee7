"""One gRPC call of the GRPCInferenceService, from its message to its answer, on grpcio's asyncio server.

Every method is registered as client-streaming, so the call's message is asked for only once the call
has room (serve/rpc/admission.py) and within `read_seconds`; until then grpc-core holds no more than
its flow-control window (64 KiB) of it. Waiting for a message costs no thread: the event loop awaits
it. Only a whole message goes to a thread of the pool, where the method runs in the app's context and
its ScoringError becomes the matching status with the same one-line message as over HTTP.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time
from collections.abc import AsyncIterator, Callable
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any

import grpc
from flask import Flask, g
from google.protobuf.message import DecodeError

from .. import accesslog
from ..errors import ScoringError
from . import wire
from .admission import Admission
from .messages import message

OPEN_METHODS = {"ServerLive", "ServerReady"}  # as /v2/health/* over HTTP: no key needed

LOG = logging.getLogger("nnsql.serve.rpc")
STATUS_CODES = {
    400: grpc.StatusCode.INVALID_ARGUMENT,
    401: grpc.StatusCode.UNAUTHENTICATED,
    403: grpc.StatusCode.PERMISSION_DENIED,
    404: grpc.StatusCode.NOT_FOUND,
    408: grpc.StatusCode.DEADLINE_EXCEEDED,
    413: grpc.StatusCode.RESOURCE_EXHAUSTED,
    415: grpc.StatusCode.INVALID_ARGUMENT,
    422: grpc.StatusCode.INVALID_ARGUMENT,
    429: grpc.StatusCode.RESOURCE_EXHAUSTED,
    503: grpc.StatusCode.UNAVAILABLE,
}
LARGE_MESSAGE = 1 << 20  # bytes
Outcome = tuple[grpc.StatusCode, str, bytes]  # status, details, serialized response


def log_call(method: str, code: grpc.StatusCode, started: float, size_in: int, size_out: int) -> None:
    """The access log line of a call, in the HTTP server's fields."""
    accesslog.log(
        method="gRPC",
        path=method,
        status=code.name,
        ms=round(1000 * (time.perf_counter() - started), 3),
        model=g.get("model_name"),
        bytes_in=size_in,
        bytes_out=size_out,
    )


@dataclass
class Method:
    """One RPC: its name, its request message's name, and what answers it (serve/rpc/service.py)."""

    name: str
    request: str
    behaviour: Callable[[Any], Any]

    def run(self, app: Flask, received: list[bytes]) -> Outcome:
        """Parse and answer the message (taken from `received`: once parsed, its bytes are let go), in a
        pool thread; never raises. A malformed message is a client's error: one access log line."""
        started = time.perf_counter()
        data = received.pop()
        size = len(data)
        with app.app_context():
            kind = message(self.request)
            try:
                wire.check_fields(data, kind.DESCRIPTOR)  # counted before the parser makes an object of each
                request = kind.FromString(data)
            except wire.TooManyFields as error:
                code = grpc.StatusCode.INVALID_ARGUMENT
                log_call(self.name, code, started, size, 0)
                return code, f"the message is not an inference.{self.request}: {error}", b""
            except (wire.Malformed, DecodeError):
                code = grpc.StatusCode.INVALID_ARGUMENT
                log_call(self.name, code, started, size, 0)
                return code, f"the message is not an inference.{self.request}", b""
            finally:
                del data
            try:
                answer = self.behaviour(request).SerializeToString()
                log_call(self.name, grpc.StatusCode.OK, started, size, len(answer))
                return grpc.StatusCode.OK, "", answer
            except ScoringError as error:
                code, details = STATUS_CODES.get(error.status, grpc.StatusCode.INTERNAL), error.message
            except Exception as error:
                LOG.exception("unexpected error in %s", self.name)
                code, details = grpc.StatusCode.INTERNAL, f"internal error ({type(error).__name__})"
            log_call(self.name, code, started, size, 0)
            return code, details, b""


@dataclass
class Calls:
    """What every call of this server shares: the app, the pool, the room, the time to send a message."""

    app: Flask
    pool: Executor
    admission: Admission
    read_seconds: float

    def handler(self, method: Method) -> grpc.RpcMethodHandler:
        if method.name in OPEN_METHODS:
            return self.health_handler(method)

        async def call(requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext) -> bytes:
            task = asyncio.current_task()
            assert task is not None
            size = 0
            try:
                peer = context.peer()
                self.admission.begun(peer)
                await self.admission.take_turn(task, peer)
                await self.admission.enter(task, peer)
                received = [await self.receive(task, peer, requests, context)]
                if method.name not in OPEN_METHODS:  # past the key check, with a key if keys are set
                    self.admission.keyed(peer)
                size = len(received[0])
                loop = asyncio.get_running_loop()
                code, details, answer = await loop.run_in_executor(self.pool, method.run, self.app, received)
            finally:
                self.admission.leave(task)
            if size >= LARGE_MESSAGE:
                gc.collect()  # the call's buffers are held by a reference cycle of grpcio's until then
            if code != grpc.StatusCode.OK:
                await context.abort(code, details)
            return answer

        return grpc.stream_unary_rpc_method_handler(call)  # bytes in and out: parsed in `Method.run`

    def health_handler(self, method: Method) -> grpc.RpcMethodHandler:
        """The health checks, which need no key, take no room and no thread: their request has no
        fields, so its message is never waited for, and the answer (a flag in memory) is made on the
        event loop. As calls waiting for their message, a client without a key held the room: 120
        connections, each reopened with a health check that never sent its message, kept every keyed
        call out."""

        async def call(requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext) -> bytes:
            self.admission.begun(context.peer())  # the connection's bytes carry calls, as before
            code, details, answer = method.run(self.app, [b""])
            if code != grpc.StatusCode.OK:
                await context.abort(code, details)
            return answer

        return grpc.stream_unary_rpc_method_handler(call)

    async def receive(
        self, task: asyncio.Task, peer: str, requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext
    ) -> bytes:
        """The call's one message, within `read_seconds`; the call is ended with a status otherwise."""
        try:
            async with asyncio.timeout(self.read_seconds):
                data = await anext(requests)
        except StopAsyncIteration:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "the call carries no message")
        except TimeoutError:
            self.admission.stall(peer)
            await context.abort(
                grpc.StatusCode.DEADLINE_EXCEEDED,
                f"the message did not arrive within {self.read_seconds:g} s",
            )
        except asyncio.CancelledError:
            if not self.admission.was_evicted(task):
                raise  # the client went away
            task.uncancel()
            await context.abort(
                grpc.StatusCode.UNAVAILABLE,
                "the server needed room for newer calls while this message had not come",
            )
        self.admission.received(task)
        return data
