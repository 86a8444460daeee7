"""The KServe V2 extensions that Triton's clients call: model configuration (config.py), statistics
(statistics.py) and the model repository's index, load and unload (ModelRepository's methods; across
worker processes through serve/coordination.py). service.py is what both transports call: routes.py serves it
over HTTP, serve/rpc over gRPC."""
