"""`python -m serve`: serve a model repository with waitress and the Flask app.

waitress reads every request whole (headers and body) in its asynchronous loop, and only then hands it to
one of `--threads` threads; a client that sends slowly, or stops half way, holds a connection slot until
`--client-timeout`, never a thread. One process: its threads share the loaded models, the batcher and the
metrics (so /metrics never goes backwards), and onnxruntime uses the cores for the model itself.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m serve",
        description="Serve every model and version of a model repository (written by python -m "
        "export.onnx) over KServe V2 / Open Inference Protocol (REST, and gRPC with --grpc-port) and "
        "TF Serving REST, with a page for any model at /. New versions are picked up without a restart.",
    )
    parser.add_argument("--repo", type=Path, default=Path("model_repository"), help="model repository")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument(
        "--grpc-port",
        type=int,
        help="also serve the KServe V2 gRPC protocol (and Triton's extensions) on this port, e.g. 8001",
    )
    parser.add_argument("--threads", type=int, default=8, help="threads that run requests (default 8)")
    parser.add_argument("--max-batch-size", type=int, default=32, help="rows merged into one session.run")
    parser.add_argument(
        "--max-batch-delay-ms",
        type=float,
        default=0.0,
        help="wait this long for more rows (default 0: merge what is already queued)",
    )
    parser.add_argument("--max-request-rows", type=int, default=1024, help="rows per request (413 above)")
    parser.add_argument(
        "--max-body-mb", type=float, default=64, help="largest request body in MiB (413 above; default 64)"
    )
    parser.add_argument(
        "--client-timeout",
        type=float,
        default=30,
        help="seconds a connection may stay silent, mid-request or idle, before it is closed (default 30)",
    )
    parser.add_argument(
        "--max-connections", type=int, default=1000, help="open connections at once (default 1000)"
    )
    parser.add_argument(
        "--poll-seconds", type=float, default=1.0, help="how often the repository is rescanned"
    )
    parser.add_argument("--api-key-file", help="require one of the keys in this file (one per line)")
    return parser.parse_args(argv)


def app_config(args: argparse.Namespace) -> dict:
    return {
        "REPO": str(args.repo),
        "MAX_BATCH_SIZE": args.max_batch_size,
        "MAX_BATCH_DELAY_MS": args.max_batch_delay_ms,
        "MAX_REQUEST_ROWS": args.max_request_rows,
        "POLL_SECONDS": args.poll_seconds,
        "API_KEY_FILE": args.api_key_file,
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if not args.repo.is_dir():
        print(
            f"error: model repository {args.repo} does not exist (python -m export.onnx writes one)",
            file=sys.stderr,
        )
        return 2
    if args.api_key_file and not Path(args.api_key_file).is_file():
        print(f"error: API key file {args.api_key_file} not found", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    from waitress.server import create_server

    from serve.app import create_app

    try:
        app = create_app(app_config(args))
    except ValueError as error:  # an unusable API key file
        print(f"error: {error}", file=sys.stderr)
        return 2
    server = create_server(
        app,
        host=args.host,
        port=args.port,
        threads=args.threads,
        connection_limit=args.max_connections,
        channel_timeout=args.client_timeout,
        cleanup_interval=max(1, int(args.client_timeout / 3)),
        max_request_body_size=int(args.max_body_mb * 1024 * 1024),
        asyncore_use_poll=True,  # select() stops at 1024 descriptors
        ident="nnsql",
    )
    stop_grpc = None
    if args.grpc_port is not None:
        from serve.rpc.server import grpc_service

        start_grpc = grpc_service(
            args.host,
            args.grpc_port,
            threads=args.threads,
            max_message_bytes=int(args.max_body_mb * 1024 * 1024),
            max_concurrent_calls=args.max_connections,
        )
        try:
            stop_grpc = start_grpc(app)
        except OSError as error:
            server.close()
            app.extensions["repository"].close()
            print(f"error: {error}", file=sys.stderr)
            return 2
        print(f"serving gRPC (KServe V2) on {args.host}:{args.grpc_port}")
    print(f"serving {args.repo} on http://{args.host}:{server.effective_port}/ with {args.threads} threads")
    try:
        server.run()
    except KeyboardInterrupt:
        pass
    finally:
        if stop_grpc is not None:
            stop_grpc()
        server.close()
        app.extensions["repository"].close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
