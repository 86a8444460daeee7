"""The scorer on a cluster: `nnsql serve --manifests` validated against the Kubernetes API schema (KServe's
ServingRuntime against its CRD's fields, its containers against Kubernetes' own Container schema), the
container's arguments read back by the scorer's own parser, and the scorer image's promise (no
TensorFlow) rehearsed: the scorer answers with TensorFlow and Keras impossible to import."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from importlib import resources

import kubernetes_validate
import numpy as np
import pytest
import referencing
import requests
import yaml
from jsonschema import Draft202012Validator

from nnsql.serve import __main__ as scorer
from nnsql.serve import manifests
from tests.conftest import REPO
from tests.fixtures import free_port

KUBERNETES = "1.37.0"
DEFINITIONS = f"kubernetes-json-schema/v{KUBERNETES}-local-strict/_definitions.json"
DEFS = "https://kubernetes.io/api/_definitions.json#/$defs/io.k8s."  # the $id of kubernetes-validate's file
CORE = DEFS + "api.core.v1."
# KServe's ServingRuntime (serving.kserve.io/v1alpha1), the fields of its CRD that this project writes or
# a user may add; containers and volumes are Kubernetes' own types.
SERVING_RUNTIME = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "additionalProperties": False,
    "properties": {
        "apiVersion": {"const": "serving.kserve.io/v1alpha1"},
        "kind": {"const": "ServingRuntime"},
        "metadata": {"$ref": DEFS + "apimachinery.pkg.apis.meta.v1.ObjectMeta"},
        "spec": {
            "type": "object",
            "required": ["containers"],
            "additionalProperties": False,
            "properties": {
                "supportedModelFormats": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": ["name"],
                        "additionalProperties": False,
                        "properties": {
                            "name": {"type": "string"},
                            "version": {"type": "string"},
                            "autoSelect": {"type": "boolean"},
                            "priority": {"type": "integer", "minimum": 1},
                        },
                    },
                },
                "protocolVersions": {"type": "array", "items": {"enum": ["v1", "v2", "grpc-v1", "grpc-v2"]}},
                "multiModel": {"type": "boolean"},
                "disabled": {"type": "boolean"},
                "containers": {"type": "array", "minItems": 1, "items": {"$ref": CORE + "Container"}},
                "volumes": {"type": "array", "items": {"$ref": CORE + "Volume"}},
                "nodeSelector": {"type": "object", "additionalProperties": {"type": "string"}},
                "tolerations": {"type": "array", "items": {"$ref": CORE + "Toleration"}},
            },
        },
    },
}


def generated(*options: str) -> list[dict]:
    args = scorer.parse_args(["--manifests", *options])
    return manifests.documents(args)


def validate_serving_runtime(document: dict) -> None:
    definitions = json.loads(resources.files("kubernetes_validate").joinpath(DEFINITIONS).read_text())
    registry = referencing.Resource.from_contents(definitions) @ referencing.Registry()
    Draft202012Validator(SERVING_RUNTIME, registry=registry).validate(document)


@pytest.mark.parametrize(
    "options",
    [(), ("--grpc-port", "8001", "--threads", "4", "--namespace", "ml", "--api-key-secret", "scorer-keys")],
    ids=["defaults", "grpc-keys-namespace"],
)
def test_manifests_validate_against_the_kubernetes_schema(options):
    deployment, service, runtime = generated(*options)
    for document in (deployment, service):
        kubernetes_validate.validate(document, KUBERNETES, strict=True)
    validate_serving_runtime(runtime)
    assert runtime["spec"]["protocolVersions"][0] == "v2"
    assert {p["name"] for p in service["spec"]["ports"]} == {
        p["name"] for p in runtime["spec"]["containers"][0]["ports"]
    }


def test_the_check_rejects_a_wrong_serving_runtime():
    runtime = generated()[2]
    runtime["spec"]["containers"][0]["securityContext"]["runAsNonRoot"] = "yes"
    with pytest.raises(Exception, match="is not of type 'boolean'"):
        validate_serving_runtime(runtime)
    runtime = generated()[2]
    runtime["spec"]["protocolVersions"] = ["v3"]
    with pytest.raises(Exception, match="v3"):
        validate_serving_runtime(runtime)


def test_pods_listen_on_every_interface_as_a_restricted_non_root_user():
    deployment, _, runtime = generated("--grpc-port", "8001", "--threads", "3")
    pod = deployment["spec"]["template"]["spec"]
    for container, repository in (
        (pod["containers"][0], "/models"),
        (runtime["spec"]["containers"][0], "/mnt/models"),
    ):
        security = container["securityContext"]
        assert security["runAsNonRoot"] and security["runAsUser"] > 0
        assert security["allowPrivilegeEscalation"] is False and security["capabilities"]["drop"] == ["ALL"]
        assert security["seccompProfile"]["type"] == "RuntimeDefault"
        assert container["command"] == ["nnsql"] and container["args"][0] == "serve"
        args = scorer.parse_args(container["args"][1:])  # the scorer's own parser reads them back
        assert (args.host, str(args.repo), args.port, args.grpc_port, args.threads) == (
            "0.0.0.0",
            repository,
            8000,
            8001,
            3,
        )
    assert pod["automountServiceAccountToken"] is False


def test_manifests_print_as_yaml_with_the_next_step(capsys):
    assert (
        scorer.main(["--manifests", "--image", "registry.example.org/nnsql-serve:1", "--pvc", "models"]) == 0
    )
    out, err = capsys.readouterr()
    kinds = [document["kind"] for document in yaml.safe_load_all(out)]
    assert kinds == ["Deployment", "Service", "ServingRuntime"]
    assert "registry.example.org/nnsql-serve:1" in out and "'models'" in err and "&id" not in out


def test_the_scorer_image_installs_the_serve_extra_only_and_runs_as_a_user():
    recipe = (REPO / "serve" / "Containerfile").read_text()
    assert '[serve]"' in recipe and "tensorflow" not in recipe.lower().split("no tensorflow")[-1]
    assert "\nUSER 10001\n" in recipe and '"--host", "0.0.0.0"' in recipe
    pyproject = (REPO / "pyproject.toml").read_text()
    serve_extra = pyproject.split("\nserve = [", 1)[1].split("]", 1)[0]
    assert "onnxruntime" in serve_extra and not any(
        name in serve_extra for name in ("tensorflow", "keras", "tf2onnx")
    )


BLOCK_TENSORFLOW = (
    "import runpy, sys\n"
    "for name in ('tensorflow', 'keras', 'tf_keras', 'tf2onnx'):\n"
    "    sys.modules[name] = None  # import fails, as in the image\n"
    "sys.argv = ['nnsql serve', *sys.argv[1:]]\n"
    "runpy.run_module('nnsql.serve', run_name='__main__')\n"
)


def test_the_scorer_answers_without_tensorflow(onnx_repo):
    port = free_port()
    command = [sys.executable, "-c", BLOCK_TENSORFLOW, "--repo", str(onnx_repo), "--port", str(port)]
    process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and process.poll() is None:
            try:
                if requests.get(f"http://127.0.0.1:{port}/v2/health/ready", timeout=2).status_code == 200:
                    break
            except (requests.ConnectionError, requests.Timeout):  # still starting, or a busy machine
                time.sleep(0.3)
        row = np.zeros(784, dtype=np.float32).tolist()
        body = {"inputs": [{"name": "features", "shape": [1, 784], "datatype": "FP32", "data": row}]}
        answer = requests.post(f"http://127.0.0.1:{port}/v2/models/mnist/infer", json=body, timeout=30)
        assert answer.status_code == 200, answer.text
    finally:
        process.terminate()
        output = process.communicate(timeout=30)[0]
    assert "Traceback" not in output, output
