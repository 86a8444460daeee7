"""`python -m serve`: serve a model repository with gunicorn (threads, workers) and the Flask app."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from gunicorn.app.base import BaseApplication


class Server(BaseApplication):
    """gunicorn with the app built in each worker after fork (each worker loads the models)."""

    def __init__(self, config: dict, options: dict) -> None:
        self.app_config = config
        self.options = options
        super().__init__()

    def load_config(self) -> None:
        for key, value in self.options.items():
            self.cfg.set(key, value)

    def load(self):
        from serve.app import create_app

        return create_app(self.app_config)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m serve",
        description="Serve every model and version of a model repository (written by python -m "
        "export.onnx) over KServe V2 / Open Inference Protocol and TF Serving REST, with a drawing page "
        "at /. New versions are picked up without a restart.",
    )
    parser.add_argument("--repo", type=Path, default=Path("model_repository"), help="model repository")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--workers", type=int, default=1, help="processes (each loads every model)")
    parser.add_argument("--threads", type=int, default=16, help="threads per worker")
    parser.add_argument("--max-batch-size", type=int, default=32, help="rows merged into one session.run")
    parser.add_argument(
        "--max-batch-delay-ms",
        type=float,
        default=0.0,
        help="wait this long for more rows (default 0: merge what is already queued)",
    )
    parser.add_argument("--max-request-rows", type=int, default=1024, help="rows per request (413 above)")
    parser.add_argument(
        "--poll-seconds", type=float, default=1.0, help="how often the repository is rescanned"
    )
    parser.add_argument("--api-key-file", help="require one of the keys in this file (one per line)")
    return parser.parse_args(argv)


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
    config = {
        "REPO": str(args.repo),
        "MAX_BATCH_SIZE": args.max_batch_size,
        "MAX_BATCH_DELAY_MS": args.max_batch_delay_ms,
        "MAX_REQUEST_ROWS": args.max_request_rows,
        "POLL_SECONDS": args.poll_seconds,
        "API_KEY_FILE": args.api_key_file,
    }
    options = {
        "bind": f"{args.host}:{args.port}",
        "workers": args.workers,
        "threads": args.threads,
        "worker_class": "gthread",
        "accesslog": None,
        "timeout": 60,
    }
    Server(config, options).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
