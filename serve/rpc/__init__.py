"""The gRPC transport: the KServe V2 / Open Inference Protocol service and the Triton extensions its
clients call (inference.proto), answered by the same functions as the HTTP routes."""
