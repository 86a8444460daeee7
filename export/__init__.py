"""The model compiler: Keras front end → target-neutral IR → one generator per target."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
