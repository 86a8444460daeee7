"""An MLServer runtime that scores an ONNX model with onnxruntime, for bench/serve_http.py.

Loaded by MLServer in the benchmark's own virtual environment (build/bench-venvs/mlserver), never in
the project's; model-settings.json names it as `mlserver_onnx.OnnxRuntime` and gives the model file as
`parameters.uri`.
"""

import numpy as np
import onnxruntime
from mlserver import MLModel
from mlserver.codecs import NumpyCodec
from mlserver.types import InferenceRequest, InferenceResponse


class OnnxRuntime(MLModel):
    async def load(self) -> bool:
        uri = self.settings.parameters.uri
        self.session = onnxruntime.InferenceSession(uri, providers=["CPUExecutionProvider"])
        self.output_names = [output.name for output in self.session.get_outputs()]
        return True

    async def predict(self, payload: InferenceRequest) -> InferenceResponse:
        feeds = {tensor.name: NumpyCodec.decode_input(tensor).astype(np.float32) for tensor in payload.inputs}
        results = self.session.run(self.output_names, feeds)
        outputs = [
            NumpyCodec.encode_output(name, value)
            for name, value in zip(self.output_names, results, strict=True)
        ]
        return InferenceResponse(model_name=self.name, outputs=outputs)
