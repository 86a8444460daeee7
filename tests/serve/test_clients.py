"""Clients written for other servers, unchanged, against `serve`: Triton's own HTTP client (KServe V2,
binary tensor data by default)."""

from __future__ import annotations

import keras
import numpy as np
import tritonclient.http as triton


def test_triton_http_client_works_unchanged(live, cern_mlp_path):
    client = triton.InferenceServerClient(url=live.url.removeprefix("http://"))
    assert client.is_server_live() and client.is_server_ready() and client.is_model_ready("mnist")
    metadata = client.get_model_metadata("mnist")
    assert metadata["inputs"][0]["name"] == "features"
    x = np.random.default_rng(12).random((16, 784), dtype=np.float32)
    for binary in (True, False):
        tensor = triton.InferInput("features", list(x.shape), "FP32")
        tensor.set_data_from_numpy(x, binary_data=binary)
        wanted = triton.InferRequestedOutput("probabilities", binary_data=binary)
        result = client.infer("mnist", [tensor], outputs=[wanted], model_version="1")
        expected = keras.saving.load_model(cern_mlp_path).predict(x, verbose=0)
        assert np.abs(result.as_numpy("probabilities") - expected).max() <= 1e-5
    client.close()
