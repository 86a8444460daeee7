"""The message classes of inference.proto, compiled when this module is imported.

grpcio-tools' protoc turns the .proto into descriptors, which go into a private descriptor pool, not
protobuf's default one: generated modules that declare the same `inference.*` names from another file
(tritonclient's, KServe's) can then live in the same process, which the default pool refuses. protoc
runs in a child process (about 0.2 s, once per server): in a process that has loaded TensorFlow, its
compiler crashes on TensorFlow's copy of libprotobuf. Nothing generated is written to the source tree
or committed.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from nnsql.files import shipped

PROTO = shipped("serve", "rpc", "inference.proto")
SERVICE_NAME = "inference.GRPCInferenceService"


def compile_proto(proto: Path) -> descriptor_pb2.FileDescriptorSet:
    with tempfile.TemporaryDirectory(prefix="nnsql-proto-") as scratch:
        output = Path(scratch) / "descriptors.bin"
        command = [sys.executable, "-m", "grpc_tools.protoc", f"-I{proto.parent}"]
        command += [f"--descriptor_set_out={output}", "--include_imports", proto.name]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"protoc could not compile {proto}: {done.stderr.strip()}")
        return descriptor_pb2.FileDescriptorSet.FromString(output.read_bytes())


POOL = descriptor_pool.DescriptorPool()
for _file in compile_proto(PROTO).file:
    POOL.Add(_file)
SERVICE = POOL.FindServiceByName(SERVICE_NAME)


def message(name: str) -> Any:
    """The class of `inference.<name>`."""
    return message_factory.GetMessageClass(POOL.FindMessageTypeByName(f"inference.{name}"))
