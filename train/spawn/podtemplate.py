"""A user's Pod under the generated pod spec (`--pod-file`, TF-Spawner's pod.yaml and pod-gpu.yaml).

Theirs supplies what ours lacks (tolerations, image pull secrets, extra volumes and mounts, env, a GPU
limit); ours wins where both say something (command, image, the script's volume). TF-Spawner's files
leave keys bare (`env:` with nothing under it): a bare key is an empty one.
"""

from __future__ import annotations

import copy
from typing import Any


def deep_merge(base: dict, overlay: dict) -> dict:
    merged = copy.deepcopy(base)
    for key, value in overlay.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def without_bare_keys(value: Any) -> Any:
    """A YAML mapping with its `key:`-with-nothing entries dropped, at every depth."""
    if isinstance(value, dict):
        return {k: without_bare_keys(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [without_bare_keys(item) for item in value if item is not None]
    return value


def template_spec(template: dict) -> dict:
    """The pod spec of a user's Pod file; ValueError when the file is not a Pod (or a pod spec)."""
    if not isinstance(template, dict):
        raise ValueError("--pod-file: expected a Pod manifest (a YAML mapping)")
    spec = without_bare_keys(template.get("spec", template if "containers" in template else {}))
    if not isinstance(spec, dict) or not isinstance(spec.get("containers", []), list):
        raise ValueError("--pod-file: expected a Pod whose spec has a list of containers")
    return spec


def requested_gpus(template: dict) -> int:
    """nvidia.com/gpu that the Pod file's first container asks for (TF-Spawner's pod-gpu.yaml: 1)."""
    resources = first_resources(template)
    asked = [(resources.get(kind) or {}).get("nvidia.com/gpu", 0) for kind in ("limits", "requests")]
    return max(int(value) for value in asked)


def first_resources(template: dict) -> dict:
    """The `resources` of the Pod file's first container ({} without a file)."""
    if not template:
        return {}
    containers = template_spec(template).get("containers") or [{}]
    return containers[0].get("resources") or {}


def requested(template: dict) -> dict[str, str]:
    """cpu and memory the Pod file asks for (CERN's pod-cpu.yaml: 10 and 30Gi), a request before a limit."""
    resources = first_resources(template)
    found = {}
    for kind in ("limits", "requests"):  # the request, when both are given, is what the pod is sized by
        for name in ("cpu", "memory"):
            value = (resources.get(kind) or {}).get(name)
            if value is not None:
                found[name] = str(value)
    return found


def keyed(items: list[dict], key: str) -> set[str]:
    return {item[key] for item in items if key in item}


def under_pod_template(pod_spec: dict, template: dict) -> dict:
    """The generated pod spec merged over a user's Pod."""
    if not template:
        return pod_spec
    base = template_spec(template)
    theirs = (base.pop("containers", None) or [{}])[0]
    ours = pod_spec["containers"][0]
    merged = deep_merge(base, {k: v for k, v in pod_spec.items() if k not in ("containers", "volumes")})
    container = deep_merge(theirs, {k: v for k, v in ours.items() if k not in ("env", "volumeMounts")})
    for field, key in (("env", "name"), ("volumeMounts", "mountPath")):
        mine = keyed(ours[field], key)
        kept = [item for item in theirs.get(field) or [] if item.get(key) not in mine]
        container[field] = [*kept, *ours[field]]
    ours_by_name = keyed(pod_spec["volumes"], "name")
    volumes = [volume for volume in base.get("volumes") or [] if volume.get("name") not in ours_by_name]
    return {**merged, "containers": [container], "volumes": [*volumes, *pod_spec["volumes"]]}
