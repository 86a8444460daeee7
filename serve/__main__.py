"""`nnsql serve`: serve a model repository on every core.

The master checks the arguments, binds the port, and starts `--workers` worker processes
(serve/worker.py) that share the listening socket; each reads requests whole in its own event loop
(serve/server.py) and runs the Flask app (serve/app.py) in its threads. The master restarts a worker
that dies, keeps the workers' model repositories in step (serve/coordination.py) and, on Ctrl-C or
SIGTERM, stops them. It imports neither Flask nor onnxruntime: workers are started, not forked.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from nnsql import quiet
from nnsql.serve import manifests, options
from nnsql.serve.master import Master, StartError, check_start


def default_workers() -> int:
    import os

    return max(1, len(os.sched_getaffinity(0)))


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = options.Parser(
        prog="nnsql serve",
        description="Serve every model and version of a model repository (written by nnsql export onnx)\n"
        "over KServe V2 / Open Inference Protocol (REST, and gRPC with --grpc-port) and TF Serving\n"
        "REST, with a page for any model at /. New versions are picked up without a restart.",
        epilog="example:\n  nnsql serve --repo model_repository --port 8000\n"
        "next step:\n  curl -s http://127.0.0.1:8000/v2/models/MODEL   (its inputs; then POST to "
        ".../infer: docs/serving-protocols.md)\n"
        "  nnsql serve --manifests --image IMAGE   (Deployment, Service, ServingRuntime: docs/kubernetes.md)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--repo",
        type=Path,
        default=Path("model_repository"),
        help="model repository (default model_repository), written by nnsql export onnx --repo",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=options.port, default=8000, help="HTTP port (default 8000)")
    parser.add_argument(
        "--grpc-port",
        type=options.port,
        help="also serve the KServe V2 gRPC protocol (and Triton's extensions) on this port, e.g. 8001",
    )
    parser.add_argument(
        "--workers",
        type=options.at_least(1),
        default=default_workers(),
        help=f"worker processes sharing the port (default: the cores available, {default_workers()})",
    )
    parser.add_argument(
        "--threads",
        type=options.at_least(0),
        default=2,
        help="threads per worker that run requests (default 2; 0: on the event loop itself)",
    )
    parser.add_argument(
        "--max-batch-size", type=options.at_least(1), default=32, help="rows merged into one session.run"
    )
    parser.add_argument(
        "--max-batch-delay-ms",
        type=options.not_negative,
        default=0.0,
        help="wait this long for more rows (default 0: merge what is already queued)",
    )
    parser.add_argument(
        "--max-request-rows", type=options.at_least(1), default=1024, help="rows per request (413 above)"
    )
    parser.add_argument(
        "--max-body-mb",
        type=options.positive,
        default=64,
        help="largest request body in MiB (413 above; default 64)",
    )
    parser.add_argument(
        "--max-buffered-mb",
        type=options.positive,
        default=512,
        help="request bodies held in memory at once, per worker, in MiB (503 above; default 512)",
    )
    parser.add_argument(
        "--request-timeout",
        type=options.positive,
        default=30,
        help="seconds a client has to send a whole request, headers and body (default 30)",
    )
    parser.add_argument(
        "--client-timeout",
        type=options.positive,
        default=30,
        help="seconds a kept-alive connection may wait for its next request (default 30)",
    )
    parser.add_argument(
        "--max-connections",
        type=options.at_least(1),
        default=1000,
        help="open connections per worker, HTTP and gRPC each; at the cap the oldest idle or slow one is "
        "closed (default 1000)",
    )
    parser.add_argument(
        "--max-client-connections",
        type=options.at_least(1),
        default=64,
        help="open connections per client address (an IPv6 client's /64) and worker, HTTP and gRPC each "
        "(default 64; raise it behind a proxy)",
    )
    parser.add_argument(
        "--poll-seconds", type=options.positive, default=1.0, help="how often the repository is rescanned"
    )
    parser.add_argument(
        "--worker-timeout",
        type=options.positive,
        default=30,
        help="seconds a worker may go without a heartbeat and without using CPU (stopped or hung) "
        "before it is killed and another started (default 30); a worker busy loading is waited for",
    )
    parser.add_argument("--api-key-file", help="require one of the keys in this file (one per line)")
    parser.add_argument(
        "--model-control",
        choices=("none", "explicit"),
        default="none",
        help="none (default): the repository API cannot load or unload models; explicit: it can, "
        "with the admin key",
    )
    parser.add_argument(
        "--admin-key-env",
        metavar="VARIABLE",
        help="environment variable holding the admin key that loading and unloading need "
        "(with --model-control explicit; never one of the scoring keys)",
    )
    parser.add_argument(
        "--allowed-hosts",
        default="",
        help="comma-separated Host names served besides IP addresses, localhost and --host "
        "(.example.com: the domain and its subdomains; *: any)",
    )
    parser.add_argument(
        "--allowed-origins",
        default="",
        help="comma-separated browser origins (https://app.example) that may call the API, with CORS; "
        "*: any. The scorer's own page is always allowed",
    )
    parser.add_argument(
        "--access-log",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="log every request as a JSON line on stderr (default on)",
    )
    manifests.add_options(parser)
    args = parser.parse_args(argv)
    if args.worker_timeout < 2:
        parser.error("--worker-timeout must be at least 2 seconds (workers beat every second)")
    return args


def split(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


def app_config(args: argparse.Namespace) -> dict:
    return {
        # workers start in another directory (the package's root): paths go to them absolute
        "REPO": str(args.repo.resolve()),
        "MAX_BATCH_SIZE": args.max_batch_size,
        "MAX_BATCH_DELAY_MS": args.max_batch_delay_ms,
        "MAX_REQUEST_ROWS": args.max_request_rows,
        "POLL_SECONDS": args.poll_seconds,
        "API_KEY_FILE": str(Path(args.api_key_file).resolve()) if args.api_key_file else None,
        "LISTEN_HOST": args.host,
        "ALLOWED_HOSTS": split(args.allowed_hosts),
        "ALLOWED_ORIGINS": split(args.allowed_origins),
        "MODEL_CONTROL": args.model_control,
        "ADMIN_KEY_ENV": args.admin_key_env,
    }


def grpc_settings(args: argparse.Namespace) -> dict | None:
    """What each worker needs to start its gRPC server (serve/rpc/server.py), if --grpc-port is given."""
    if args.grpc_port is None:
        return None
    return {
        "host": args.host,
        "port": args.grpc_port,
        "threads": max(2, args.threads),
        "max_message_bytes": int(args.max_body_mb * 1024 * 1024),
        # calls holding their message (a few copies of it each): as many as threads that run them
        "max_calls_in_memory": max(2, args.threads),
        "max_connections": args.max_connections,
        "max_client_connections": args.max_client_connections,
        "idle_seconds": args.client_timeout,
        "max_age_seconds": args.request_timeout,  # connections are renewed: what they hold is let go
        "read_seconds": args.request_timeout,  # a call's message, as a request's body over HTTP
        "reuse_port": True,  # every worker binds the port; the master checked that nobody else holds it
    }


def limits(args: argparse.Namespace) -> dict:
    return {
        "max_connections": args.max_connections,
        "max_client_connections": args.max_client_connections,
        "request_timeout": args.request_timeout,
        "idle_timeout": args.client_timeout,
        "max_body": int(args.max_body_mb * (1 << 20)),
        "max_buffered": int(args.max_buffered_mb * (1 << 20)),
        "threads": args.threads,
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.manifests:
        return manifests.write(args)
    try:
        listeners = check_start(args)
    except StartError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    master = Master(listeners, args, app_config(args), limits(args), grpc_settings(args))
    return master.run()


if __name__ == "__main__":
    quiet.install()  # TensorFlow's start-up lines only with --verbose
    sys.exit(main())
