"""The HTTP scorer: ONNX models from a repository, over KServe V2 and TF Serving REST (`nnsql serve`)."""
