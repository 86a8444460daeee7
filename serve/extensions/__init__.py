"""The KServe V2 extensions that Triton's clients call: model configuration (config.py), statistics
(statistics.py) and the model repository's index, load and unload (control.py). routes.py serves them
over HTTP; serve/rpc serves the same functions over gRPC."""
