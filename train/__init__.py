"""Training: data loaders, reference models, and the distributed launcher (`python -m train.spawn`)."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
