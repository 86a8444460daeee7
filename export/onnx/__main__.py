"""`nnsql export onnx`: Keras → ONNX in a model repository that `nnsql serve` serves. The command parses
its options and calls the ONNX target's compile order (export/onnx/compile.py).
`export` is re-exported for programs and tests that call it with the options as arguments."""

from __future__ import annotations

import sys
from pathlib import Path

from nnsql import quiet
from nnsql.export import cli
from nnsql.export.errors import ExportError
from nnsql.export.onnx.compile import compile_onnx, export

__all__ = ["export", "main"]

DESCRIPTION = """\
Convert a trained Keras model to ONNX with Keras's own exporter (tf2onnx underneath), check it with
onnxruntime against Keras on sample rows (max |d| <= 1e-5, and the scorer's classes and labels against
a Keras user's: argmax, p > 0.5) and publish it as REPO/NAME/<next version>/model.onnx with
metadata.json (inputs, outputs, output kinds, classes, sha256, parity). A version that fails the check
is never published. Serve the repository with `nnsql serve`."""


def main(argv: list[str] | None = None) -> int:
    parser = cli.parser(
        "onnx",
        DESCRIPTION,
        "nnsql export onnx --model models/mnist/model.keras --repo model_repository --name mnist",
        "nnsql serve --repo model_repository   (KServe V2 and TF Serving REST; docs/serving.md)",
    )
    parser.add_argument("--repo", required=True, type=Path, help="model repository directory")
    args = parser.parse_args(argv)

    def body() -> int:
        if args.load_test_data:
            raise ExportError("--load-test-data applies to database targets only")
        request = cli.request_from(args)
        version, report = compile_onnx(request, args.repo, progress=not args.quiet)
        print(f"published {args.name} version {version} to {args.repo / args.name / str(version)}")
        print(f"  {report.summary()}")
        return 0

    return cli.run(body)


if __name__ == "__main__":
    quiet.install()  # TensorFlow's start-up lines only with --verbose
    sys.exit(main())
