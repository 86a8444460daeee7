"""The HTTP scorer: ONNX models from a repository, over KServe V2 and TF Serving REST (`nnsql serve`)."""

from nnsql.short_names import entry_only

entry_only(__name__)
