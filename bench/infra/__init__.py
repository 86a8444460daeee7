"""`python -m bench.infra`: benchmark a training cluster through train.spawn (see __main__)."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
