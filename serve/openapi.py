"""The OpenAPI 3 document served at /openapi.json."""

from __future__ import annotations

ERROR = {
    "description": "error",
    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
}
JSON_BODY = {"required": True, "content": {"application/json": {"schema": {"type": "object"}}}}


def operation(summary: str, body: bool = False, errors: tuple[str, ...] = ("400", "404")) -> dict:
    result: dict = {"summary": summary, "responses": {"200": {"description": "success"}}}
    result["responses"].update({code: ERROR for code in errors})
    if body:
        result["requestBody"] = JSON_BODY
    return result


def document() -> dict:
    name = {"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}
    version = {"name": "version", "in": "path", "required": True, "schema": {"type": "string"}}
    infer_errors = ("400", "401", "404", "413", "415", "503")
    return {
        "openapi": "3.0.3",
        "info": {
            "title": "nnsql scorer",
            "version": "1",
            "description": "KServe V2 and TF Serving REST over ONNX",
        },
        "paths": {
            "/v2/health/live": {"get": operation("liveness", errors=())},
            "/v2/health/ready": {"get": operation("readiness", errors=("503",))},
            "/v2": {"get": operation("server metadata", errors=())},
            "/v2/models/{name}": {"get": {**operation("model metadata"), "parameters": [name]}},
            "/v2/models/{name}/ready": {"get": {**operation("model readiness"), "parameters": [name]}},
            "/v2/models/{name}/infer": {
                "post": {**operation("inference", True, infer_errors), "parameters": [name]}
            },
            "/v2/models/{name}/versions/{version}": {
                "get": {**operation("version metadata"), "parameters": [name, version]}
            },
            "/v2/models/{name}/versions/{version}/infer": {
                "post": {
                    **operation("inference on a version", True, infer_errors),
                    "parameters": [name, version],
                }
            },
            "/v1/models/{name}": {"get": {**operation("TF Serving model status"), "parameters": [name]}},
            "/v1/models/{name}/metadata": {"get": {**operation("TF Serving metadata"), "parameters": [name]}},
            "/v1/models/{name}:predict": {
                "post": {**operation("TF Serving predict", True, infer_errors), "parameters": [name]}
            },
            "/score": {
                "post": operation(
                    'class and probabilities of one row: {"features": [...]}', True, infer_errors
                )
            },
            "/v2/models/{name}/config": {
                "get": {
                    **operation("model configuration (Triton's)", errors=("401", "404")),
                    "parameters": [name],
                }
            },
            "/v2/models/{name}/versions/{version}/config": {
                "get": {
                    **operation("version configuration", errors=("401", "404")),
                    "parameters": [name, version],
                }
            },
            "/v2/models/stats": {"get": operation("statistics of every loaded version", errors=("401",))},
            "/v2/models/{name}/stats": {
                "get": {
                    **operation("statistics of a model's versions", errors=("401", "404")),
                    "parameters": [name],
                }
            },
            "/v2/models/{name}/versions/{version}/stats": {
                "get": {
                    **operation("statistics of a version", errors=("401", "404")),
                    "parameters": [name, version],
                }
            },
            "/v2/repository/index": {
                "post": operation("every model and version with its state", errors=("401",))
            },
            "/v2/repository/models/{name}/load": {
                "post": {**operation("load a model", errors=("400", "401", "404")), "parameters": [name]}
            },
            "/v2/repository/models/{name}/unload": {
                "post": {**operation("unload a model", errors=("401", "404")), "parameters": [name]}
            },
            "/metrics": {"get": operation("Prometheus metrics", errors=("401",))},
        },
        "components": {
            "schemas": {
                "Error": {
                    "type": "object",
                    "properties": {"error": {"type": "string"}},
                    "required": ["error"],
                }
            },
            "securitySchemes": {"apiKey": {"type": "http", "scheme": "bearer"}},
        },
    }
