"""ONNX target: Keras's ONNX export (tf2onnx), verified with onnxruntime, published to a model repository."""
