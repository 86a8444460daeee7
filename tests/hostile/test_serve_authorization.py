"""`nnsql serve` reads the name of an Authorization scheme in any letter case, as HTTP's are (RFC 9110
§11.1): `authorization: bearer <key>` (some clients and proxies write it so) was refused 401 as if the
key were wrong. Every 401 names the scheme it wants (`WWW-Authenticate: Bearer`)."""

from __future__ import annotations

import pytest
import requests

from tests.hostile.test_serve_triton import iris_model
from tests.serve.conftest import ServeProcess

pytestmark = pytest.mark.slow
API_KEY = "scoring-key-5e0c"
ROW = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": [0.5, -1.0, 2.0, 0.25]}]}


def serving(tmp_path, *args: str) -> ServeProcess:
    repo = tmp_path / "repository"
    iris_model(repo, "iris")
    served = ServeProcess(repo, "--workers", "1", *args)
    served.wait_ready()
    served.wait_for_workers(1)
    return served


def test_the_bearer_scheme_is_read_in_any_case(tmp_path):
    key_file = tmp_path / "keys.txt"
    key_file.write_text(f"{API_KEY}\n")
    served = serving(tmp_path, "--api-key-file", str(key_file))
    try:
        url = f"{served.url}/v2/models/iris/infer"
        for scheme in ("Bearer", "bearer", "BEARER", "bEaReR"):
            answer = requests.post(
                url, json=ROW, headers={"Authorization": f"{scheme} {API_KEY}"}, timeout=10
            )
            assert answer.status_code == 200, (scheme, answer.text)
        wrong = requests.post(url, json=ROW, headers={"Authorization": "bearer wrong-key"}, timeout=10)
        assert wrong.status_code == 401 and wrong.headers.get("WWW-Authenticate") == "Bearer"
        other = requests.post(url, json=ROW, headers={"Authorization": f"Basic {API_KEY}"}, timeout=10)
        assert other.status_code == 401  # another scheme does not carry the key
    finally:
        served.stop()
