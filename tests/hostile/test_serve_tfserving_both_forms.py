"""A TF Serving REST body holding both `instances` and `inputs`, each with other rows: TF Serving refuses
it (only one of the two keys may exist); nnsql scored `instances` silently, although the client may have
meant `inputs`, whose rows got no answer."""

from __future__ import annotations

import numpy as np
import requests

from tests.serve.conftest import live, onnx_repo, serve_app  # noqa: F401  (the fixtures, used below)


def test_instances_and_inputs_together_are_refused_in_one_line(live):  # noqa: F811
    rows = np.random.default_rng(0).random((2, 784)).round(4).tolist()
    url = f"{live.url}/v1/models/mnist:predict"
    reply = requests.post(url, json={"instances": rows[:1], "inputs": rows[1:]}, timeout=30)
    assert reply.status_code == 400, reply.text
    assert "not both" in reply.json()["error"] and "\n" not in reply.json()["error"]
    for form, key in (("instances", "predictions"), ("inputs", "outputs")):  # each alone still scores
        alone = requests.post(url, json={form: rows[:1]}, timeout=30)
        assert alone.status_code == 200 and len(alone.json()[key]) == 1, alone.text
