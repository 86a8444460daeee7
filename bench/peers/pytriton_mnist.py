"""Triton (through PyTriton) serving an ONNX model with onnxruntime, for bench/serve_http.py.

Runs in the benchmark's own virtual environment (build/bench-venvs/triton: nvidia-pytriton and
onnxruntime), never in the project's: `python pytriton_mnist.py MODEL.onnx HTTP GRPC METRICS`.
Triton's HTTP front end (C++) takes the requests and its dynamic batcher merges them; the Python
function below runs each batch on onnxruntime.
"""

import sys

import numpy as np
import onnxruntime
from pytriton.decorators import batch
from pytriton.model_config import DynamicBatcher, ModelConfig, Tensor
from pytriton.triton import Triton, TritonConfig


def main() -> None:
    model, http, grpc, metrics = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    session = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"])

    @batch
    def infer(features: np.ndarray) -> dict:
        (probabilities,) = session.run(["probabilities"], {"features": features.astype(np.float32)})
        return {"probabilities": probabilities}

    config = TritonConfig(http_port=http, grpc_port=grpc, metrics_port=metrics, log_verbose=0)
    with Triton(config=config) as triton:
        triton.bind(
            model_name="mnist",
            infer_func=infer,
            inputs=[Tensor(name="features", dtype=np.float32, shape=(784,))],
            outputs=[Tensor(name="probabilities", dtype=np.float32, shape=(10,))],
            config=ModelConfig(max_batch_size=256, batcher=DynamicBatcher()),
            strict=False,
        )
        triton.serve()


if __name__ == "__main__":
    main()
